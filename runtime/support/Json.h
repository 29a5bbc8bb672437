//===- Json.h - a small strict JSON reader and string quoting ---*- C++ -*-===//
//
// The runtime's JSON: a document parsed into a JsonValue tree (RFC 8259 and
// nothing more: no comments, no trailing commas, no duplicate keys), and a
// string written as a JSON literal. Checkpoint manifests are read and
// written with it; the tests read the log and the reports with it too.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SUPPORT_JSON_H
#define AUTOPAR_RUNTIME_SUPPORT_JSON_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autopar::rt {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// True when the number was written without fraction or exponent and fits
  /// int64; `integer` then holds it exactly.
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  /// Members in document order (keys are unique).
  std::vector<std::pair<std::string, JsonValue>> object;

  /// The member named `key` of an object, or null.
  const JsonValue *find(const std::string &key) const;
};

/// Parses one JSON document (RFC 8259: no comments, no trailing commas, no
/// duplicate keys, nesting up to 256 deep). Error: "bad JSON at byte N
/// (reason)"; callers prefix the file name.
Status parseJson(const std::string &text, JsonValue &out);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &text);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_SUPPORT_JSON_H
