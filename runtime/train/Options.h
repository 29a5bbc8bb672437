//===- Options.h - the command line of a training binary --------*- C++ -*-===//
//
//   train --data TOKENS.bin --steps N [--log LOG.jsonl]
//         [--save DIR [--save-every K] [--keep-last N]] [--resume DIR]
//         [--export-onnx OUT.onnx] [--export-adapter DIR] [--seed S]
//         [--eval-data TOKENS.bin --eval-every K [--eval-steps M]]
//         [--trace TRACE.json] [--comm-timeout S]
//
// The options of a run and their parsing, with the checks that need no
// input file (which options go together); what each option does is the
// trainer's (runtime/train/Trainer.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAIN_OPTIONS_H
#define AUTOPAR_RUNTIME_TRAIN_OPTIONS_H

#include <cstdint>
#include <string>

namespace autopar::rt::train {

struct Options {
  std::string data, log, save, resume, exportOnnx, exportAdapter, evalData,
      trace;
  int64_t steps = -1, saveEvery = 0, seed = 0, evalEvery = 0, evalSteps = 1;
  int64_t keepLast = 1;
  /// --comm-timeout S (seconds > 0): the watchdog's timeout instead of the
  /// plan's comm.timeout_s; 0: the plan's.
  double commTimeout = 0;
};

/// Parses argv; on error prints one line and returns false (exitCode 2);
/// --help prints the usage and returns false with exitCode 0.
bool parseOptions(int argc, char **argv, Options &o, int &exitCode);

} // namespace autopar::rt::train

#endif // AUTOPAR_RUNTIME_TRAIN_OPTIONS_H
