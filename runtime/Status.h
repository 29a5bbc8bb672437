//===- Status.h - Error status of the autopar runtime -----------*- C++ -*-===//
//
// The runtime reports errors as values, never by exceptions or exit(): a
// Status is either ok or carries ONE line that names the input at fault
// ("tokens.bin: unsupported version 2 (expected 1)"). The emitted program's
// main() decides what to print and how to stop.
//
// Header only, inline by design: the class is two members and a few accessors.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_STATUS_H
#define AUTOPAR_RUNTIME_STATUS_H

#include <string>
#include <utility>

namespace autopar::rt {

class [[nodiscard]] Status {
public:
  /// A default-constructed Status is ok.
  Status() = default;

  static Status ok() { return Status(); }
  /// An error; `message` is one line naming the input at fault.
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.text = std::move(message);
    return s;
  }

  bool isOk() const { return !failed; }
  explicit operator bool() const { return !failed; }
  /// The error message; empty when ok.
  const std::string &message() const { return text; }

private:
  bool failed = false;
  std::string text;
};

} // namespace autopar::rt

/// Evaluates `expr` (a Status) and returns it from the enclosing function
/// when it is an error.
#define AUTOPAR_RT_RETURN_IF_ERROR(expr)                                       \
  do {                                                                         \
    ::autopar::rt::Status autoparRtStatus_ = (expr);                           \
    if (!autoparRtStatus_.isOk())                                              \
      return autoparRtStatus_;                                                 \
  } while (0)

#endif // AUTOPAR_RUNTIME_STATUS_H
