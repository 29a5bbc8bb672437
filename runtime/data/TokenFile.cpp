//===- TokenFile.cpp - llm.c token files ----------------------------------===//

#include "runtime/data/TokenFile.h"

#include "runtime/support/File.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace autopar::rt {

namespace {

bool hostIsLittleEndian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

int32_t readLe32(const unsigned char *p) {
  uint32_t v = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
               uint32_t(p[3]) << 24;
  int32_t out;
  std::memcpy(&out, &v, 4);
  return out;
}

void writeLe32(unsigned char *p, int32_t value) {
  uint32_t v;
  std::memcpy(&v, &value, 4);
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::string errnoText(int err) { return std::strerror(err); }

/// Closes `f` on every path out of loadTokenFile.
struct FileCloser {
  FILE *f;
  ~FileCloser() {
    if (f)
      std::fclose(f);
  }
};

} // namespace

Status loadTokenFile(const std::string &path, TokenFile &out) {
  out.path = path;
  out.tokens.clear();
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error(path + ": cannot open: " + errnoText(errno));
  FileCloser closer{f};

  struct stat st;
  if (fstat(fileno(f), &st) != 0)
    return Status::error(path + ": cannot open: " + errnoText(errno));
  if (S_ISDIR(st.st_mode))
    return Status::error(path + ": cannot open: " + errnoText(EISDIR));
  int64_t fileBytes = static_cast<int64_t>(st.st_size);

  unsigned char header[kTokenFileHeaderBytes];
  size_t got = std::fread(header, 1, sizeof(header), f);
  if (got != sizeof(header)) {
    if (std::ferror(f))
      return Status::error(path + ": cannot read: " + errnoText(errno));
    return Status::error(path + ": too short for the 1024-byte header");
  }
  int32_t magic = readLe32(header);
  if (magic != kTokenFileMagic)
    return Status::error(path + ": not a token file (magic " +
                         std::to_string(magic) + ", expected " +
                         std::to_string(kTokenFileMagic) + ")");
  int32_t version = readLe32(header + 4);
  if (version != kTokenFileVersion)
    return Status::error(path + ": unsupported version " +
                         std::to_string(version) + " (expected " +
                         std::to_string(kTokenFileVersion) + ")");
  int64_t declared = readLe32(header + 8);
  int64_t payload = fileBytes - kTokenFileHeaderBytes;
  if (payload < 0)
    payload = 0;
  int64_t held = payload / 2;
  if (declared != held || payload % 2 != 0) {
    std::string msg = path + ": header says " + std::to_string(declared) +
                      " tokens but the file holds " + std::to_string(held);
    if (payload % 2 != 0)
      msg += " and a stray byte";
    return Status::error(msg);
  }

  out.tokens.resize(static_cast<size_t>(declared));
  if (declared > 0) {
    got = std::fread(out.tokens.data(), 2, out.tokens.size(), f);
    if (got != out.tokens.size()) {
      out.tokens.clear();
      if (std::ferror(f))
        return Status::error(path + ": cannot read: " + errnoText(errno));
      return Status::error(path + ": header says " + std::to_string(declared) +
                           " tokens but the file holds " + std::to_string(got));
    }
  }
  if (!hostIsLittleEndian())
    for (uint16_t &t : out.tokens)
      t = static_cast<uint16_t>((t >> 8) | (t << 8));
  return Status::ok();
}

Status checkTokenFile(const TokenFile &file, int64_t globalBatch,
                      int64_t seqLen, int64_t vocab) {
  if (globalBatch <= 0 || seqLen <= 0)
    return Status::error(file.path + ": cannot feed steps of batch " +
                         std::to_string(globalBatch) + " x sequence " +
                         std::to_string(seqLen));
  int64_t n = static_cast<int64_t>(file.tokens.size());
  int64_t need = globalBatch * seqLen + 1;
  if (n < need)
    return Status::error(file.path + ": " + std::to_string(n) +
                         " tokens, fewer than one step needs (B*T+1 = " +
                         std::to_string(need) + ")");
  if (vocab < 65536) {
    const uint16_t *t = file.tokens.data();
    for (int64_t i = 0; i < n; ++i)
      if (t[i] >= vocab)
        return Status::error(file.path + ": token " + std::to_string(t[i]) +
                             " at position " + std::to_string(i) +
                             " is outside the vocabulary (size " +
                             std::to_string(vocab) + ")");
  }
  return Status::ok();
}

int64_t stepsPerPass(const TokenFile &file, int64_t globalBatch,
                     int64_t seqLen) {
  int64_t perStep = globalBatch * seqLen;
  int64_t n = static_cast<int64_t>(file.tokens.size());
  if (perStep <= 0 || n < 1)
    return 0;
  return (n - 1) / perStep;
}

void fillSamples(const TokenFile &file, int64_t step, int64_t globalBatch,
                 int64_t seqLen, int64_t firstSample, int64_t numSamples,
                 int64_t *inputs, int64_t *targets) {
  int64_t n = static_cast<int64_t>(file.tokens.size());
  if (n == 0 || numSamples <= 0 || seqLen <= 0)
    return;
  int64_t passSteps = stepsPerPass(file, globalBatch, seqLen);
  int64_t base = 0;
  if (passSteps > 0) {
    int64_t s = step % passSteps;
    if (s < 0)
      s += passSteps;
    base = s * globalBatch * seqLen;
  }
  const uint16_t *t = file.tokens.data();
  for (int64_t i = 0; i < numSamples; ++i) {
    int64_t start = base + (firstSample + i) * seqLen;
    int64_t *in = inputs + i * seqLen;
    int64_t *tg = targets + i * seqLen;
    if (start >= 0 && start + seqLen + 1 <= n) {
      for (int64_t j = 0; j < seqLen; ++j) {
        in[j] = t[start + j];
        tg[j] = t[start + j + 1];
      }
      continue;
    }
    // Only reachable when the file did not pass checkTokenFile for this
    // shape: stay inside the array by wrapping indices.
    for (int64_t j = 0; j < seqLen; ++j) {
      int64_t a = ((start + j) % n + n) % n;
      int64_t b = ((start + j + 1) % n + n) % n;
      in[j] = t[a];
      tg[j] = t[b];
    }
  }
}

Status writeTokenFile(const std::string &path,
                      const std::vector<uint16_t> &tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    return Status::error(path +
                         ": cannot write: " + std::to_string(tokens.size()) +
                         " tokens do not fit the header's int32 count");
  // Header then little-endian uint16 tokens.
  std::vector<unsigned char> bytes(kTokenFileHeaderBytes + 2 * tokens.size());
  writeLe32(bytes.data(), kTokenFileMagic);
  writeLe32(bytes.data() + 4, kTokenFileVersion);
  writeLe32(bytes.data() + 8, static_cast<int32_t>(tokens.size()));
  unsigned char *body = bytes.data() + kTokenFileHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    body[2 * i] = static_cast<unsigned char>(tokens[i] & 0xff);
    body[2 * i + 1] = static_cast<unsigned char>(tokens[i] >> 8);
  }
  return writeFileAtomically(path, bytes.data(), bytes.size());
}

} // namespace autopar::rt
