//===- Logger.cpp - Per-step JSON log, progress bar, summary --------------===//

#include "runtime/log/Logger.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace autopar::rt {

namespace {
constexpr int kBarWidth = 30;
} // namespace

std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

std::string jsonExactNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char buf[64];
  for (int digits = 9; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value)
      break;
  }
  return buf;
}

Logger::~Logger() {
  if (file)
    std::fclose(file);
}

Status Logger::open(const std::string &logPath, bool append) {
  if (file) {
    std::fclose(file);
    file = nullptr;
  }
  path = logPath;
  writeError = Status::ok();
  terminal = isatty(fileno(stdout)) != 0;
  barDrawn = false;
  finished = false;
  stepsRun = 0;
  firstLoss = lastLoss = totalMs = totalTokens = sumTokensPerS = 0;
  if (path.empty())
    return Status::ok();
  file = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file)
    return Status::error(path + ": cannot write: " + std::strerror(errno));
  return Status::ok();
}

void Logger::writeLine(const std::string &line) {
  if (!file)
    return;
  bool ok = std::fwrite(line.data(), 1, line.size(), file) == line.size() &&
            std::fputc('\n', file) != EOF && std::fflush(file) == 0;
  if (!ok && writeError.isOk())
    writeError =
        Status::error(path + ": cannot write: " + std::strerror(errno));
}

void Logger::logStep(const StepRecord &r, int64_t totalSteps) {
  if (stepsRun == 0)
    firstLoss = r.loss;
  lastLoss = r.loss;
  ++stepsRun;
  if (std::isfinite(r.ms) && std::isfinite(r.tokensPerS)) {
    totalMs += r.ms;
    totalTokens += r.tokensPerS * r.ms / 1000.0;
    sumTokensPerS += r.tokensPerS;
  }

  std::string line = "{\"step\":" + std::to_string(r.step) +
                     ",\"loss\":" + jsonNumber(r.loss) +
                     ",\"lr\":" + jsonNumber(r.lr) +
                     ",\"grad_norm\":" + jsonNumber(r.gradNorm) +
                     ",\"ms\":" + jsonNumber(r.ms) +
                     ",\"tokens_per_s\":" + jsonNumber(r.tokensPerS) +
                     (r.extra.empty() ? "" : "," + r.extra) + "}";
  writeLine(line);
  if (terminal)
    drawBar(r, totalSteps);
}

void Logger::drawBar(const StepRecord &r, int64_t totalSteps) {
  // Steps in the log are 0-based; the bar counts steps done.
  int64_t done = r.step + 1;
  int filled = 0;
  if (totalSteps > 0) {
    int64_t clamped = done < totalSteps ? done : totalSteps;
    filled = static_cast<int>(clamped * kBarWidth / totalSteps);
  }
  char bar[kBarWidth + 1];
  for (int i = 0; i < kBarWidth; ++i)
    bar[i] = i < filled ? '=' : ' ';
  if (filled > 0 && filled < kBarWidth)
    bar[filled - 1] = '>';
  bar[kBarWidth] = '\0';
  std::printf("\rstep %lld/%lld [%s] loss %.4f lr %.1e %.0f tok/s\033[K",
              static_cast<long long>(done), static_cast<long long>(totalSteps),
              bar, r.loss, r.lr, r.tokensPerS);
  std::fflush(stdout);
  barDrawn = true;
}

void Logger::logEvent(const std::string &jsonObject) { writeLine(jsonObject); }

void Logger::finish() {
  if (finished)
    return;
  finished = true;
  if (barDrawn)
    std::printf("\n");
  if (stepsRun == 0) {
    std::printf("no steps run\n");
  } else {
    // Mean throughput = all tokens over all step time (falls back to the
    // average of the per-step rates when no step has a duration).
    double meanTokensPerS = totalMs > 0
                                ? totalTokens / (totalMs / 1000.0)
                                : sumTokensPerS / static_cast<double>(stepsRun);
    std::printf("done: %lld steps in %.1f s, loss %.4f -> %.4f, %.0f "
                "tokens/s\n",
                static_cast<long long>(stepsRun), totalMs / 1000.0, firstLoss,
                lastLoss, meanTokensPerS);
  }
  std::fflush(stdout);
  if (file) {
    if (std::fclose(file) != 0 && writeError.isOk())
      writeError =
          Status::error(path + ": cannot write: " + std::strerror(errno));
    file = nullptr;
  }
}

} // namespace autopar::rt
