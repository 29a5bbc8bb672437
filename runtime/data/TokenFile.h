//===- TokenFile.h - llm.c token files --------------------------*- C++ -*-===//
//
// The training data format (docs/data.md): a header of 256 little-endian
// int32 -- [0] magic 20240520, [1] version 1, [2] token count N, the rest 0 --
// followed by N little-endian uint16 tokens.
//
// Step s (0-based) of global batch B and sequence length T reads the span
// starting at base = (s mod stepsPerPass) * B*T; global sample g of the step
// takes inputs tokens[base + g*T + j] and targets tokens[base + g*T + j + 1],
// j < T. Which rank or micro-batch computes a sample never changes its data.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DATA_TOKENFILE_H
#define AUTOPAR_RUNTIME_DATA_TOKENFILE_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;
constexpr int64_t kTokenFileHeaderInts = 256;
constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

struct TokenFile {
  std::string path;
  std::vector<uint16_t> tokens;
};

/// Reads a whole token file. Errors name the file: "PATH: cannot open: ...",
/// "PATH: too short for the 1024-byte header", "PATH: not a token file (magic
/// M, expected 20240520)", "PATH: unsupported version V (expected 1)",
/// "PATH: header says N tokens but the file holds M".
Status loadTokenFile(const std::string &path, TokenFile &out);

/// Checks that the file can feed steps of `globalBatch` x `seqLen` samples
/// (at least B*T+1 tokens) and that every token is below `vocab`.
Status checkTokenFile(const TokenFile &file, int64_t globalBatch,
                      int64_t seqLen, int64_t vocab);

/// Steps before the data wraps: floor((N-1) / (B*T)).
int64_t stepsPerPass(const TokenFile &file, int64_t globalBatch,
                     int64_t seqLen);

/// Writes global samples firstSample .. firstSample+numSamples-1 of step
/// `step` into `inputs` and `targets`, each row-major [numSamples, seqLen].
/// The file must have passed checkTokenFile for these B and T.
void fillSamples(const TokenFile &file, int64_t step, int64_t globalBatch,
                 int64_t seqLen, int64_t firstSample, int64_t numSamples,
                 int64_t *inputs, int64_t *targets);

/// Writes a token file atomically (PATH.tmp.<pid>, then rename).
/// Error: "PATH: cannot write: <strerror>".
Status writeTokenFile(const std::string &path,
                      const std::vector<uint16_t> &tokens);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_DATA_TOKENFILE_H
