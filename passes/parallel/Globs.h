//===- Globs.h - parameter-name globs and frozen-row lists ------*- C++ -*-===//
//
// The plan names parameters by globs over their ONNX initializer names
// (`frozen`, `optimizer.no_decay`, `padding_idx`; docs/plan.md#globs):
// autopar-apply-plan matches them, the plan parser checks them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_GLOBS_H
#define AUTOPAR_PASSES_PARALLEL_GLOBS_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autopar {

/// fnmatch(3)-style glob without FNM_PATHNAME or FNM_PERIOD, matched against
/// the whole of `name`: '*' matches any run of characters (including '.'),
/// '?' one character, '[abc]' / '[a-z]' / '[!x]' (or '[^x]') a class, and
/// '\' makes the next character literal (also inside a class). As in fnmatch,
/// an unterminated '[' matches itself; globProblem rejects such patterns.
bool globMatch(std::string_view pattern, std::string_view name);

/// True if any of `patterns` matches `name`.
bool globMatchAny(const std::vector<std::string> &patterns,
                  std::string_view name);

/// A `frozen` entry that names rows: "GLOB[ROWS]", ROWS a comma-separated
/// list of rows (of dim 0) "r" and half-open ranges "a:b" (a < b). Such an
/// entry is also a glob (its "[...]" a class); it freezes rows only where,
/// as a glob, it matches no initializer (docs/plan.md#frozen).
struct FrozenRows {
  std::string glob;
  /// Sorted, disjoint, non-adjacent [begin, end) ranges.
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

/// The rows `pattern` names, or nothing when it does not end in a row list.
std::optional<FrozenRows> parseFrozenRows(std::string_view pattern);

/// What makes `pattern` no glob ("empty glob pattern", "unterminated '['
/// in glob", "trailing '\\' in glob", "reversed range 'z-a' in glob"), or
/// "" for a valid one.
std::string globProblem(std::string_view pattern);

/// The first of `patterns` that is no glob, as "<key>: <problem> \"<glob>\"",
/// or "" when all are valid.
std::string globsProblem(std::string_view key,
                         const std::vector<std::string> &patterns);

/// True if any of `patterns` matches `name`; marks each one that does in
/// `used` (one flag per pattern).
bool globMatchMarking(const std::vector<std::string> &patterns,
                      std::string_view name, std::vector<bool> &used);

} // namespace autopar

#endif // AUTOPAR_PASSES_PARALLEL_GLOBS_H
