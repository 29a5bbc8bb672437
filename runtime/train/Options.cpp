//===- Options.cpp - the command line of a training binary ----------------===//
//
// Every error is one line on stderr that names the option at fault.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace autopar::rt::train {

namespace {

const char *const kUsage =
    "usage: train --data TOKENS.bin --steps N [--log LOG.jsonl] "
    "[--save DIR [--save-every K] [--keep-last N]] [--resume DIR] "
    "[--export-onnx OUT.onnx] [--export-adapter DIR] "
    "[--seed S] [--eval-data TOKENS.bin --eval-every K [--eval-steps M]] "
    "[--trace TRACE.json] [--comm-timeout S]\n";

bool parseInt(const char *text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  // Beyond int64: refused, not clamped.
  if (!*text || *end || errno == ERANGE)
    return false;
  out = v;
  return true;
}

} // namespace

bool parseOptions(int argc, char **argv, Options &o, int &exitCode) {
  exitCode = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      exitCode = 0;
      return false;
    }
    std::string *text = nullptr;
    int64_t *number = nullptr;
    if (arg == "--comm-timeout") {
      char *end = nullptr;
      const char *value = i + 1 < argc ? argv[++i] : "";
      o.commTimeout = std::strtod(value, &end);
      if (!*value || *end || !(o.commTimeout > 0) ||
          !std::isfinite(o.commTimeout)) {
        std::fprintf(stderr,
                     "train: --comm-timeout: expected seconds > 0, "
                     "got '%s'\n",
                     value);
        return false;
      }
      continue;
    }
    if (arg == "--data")
      text = &o.data;
    else if (arg == "--log")
      text = &o.log;
    else if (arg == "--save")
      text = &o.save;
    else if (arg == "--resume")
      text = &o.resume;
    else if (arg == "--export-onnx")
      text = &o.exportOnnx;
    else if (arg == "--export-adapter")
      text = &o.exportAdapter;
    else if (arg == "--eval-data")
      text = &o.evalData;
    else if (arg == "--trace")
      text = &o.trace;
    else if (arg == "--eval-every")
      number = &o.evalEvery;
    else if (arg == "--eval-steps")
      number = &o.evalSteps;
    else if (arg == "--steps")
      number = &o.steps;
    else if (arg == "--save-every")
      number = &o.saveEvery;
    else if (arg == "--keep-last")
      number = &o.keepLast;
    else if (arg == "--seed")
      number = &o.seed;
    else {
      std::fprintf(stderr, "train: unknown option '%s' (see train --help)\n",
                   arg.c_str());
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "train: %s needs a value\n", arg.c_str());
      return false;
    }
    const char *value = argv[++i];
    if (text) {
      *text = value;
    } else if (!parseInt(value, *number) || *number < 0) {
      std::fprintf(stderr, "train: %s: expected a non-negative integer, got "
                   "'%s'\n", arg.c_str(), value);
      return false;
    }
  }
  if (o.data.empty() || o.steps < 0) {
    std::fprintf(stderr,
                 "train: --data and --steps are required (see train --help)\n");
    return false;
  }
  if (!o.evalData.empty() != (o.evalEvery > 0)) {
    std::fprintf(stderr, "train: --eval-data and --eval-every K > 0 go "
                         "together\n");
    return false;
  }
  if (o.evalSteps < 1) {
    std::fprintf(stderr, "train: --eval-steps: expected a positive integer\n");
    return false;
  }
  if (o.saveEvery > 0 && o.save.empty()) {
    std::fprintf(stderr, "train: --save-every needs --save DIR\n");
    return false;
  }
  if (o.keepLast < 1) {
    std::fprintf(stderr, "train: --keep-last: expected a positive integer\n");
    return false;
  }
  if (o.keepLast > 1 && o.save.empty()) {
    std::fprintf(stderr, "train: --keep-last needs --save DIR\n");
    return false;
  }
  return true;
}

} // namespace autopar::rt::train
