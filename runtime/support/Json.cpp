//===- Json.cpp - a small strict JSON reader and string quoting -----------===//
//
// A recursive-descent parser over the document's text that stops at the
// first error and reports its byte offset; numbers keep their exact int64
// value when they have one.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Json.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autopar::rt {

namespace {

constexpr int kMaxJsonDepth = 256;

class JsonParser {
public:
  explicit JsonParser(const std::string &input) : text(input) {}

  Status parse(JsonValue &out) {
    skipSpace();
    if (!parseValue(out, 0))
      return failure();
    skipSpace();
    if (pos != text.size()) {
      fail("unexpected text after the document");
      return failure();
    }
    return Status::ok();
  }

private:
  Status failure() const {
    return Status::error("bad JSON at byte " + std::to_string(errorPos) + " (" +
                         errorText + ")");
  }

  bool fail(const std::string &what) {
    if (errorText.empty()) {
      errorText = what;
      errorPos = pos;
    }
    return false;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0)
      return fail("unexpected character");
    pos += n;
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (depth > kMaxJsonDepth)
      return fail("nested too deeply");
    if (pos >= text.size())
      return fail("unexpected end of input");
    out = JsonValue();
    char c = text[pos];
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      out.kind = JsonValue::Kind::String;
      return parseString(out.string);
    case 't':
      out.kind = JsonValue::Kind::Bool;
      out.boolean = true;
      return literal("true");
    case 'f':
      out.kind = JsonValue::Kind::Bool;
      return literal("false");
    case 'n':
      return literal("null");
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return fail("unexpected character");
    }
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Object;
    ++pos; // '{'
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key");
      size_t keyPos = pos;
      std::string key;
      if (!parseString(key))
        return false;
      for (const auto &member : out.object)
        if (member.first == key) {
          pos = keyPos;
          return fail("duplicate key \"" + key + "\"");
        }
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':'");
      ++pos;
      skipSpace();
      out.object.emplace_back(std::move(key), JsonValue());
      if (!parseValue(out.object.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Array;
    ++pos; // '['
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      out.array.emplace_back();
      if (!parseValue(out.array.back(), depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool hex4(uint32_t &value) {
    if (pos + 4 > text.size())
      return fail("bad \\u escape");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos + i];
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return fail("bad \\u escape");
      value = value * 16 + digit;
    }
    pos += 4;
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool parseString(std::string &out) {
    ++pos; // '"'
    out.clear();
    while (true) {
      if (pos >= text.size())
        return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(text[pos]);
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos;
        continue;
      }
      ++pos;
      if (pos >= text.size())
        return fail("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return false;
        if (cp >= 0xd800 && cp < 0xdc00) {
          uint32_t low;
          if (text.compare(pos, 2, "\\u") != 0)
            return fail("unpaired surrogate in \\u escape");
          pos += 2;
          if (!hex4(low))
            return false;
          if (low < 0xdc00 || low >= 0xe000)
            return fail("unpaired surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
          return fail("unpaired surrogate in \\u escape");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos;
        return fail("bad escape in string");
      }
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  bool parseNumber(JsonValue &out) {
    size_t start = pos;
    bool negative = false;
    if (text[pos] == '-') {
      negative = true;
      ++pos;
    }
    if (pos >= text.size() || !isDigit(text[pos]))
      return fail("bad number");
    if (text[pos] == '0') {
      ++pos;
      if (pos < text.size() && isDigit(text[pos]))
        return fail("bad number (leading zero)");
    } else {
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    }
    bool integral = true;
    if (pos < text.size() && text[pos] == '.') {
      integral = false;
      ++pos;
      if (pos >= text.size() || !isDigit(text[pos]))
        return fail("bad number");
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      integral = false;
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (pos >= text.size() || !isDigit(text[pos]))
        return fail("bad number");
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
    }
    std::string token = text.substr(start, pos - start);
    out.kind = JsonValue::Kind::Number;
    out.number = std::strtod(token.c_str(), nullptr);
    if (integral) {
      // Exact int64 when it fits.
      uint64_t magnitude = 0;
      bool fits = true;
      for (size_t i = negative ? 1 : 0; i < token.size(); ++i) {
        uint64_t digit = static_cast<uint64_t>(token[i] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) {
          fits = false;
          break;
        }
        magnitude = magnitude * 10 + digit;
      }
      uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
      if (fits && magnitude <= limit) {
        out.isInteger = true;
        out.integer = negative ? static_cast<int64_t>(0 - magnitude)
                               : static_cast<int64_t>(magnitude);
      }
    }
    return true;
  }

  const std::string &text;
  size_t pos = 0;
  size_t errorPos = 0;
  std::string errorText;
};

} // namespace

const JsonValue *JsonValue::find(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &member : object)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

Status parseJson(const std::string &text, JsonValue &out) {
  out = JsonValue();
  return JsonParser(text).parse(out);
}

std::string jsonQuote(const std::string &text) {
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += ch;
      }
    }
  }
  return out + "\"";
}

} // namespace autopar::rt
