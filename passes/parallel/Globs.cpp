//===- Globs.cpp - parameter-name globs and frozen-row lists --------------===//

#include "passes/parallel/Globs.h"

#include <algorithm>

namespace autopar {
namespace {

struct GlobClass {
  bool terminated = false;
  size_t end = 0;            // index past the closing ']'
  bool matches = false;      // whether the character asked about is in it
  std::string reversedRange; // the first "z-a" range, if any
};

/// Parses the bracket expression at pattern[start] == '['. `c` is the
/// character to test (-1 for none). A reversed range matches nothing.
GlobClass parseGlobClass(std::string_view pattern, size_t start, int c) {
  GlobClass result;
  size_t i = start + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool in = false;
  bool first = true; // a ']' right after '[' or '[!' is a member
  // Reads one member character (with its escape) at i.
  auto readChar = [&](size_t &i) -> unsigned char {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      i += 2;
      return static_cast<unsigned char>(pattern[i - 1]);
    }
    ++i;
    return static_cast<unsigned char>(pattern[i - 1]);
  };
  while (true) {
    if (i >= pattern.size())
      return result; // unterminated
    if (pattern[i] == ']' && !first)
      break;
    first = false;
    size_t memberStart = i;
    unsigned char lo = readChar(i);
    unsigned char hi = lo;
    if (i + 1 < pattern.size() && pattern[i] == '-' && pattern[i + 1] != ']') {
      ++i;
      hi = readChar(i);
      if (hi < lo && result.reversedRange.empty())
        result.reversedRange = pattern.substr(memberStart, i - memberStart);
    }
    if (c >= lo && c <= hi)
      in = true;
  }
  result.terminated = true;
  result.end = i + 1;
  result.matches = in != negate;
  return result;
}

/// Matches the single-character element at pattern[pos] (not '*') against
/// `c`; sets `next` to the index past the element.
bool matchGlobElement(std::string_view pattern, size_t pos, char c,
                      size_t &next) {
  switch (pattern[pos]) {
  case '?':
    next = pos + 1;
    return true;
  case '[': {
    GlobClass cls = parseGlobClass(pattern, pos, static_cast<unsigned char>(c));
    if (cls.terminated) {
      next = cls.end;
      return cls.matches;
    }
    next = pos + 1; // an unterminated '[' is literal
    return c == '[';
  }
  case '\\':
    if (pos + 1 < pattern.size()) {
      next = pos + 2;
      return c == pattern[pos + 1];
    }
    next = pos + 1;
    return c == '\\';
  default:
    next = pos + 1;
    return c == pattern[pos];
  }
}

} // namespace

std::string globProblem(std::string_view pattern) {
  if (pattern.empty())
    return "empty glob pattern";
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '\\') {
      if (i + 1 >= pattern.size())
        return "trailing '\\' in glob";
      i += 2;
      continue;
    }
    if (pattern[i] == '[') {
      GlobClass cls = parseGlobClass(pattern, i, -1);
      if (!cls.terminated)
        return "unterminated '[' in glob";
      if (!cls.reversedRange.empty())
        return "reversed range '" + cls.reversedRange + "' in glob";
      i = cls.end;
      continue;
    }
    ++i;
  }
  return "";
}

std::optional<FrozenRows> parseFrozenRows(std::string_view pattern) {
  if (pattern.size() < 3 || pattern.back() != ']')
    return std::nullopt;
  const size_t open = pattern.rfind('[');
  if (open == std::string_view::npos || open == 0)
    return std::nullopt;
  FrozenRows rows{std::string(pattern.substr(0, open)), {}};
  std::string_view list = pattern.substr(open + 1, pattern.size() - open - 2);
  // One number of at most 15 digits (rows below 10^15).
  auto number = [&](std::string_view &text, int64_t &value) {
    size_t n = 0;
    while (n < text.size() && n < 16 && text[n] >= '0' && text[n] <= '9')
      ++n;
    if (n == 0 || n > 15)
      return false;
    value = std::stoll(std::string(text.substr(0, n)));
    text.remove_prefix(n);
    return true;
  };
  while (true) {
    int64_t begin, end;
    if (!number(list, begin))
      return std::nullopt;
    end = begin + 1;
    if (!list.empty() && list.front() == ':') {
      list.remove_prefix(1);
      if (!number(list, end) || end <= begin)
        return std::nullopt;
    }
    rows.ranges.emplace_back(begin, end);
    if (list.empty())
      break;
    if (list.front() != ',')
      return std::nullopt;
    list.remove_prefix(1);
  }
  std::sort(rows.ranges.begin(), rows.ranges.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto &range : rows.ranges)
    if (!merged.empty() && range.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, range.second);
    else
      merged.push_back(range);
  rows.ranges = std::move(merged);
  return rows;
}

bool globMatch(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0;
  size_t starP = std::string_view::npos, starN = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      starP = ++p;
      starN = n;
      continue;
    }
    size_t next = 0;
    if (p < pattern.size() && matchGlobElement(pattern, p, name[n], next)) {
      p = next;
      ++n;
      continue;
    }
    if (starP == std::string_view::npos)
      return false;
    // Let the last '*' take one more character and retry from there.
    p = starP;
    n = ++starN;
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

bool globMatchAny(const std::vector<std::string> &patterns,
                  std::string_view name) {
  for (const std::string &pattern : patterns)
    if (globMatch(pattern, name))
      return true;
  return false;
}

std::string globsProblem(std::string_view key,
                         const std::vector<std::string> &patterns) {
  for (const std::string &pattern : patterns)
    if (std::string why = globProblem(pattern); !why.empty())
      return std::string(key) + ": " + why + " \"" + pattern + "\"";
  return "";
}

bool globMatchMarking(const std::vector<std::string> &patterns,
                      std::string_view name, std::vector<bool> &used) {
  bool any = false;
  for (size_t k = 0; k < patterns.size(); ++k)
    if (globMatch(patterns[k], name))
      used[k] = any = true;
  return any;
}

} // namespace autopar
