//===- Logger.h - Per-step JSON log, progress bar, summary ------*- C++ -*-===//
//
// One JSON object per line per step:
//   {"step":12,"loss":3.21,"lr":0.0003,"grad_norm":1.2,"ms":85.1,
//    "tokens_per_s":48113}
// (doubles with %.9g; NaN and infinities as null), flushed at once so a
// crashed run keeps its log. When stdout is a terminal a one-line progress
// bar is redrawn with '\r'; otherwise nothing per step goes to stdout.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_LOG_LOGGER_H
#define AUTOPAR_RUNTIME_LOG_LOGGER_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace autopar::rt {

struct StepRecord {
  int64_t step;
  /// Loss of this step's forward pass.
  double loss;
  double lr;
  /// Gradient 2-norm before clipping.
  double gradNorm;
  double ms;
  double tokensPerS;
  /// More members of the JSON line ("key":value,...), or empty.
  std::string extra = {};
};

/// Formats a double as a JSON number (%.9g), or null when not finite.
std::string jsonNumber(double value);
/// The same with as many digits as `value` needs to read back exactly
/// (at most 17): for values checked against the compiler's report.
std::string jsonExactNumber(double value);

class Logger {
public:
  Logger() = default;
  ~Logger();
  Logger(const Logger &) = delete;
  Logger &operator=(const Logger &) = delete;

  /// Opens (or truncates, unless `append`) the log file; an empty path means
  /// no file. Call before training starts. Error: "PATH: cannot write: ...".
  Status open(const std::string &path, bool append);

  /// Appends the step's JSON line and redraws the progress bar on a terminal.
  void logStep(const StepRecord &r, int64_t totalSteps);

  /// Appends one raw JSON object (eval results, skipped steps, ...) as a line.
  void logEvent(const std::string &jsonObject);

  /// Ends the progress bar and prints a summary to stdout: steps run, first
  /// and last loss, mean tokens/s, total seconds. Closes the file.
  void finish();

  /// The first write error on the log file since open(), or ok.
  const Status &writeStatus() const { return writeError; }

private:
  void writeLine(const std::string &line);
  void drawBar(const StepRecord &r, int64_t totalSteps);

  FILE *file = nullptr;
  std::string path;
  Status writeError;
  bool terminal = false;
  bool barDrawn = false;
  bool finished = false;
  int64_t stepsRun = 0;
  double firstLoss = 0;
  double lastLoss = 0;
  double totalMs = 0;
  double totalTokens = 0;
  double sumTokensPerS = 0;
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_LOG_LOGGER_H
