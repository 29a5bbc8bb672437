//===- Checkpoint.cpp - Logical checkpoints addressed by name -------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <limits>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace autopar::rt {

namespace {

constexpr const char *kManifestName = "manifest.json";
constexpr const char *kShardName = "shard-00000.bin";
/// Tensors start at multiples of this in the shard (friendly to mmap/DMA).
constexpr int64_t kShardAlign = 64;
constexpr int kMaxJsonDepth = 256;

std::string errnoText(int err) { return std::strerror(err); }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// "DIR" without trailing slashes (but "/" stays "/").
std::string stripSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

std::string parentDir(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

bool isShardName(const std::string &name) {
  // shard-NNNNN.bin
  if (name.size() != 15 || name.compare(0, 6, "shard-") != 0 ||
      name.compare(11, 4, ".bin") != 0)
    return false;
  for (size_t i = 6; i < 11; ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  return true;
}

bool isCheckpointEntry(const std::string &name) {
  return name == kManifestName || isShardName(name);
}

/// Lists a directory's entries (without "." and ".."); false with errno set
/// when it cannot be read.
bool listDir(const std::string &dir, std::vector<std::string> &names) {
  names.clear();
  DIR *d = opendir(dir.c_str());
  if (!d)
    return false;
  while (struct dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  closedir(d);
  return true;
}

/// Removes a checkpoint directory: only manifest.json and shard files, then
/// the directory itself. Never recurses into anything else.
void removeCheckpointDir(const std::string &dir) {
  std::vector<std::string> names;
  if (!listDir(dir, names))
    return;
  for (const std::string &name : names)
    if (isCheckpointEntry(name))
      unlink((dir + "/" + name).c_str());
  rmdir(dir.c_str());
}

void fsyncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    ::close(fd);
  }
}

/// Writes `size` bytes; false with errno set on failure.
bool writeAll(FILE *f, const void *data, size_t size) {
  return size == 0 || std::fwrite(data, 1, size, f) == size;
}

/// Flushes, syncs and closes; false with errno set on failure.
bool closeSynced(FILE *f) {
  bool ok = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  if (std::fclose(f) != 0 && ok)
    return false;
  errno = err;
  return ok;
}

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), eight bytes at a
/// time (slicing-by-8).
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 8> t;
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0u);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};

/// "1a2b3c4d": a checksum as 8 lowercase hex digits.
std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

/// The manifest's own checksum covers its text before this.
constexpr const char *kChecksumKey = ",\"checksum\":\"crc32c:";

/// Whether `pid` names no running process.
bool processGone(const std::string &pid) {
  if (pid.empty() || pid.size() > 9 ||
      pid.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

/// The base name of `path` (after the last slash).
std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Removes what saves into `dir` left behind when killed: DIR.tmp-<pid>
/// and DIR.old-<pid> of processes that are gone (a running save's stay).
void removeStaleSaves(const std::string &dir) {
  const std::string parent = parentDir(dir), base = baseName(dir);
  std::vector<std::string> names;
  if (!listDir(parent, names))
    return;
  for (const std::string &name : names)
    for (const char *kind : {".tmp-", ".old-"}) {
      const std::string prefix = base + kind;
      if (name.compare(0, prefix.size(), prefix) == 0 &&
          processGone(name.substr(prefix.size())))
        removeCheckpointDir(parent + "/" + name);
    }
}

/// The step a checkpoint directory's manifest records, or -1.
int64_t checkpointStep(const std::string &dir);

/// `previous` (a checkpoint just replaced at DIR) becomes DIR.step-<its
/// step>; of the DIR.step-* beside DIR, the newest `keepLast - 1` stay.
void rotateCheckpoints(const std::string &dir, const std::string &previous,
                       int64_t keepLast) {
  const int64_t step = checkpointStep(previous);
  if (step < 0) {
    removeCheckpointDir(previous);
    return;
  }
  const std::string kept = dir + ".step-" + std::to_string(step);
  removeCheckpointDir(kept); // An older save of the same step.
  if (std::rename(previous.c_str(), kept.c_str()) != 0) {
    removeCheckpointDir(previous);
    return;
  }
  const std::string parent = parentDir(dir), prefix = baseName(dir) + ".step-";
  std::vector<std::string> names;
  if (!listDir(parent, names))
    return;
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string &name : names) {
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    const std::string digits = name.substr(prefix.size());
    if (!digits.empty() && digits.size() <= 18 &&
        digits.find_first_not_of("0123456789") == std::string::npos)
      steps.push_back({std::stoll(digits), name});
  }
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keepLast - 1); i < steps.size(); ++i)
    removeCheckpointDir(parent + "/" + steps[i].second);
}

//===----------------------------------------------------------------------===//
// JSON reader
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

struct ManifestTensor {
  std::string name, dtype, file;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
  uint32_t crc = 0;
};

struct Manifest {
  int64_t format = 0;
  CheckpointMeta meta;
  std::vector<ManifestTensor> tensors;
  /// Each shard file's size.
  std::map<std::string, int64_t> shardBytes;
};

/// The manifest format this runtime writes and reads: 2 adds a CRC32C per
/// tensor, each shard's size and the manifest's own checksum.
constexpr int64_t kFormat = 2;

bool parseHex32(const std::string &text, uint32_t &out) {
  if (text.size() != 8 ||
      text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  out = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
  return true;
}

bool getInt(const JsonValue &obj, const char *key, int64_t &out) {
  const JsonValue *v = obj.find(key);
  if (!v || v->kind != JsonValue::Kind::Number || !v->isInteger)
    return false;
  out = v->integer;
  return true;
}

bool getString(const JsonValue &obj, const char *key, std::string &out) {
  const JsonValue *v = obj.find(key);
  if (!v || v->kind != JsonValue::Kind::String)
    return false;
  out = v->string;
  return true;
}

/// Reads the manifest's structure; `where` prefixes errors.
Status decodeManifest(const JsonValue &root, const std::string &where,
                      Manifest &out) {
  auto bad = [&](const std::string &what) {
    return Status::error(where + ": " + what);
  };
  if (root.kind != JsonValue::Kind::Object)
    return bad("not a JSON object");
  if (!getInt(root, "format", out.format))
    return bad("'format' is missing or not an integer");
  if (out.format == 1)
    return bad("format 1 (an older autopar's, without checksums) cannot be "
               "verified: save it again with this version");
  if (out.format != kFormat)
    return bad("unsupported format " + std::to_string(out.format) +
               " (expected " + std::to_string(kFormat) + ")");
  if (!getInt(root, "step", out.meta.step) || out.meta.step < 0)
    return bad("'step' is missing or not an integer >= 0");
  if (!getString(root, "model", out.meta.modelFingerprint))
    return bad("'model' is missing or not a string");
  if (!getString(root, "optimizer", out.meta.optimizer))
    return bad("'optimizer' is missing or not a string");
  // Optional: a run with loss scaling.
  if (const JsonValue *v = root.find("loss_scale")) {
    if (v->kind != JsonValue::Kind::Number || !(v->number > 0))
      return bad("'loss_scale' is not a positive number");
    out.meta.lossScale = v->number;
    if (!getInt(root, "loss_scale_good_steps", out.meta.lossScaleGoodSteps) ||
        out.meta.lossScaleGoodSteps < 0)
      return bad("'loss_scale_good_steps' is missing or not an integer >= 0");
    if (!getInt(root, "skipped_steps", out.meta.skippedSteps) ||
        out.meta.skippedSteps < 0 || out.meta.skippedSteps > out.meta.step)
      return bad("'skipped_steps' is missing or not an integer in [0, step]");
  }
  const JsonValue *list = root.find("tensors");
  if (!list || list->kind != JsonValue::Kind::Array)
    return bad("'tensors' is missing or not an array");
  for (size_t i = 0; i < list->array.size(); ++i) {
    const JsonValue &t = list->array[i];
    std::string at = "tensors[" + std::to_string(i) + "]";
    if (t.kind != JsonValue::Kind::Object)
      return bad("'" + at + "' is not an object");
    ManifestTensor mt;
    if (!getString(t, "name", mt.name))
      return bad("'" + at + ".name' is missing or not a string");
    if (!getString(t, "dtype", mt.dtype))
      return bad("'" + at + ".dtype' is missing or not a string");
    if (!getString(t, "file", mt.file))
      return bad("'" + at + ".file' is missing or not a string");
    if (!isShardName(mt.file))
      return bad("'" + at + ".file' is not a shard name (\"" + mt.file + "\")");
    if (!getInt(t, "offset", mt.offset) || mt.offset < 0)
      return bad("'" + at + ".offset' is missing or not a byte offset");
    if (!getInt(t, "bytes", mt.bytes) || mt.bytes < 0)
      return bad("'" + at + ".bytes' is missing or not a byte count");
    if (mt.offset > std::numeric_limits<int64_t>::max() - mt.bytes)
      return bad("'" + at + "' ends beyond any file (offset + bytes)");
    std::string crc;
    if (!getString(t, "crc32c", crc) || !parseHex32(crc, mt.crc))
      return bad("'" + at + ".crc32c' is missing or not 8 hex digits");
    const JsonValue *shape = t.find("shape");
    if (!shape || shape->kind != JsonValue::Kind::Array)
      return bad("'" + at + ".shape' is missing or not an array");
    // The shape's element count, checked for overflow, times the dtype's
    // size is the byte count.
    int64_t count = 1;
    for (const JsonValue &d : shape->array) {
      if (d.kind != JsonValue::Kind::Number || !d.isInteger || d.integer < 0)
        return bad("'" + at +
                   ".shape' holds a dim that is not an integer >= 0");
      mt.shape.push_back(d.integer);
      if (d.integer && count > std::numeric_limits<int64_t>::max() / d.integer)
        return bad("'" + at + ".shape' " + shapeText(mt.shape) +
                   " overflows int64");
      count *= d.integer;
    }
    const int64_t element = dtypeBytes(mt.dtype);
    if (element == 0)
      return bad("'" + at + ".dtype' \"" + mt.dtype + "\" is unknown");
    if (count > std::numeric_limits<int64_t>::max() / element ||
        count * element != mt.bytes)
      return bad("'" + at + "' (" + mt.dtype + " " + shapeText(mt.shape) +
                 ") has " + std::to_string(mt.bytes) + " bytes");
    out.tensors.push_back(std::move(mt));
  }
  const JsonValue *shards = root.find("shards");
  if (!shards || shards->kind != JsonValue::Kind::Array)
    return bad("'shards' is missing or not an array");
  for (size_t i = 0; i < shards->array.size(); ++i) {
    const JsonValue &sh = shards->array[i];
    std::string at = "shards[" + std::to_string(i) + "]", file;
    int64_t bytes = 0;
    if (sh.kind != JsonValue::Kind::Object || !getString(sh, "file", file) ||
        !isShardName(file) || !getInt(sh, "bytes", bytes) || bytes < 0)
      return bad("'" + at + "' is not {\"file\": shard name, \"bytes\": size}");
    if (!out.shardBytes.emplace(file, bytes).second)
      return bad("'" + at + "' lists " + file + " twice");
  }
  // Every tensor inside its shard, no two overlapping.
  std::map<std::string, std::vector<const ManifestTensor *>> byShard;
  for (const ManifestTensor &mt : out.tensors) {
    auto size = out.shardBytes.find(mt.file);
    if (size == out.shardBytes.end())
      return bad("tensor '" + mt.name + "' is in " + mt.file +
                 ", which 'shards' does not list");
    if (mt.offset + mt.bytes > size->second)
      return bad("tensor '" + mt.name + "' ends at byte " +
                 std::to_string(mt.offset + mt.bytes) + " of " + mt.file +
                 ", which has " + std::to_string(size->second));
    byShard[mt.file].push_back(&mt);
  }
  for (auto &[file, list] : byShard) {
    std::sort(list.begin(), list.end(),
              [](const ManifestTensor *a, const ManifestTensor *b) {
                return a->offset < b->offset;
              });
    for (size_t k = 1; k < list.size(); ++k)
      if (list[k - 1]->offset + list[k - 1]->bytes > list[k]->offset)
        return bad("tensors '" + list[k - 1]->name + "' and '" + list[k]->name +
                   "' overlap in " + file);
  }
  return Status::ok();
}

/// Checks the manifest's own checksum (the last member, over the text
/// before it).
Status checkManifestChecksum(const std::string &text, const JsonValue &root,
                             const std::string &where) {
  std::string value;
  const size_t at = text.rfind(kChecksumKey);
  uint32_t expected = 0;
  if (!getString(root, "checksum", value) || at == std::string::npos ||
      value.compare(0, 7, "crc32c:") != 0 ||
      !parseHex32(value.substr(7), expected))
    return Status::error(where + ": 'checksum' is missing or not "
                                 "\"crc32c:<8 hex digits>\"");
  if (crc32c(0, text.data(), at) != expected)
    return Status::error(where + ": fails its checksum (the manifest was "
                                 "changed or corrupted)");
  return Status::ok();
}

/// Whether a float tensor's bytes hold only finite values (other dtypes:
/// true).
bool allFinite(const std::string &dtype, const void *data, int64_t bytes) {
  if (dtype == "f32") {
    const float *v = static_cast<const float *>(data);
    for (int64_t i = 0; i < bytes / 4; ++i)
      if (!std::isfinite(v[i]))
        return false;
  } else if (dtype == "f64") {
    const double *v = static_cast<const double *>(data);
    for (int64_t i = 0; i < bytes / 8; ++i)
      if (!std::isfinite(v[i]))
        return false;
  } else if (dtype == "f16" || dtype == "bf16") {
    // All exponent bits set: infinity or NaN.
    const uint16_t mask = dtype == "f16" ? 0x7c00 : 0x7f80;
    const uint16_t *v = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < bytes / 2; ++i)
      if ((v[i] & mask) == mask)
        return false;
  }
  return true;
}

Status readWholeFile(const std::string &path, std::string &out, int &err) {
  out.clear();
  err = 0;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = errno;
    return Status::error(path + ": cannot open: " + errnoText(err));
  }
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
    out.append(buf, got);
  bool failed = std::ferror(f) != 0;
  err = errno;
  std::fclose(f);
  if (failed)
    return Status::error(path + ": cannot read: " + errnoText(err));
  return Status::ok();
}

int64_t checkpointStep(const std::string &dir) {
  std::string text;
  int err = 0;
  JsonValue root;
  int64_t step = -1;
  if (readWholeFile(dir + "/" + kManifestName, text, err).isOk() &&
      JsonParser(text).parse(root).isOk() && getInt(root, "step", step))
    return step;
  return -1;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

const JsonValue *JsonValue::find(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &member : object)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

uint32_t crc32c(uint32_t crc, const void *data, size_t size) {
  static const Crc32cTables tables;
  const auto &t = tables.t;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
          t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
          t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; size; --size, ++p)
    crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
  return ~crc;
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

int64_t dtypeBytes(const std::string &dtype) {
  static const struct {
    const char *name;
    int64_t bytes;
  } kSizes[] = {{"f64", 8},  {"f32", 4},    {"f16", 2},   {"bf16", 2},
                {"i64", 8},  {"i32", 4},    {"i16", 2},   {"i8", 1},
                {"u64", 8},  {"u32", 4},    {"u16", 2},   {"u8", 1},
                {"bool", 1}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  for (const auto &entry : kSizes)
    if (dtype == entry.name)
      return entry.bytes;
  return 0;
}

Status checkSaveTarget(const std::string &dirArg) {
  const std::string dir = stripSlashes(dirArg);
  if (dir.empty())
    return Status::error("checkpoint directory name is empty");
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return Status::error(dir + ": exists and is not a checkpoint directory");
    std::vector<std::string> names;
    if (!listDir(dir, names))
      return Status::error(dir + ": cannot read: " + errnoText(errno));
    for (const std::string &name : names)
      if (!isCheckpointEntry(name))
        return Status::error(dir + ": holds '" + name +
                             "', which is not part of a checkpoint; refusing "
                             "to replace it");
  }
  // The temporary sibling is made in the parent: made and removed once
  // here (what access() says is not what a write finds in /proc or on a
  // read-only mount).
  const std::string parent = parentDir(dir);
  if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(dir + ": cannot write: " + parent +
                         " is not a directory");
  const std::string probe = dir + ".tmp-" + std::to_string(getpid());
  if (mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error(dir + ": cannot write: " + errnoText(errno));
  removeCheckpointDir(probe);
  return Status::ok();
}

Status saveCheckpoint(const std::string &dirArg,
                      const std::vector<TensorRef> &tensors,
                      const CheckpointMeta &meta, int64_t keepLast) {
  const std::string dir = stripSlashes(dirArg);
  if (dir.empty())
    return Status::error("checkpoint directory name is empty");
  if (meta.step < 0)
    return Status::error(dir + ": step " + std::to_string(meta.step) +
                         " is negative");

  // Validate the tensors before touching the disk.
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef &t = tensors[i];
    if (t.name.empty())
      return Status::error(dir + ": tensor #" + std::to_string(i) +
                           " has no name");
    if (!seen.emplace(t.name, i).second)
      return Status::error(dir + ": tensor '" + t.name + "' given twice");
    if (t.numBytes < 0 || (t.numBytes > 0 && !t.data))
      return Status::error(dir + ": tensor '" + t.name + "' has no data");
    int64_t elemBytes = dtypeBytes(t.dtype);
    if (elemBytes > 0) {
      int64_t count = 1;
      for (int64_t d : t.shape)
        count *= d;
      if (count * elemBytes != t.numBytes)
        return Status::error(dir + ": tensor '" + t.name + "' (" + t.dtype +
                             " " + shapeText(t.shape) + ") has " +
                             std::to_string(t.numBytes) + " bytes, expected " +
                             std::to_string(count * elemBytes));
    }
  }

  // Only ever replace a checkpoint: refuse a DIR holding anything else.
  AUTOPAR_RT_RETURN_IF_ERROR(checkSaveTarget(dir));
  struct stat st;
  const bool exists = stat(dir.c_str(), &st) == 0;

  const std::string pid = std::to_string(getpid());
  const std::string tmp = dir + ".tmp-" + pid;
  removeCheckpointDir(tmp);
  removeStaleSaves(dir); // Left over by saves that were killed, if any.
  if (mkdir(tmp.c_str(), 0755) != 0)
    return Status::error(dir + ": cannot write: " + errnoText(errno));
  auto failWith = [&](int err) {
    removeCheckpointDir(tmp);
    return Status::error(dir + ": cannot write: " + errnoText(err ? err : EIO));
  };

  // Shard: every tensor at a 64-byte aligned offset.
  std::vector<int64_t> offsets(tensors.size());
  std::vector<uint32_t> crcs(tensors.size());
  int64_t shardBytes = 0;
  {
    FILE *f = std::fopen((tmp + "/" + kShardName).c_str(), "wb");
    if (!f)
      return failWith(errno);
    static const char kZeros[kShardAlign] = {};
    int64_t offset = 0;
    bool ok = true;
    for (size_t i = 0; i < tensors.size() && ok; ++i) {
      int64_t pad = (kShardAlign - offset % kShardAlign) % kShardAlign;
      ok = writeAll(f, kZeros, static_cast<size_t>(pad));
      offset += pad;
      offsets[i] = offset;
      ok = ok && writeAll(f, tensors[i].data,
                          static_cast<size_t>(tensors[i].numBytes));
      crcs[i] =
          crc32c(0, tensors[i].data, static_cast<size_t>(tensors[i].numBytes));
      offset += tensors[i].numBytes;
    }
    shardBytes = offset;
    int err = errno;
    if (!ok) {
      std::fclose(f);
      return failWith(err);
    }
    if (!closeSynced(f))
      return failWith(errno);
  }

  // Manifest.
  {
    std::string json = "{\"format\":" + std::to_string(kFormat) +
                       ",\"step\":" + std::to_string(meta.step) +
                       ",\"model\":" + jsonQuote(meta.modelFingerprint) +
                       ",\"optimizer\":" + jsonQuote(meta.optimizer);
    if (meta.lossScale > 0) {
      char scale[64];
      std::snprintf(scale, sizeof(scale), "%.17g", meta.lossScale);
      json += std::string(",\"loss_scale\":") + scale +
              ",\"loss_scale_good_steps\":" +
              std::to_string(meta.lossScaleGoodSteps) +
              ",\"skipped_steps\":" + std::to_string(meta.skippedSteps);
    }
    json += ",\"tensors\":[";
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorRef &t = tensors[i];
      json += i ? ",\n  " : "\n  ";
      json += "{\"name\":" + jsonQuote(t.name) +
              ",\"dtype\":" + jsonQuote(t.dtype) + ",\"shape\":[";
      for (size_t d = 0; d < t.shape.size(); ++d)
        json += (d ? "," : "") + std::to_string(t.shape[d]);
      json += "],\"file\":\"" + std::string(kShardName) +
              "\",\"offset\":" + std::to_string(offsets[i]) +
              ",\"bytes\":" + std::to_string(t.numBytes) + ",\"crc32c\":\"" +
              hex32(crcs[i]) + "\"}";
    }
    json += tensors.empty() ? "]" : "\n]";
    json += ",\"shards\":[{\"file\":\"" + std::string(kShardName) +
            "\",\"bytes\":" + std::to_string(shardBytes) + "}]";
    json += std::string(kChecksumKey) +
            hex32(crc32c(0, json.data(), json.size())) + "\"}\n";
    FILE *f = std::fopen((tmp + "/" + kManifestName).c_str(), "wb");
    if (!f)
      return failWith(errno);
    if (!writeAll(f, json.data(), json.size())) {
      int err = errno;
      std::fclose(f);
      return failWith(err);
    }
    if (!closeSynced(f))
      return failWith(errno);
  }
  fsyncPath(tmp);

  // Swap in. Where the kernel can exchange two paths atomically, DIR always
  // holds a whole checkpoint, the old or the new one; otherwise move the old
  // checkpoint aside, rename, then delete the old one.
  // The previous checkpoint, once swapped out: kept as DIR.step-<its step>
  // when the last `keepLast` are kept (the oldest beyond removed), else
  // removed.
  auto retire = [&](const std::string &previous) {
    if (keepLast > 1)
      rotateCheckpoints(dir, previous, keepLast);
    else
      removeCheckpointDir(previous);
  };
#ifdef RENAME_EXCHANGE
  if (exists && renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(),
                          RENAME_EXCHANGE) == 0) {
    retire(tmp); // now the old checkpoint
    fsyncPath(parentDir(dir));
    return Status::ok();
  }
#endif
  if (exists) {
    const std::string old = dir + ".old-" + pid;
    removeCheckpointDir(old);
    if (std::rename(dir.c_str(), old.c_str()) != 0)
      return failWith(errno);
    if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
      int err = errno;
      std::rename(old.c_str(), dir.c_str());
      return failWith(err);
    }
    retire(old);
  } else if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
    return failWith(errno);
  }
  fsyncPath(parentDir(dir));
  return Status::ok();
}

Status loadCheckpoint(const std::string &dirArg,
                      const std::vector<TensorRef> &tensors,
                      CheckpointMeta &meta,
                      const std::string &expectedFingerprint,
                      const std::string &expectedOptimizer) {
  const std::string dir = stripSlashes(dirArg);
  const std::string manifestPath = dir + "/" + kManifestName;
  std::string text;
  int err = 0;
  Status read = readWholeFile(manifestPath, text, err);
  if (!read.isOk()) {
    if (err == ENOENT || err == ENOTDIR)
      return Status::error(dir + ": no checkpoint (manifest.json missing)");
    return read;
  }
  JsonValue root;
  Status parsed = parseJson(text, root);
  if (!parsed.isOk())
    return Status::error(manifestPath + ": " + parsed.message());
  Manifest manifest;
  // Its checksum first (another format: what decodeManifest says about
  // it): an edited manifest is named as such.
  if (const JsonValue *format = root.find("format");
      format && format->isInteger && format->integer == kFormat)
    AUTOPAR_RT_RETURN_IF_ERROR(checkManifestChecksum(text, root, manifestPath));
  AUTOPAR_RT_RETURN_IF_ERROR(decodeManifest(root, manifestPath, manifest));

  std::map<std::string, const ManifestTensor *> byName;
  for (const ManifestTensor &mt : manifest.tensors)
    if (!byName.emplace(mt.name, &mt).second)
      return Status::error(manifestPath + ": tensor '" + mt.name +
                           "' listed twice");

  // Another optimizer's state tensors would not match: say why.
  if (!expectedOptimizer.empty() && !manifest.meta.optimizer.empty() &&
      manifest.meta.optimizer != expectedOptimizer)
    return Status::error(dir + ": checkpoint was trained with " +
                         manifest.meta.optimizer + ", this program trains with " +
                         expectedOptimizer);

  const std::string different = dir + ": checkpoint is of a different model (";
  std::vector<const ManifestTensor *> sources(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef &t = tensors[i];
    auto it = byName.find(t.name);
    if (it == byName.end())
      return Status::error(different + "tensor '" + t.name + "' missing)");
    const ManifestTensor &mt = *it->second;
    if (mt.dtype != t.dtype)
      return Status::error(different + "tensor '" + t.name + "' has dtype " +
                           mt.dtype + ", this model has " + t.dtype + ")");
    if (mt.shape != t.shape)
      return Status::error(different + "tensor '" + t.name + "' has shape " +
                           shapeText(mt.shape) + ", this model has " +
                           shapeText(t.shape) + ")");
    if (mt.bytes != t.numBytes)
      return Status::error(different + "tensor '" + t.name + "' has " +
                           std::to_string(mt.bytes) +
                           " bytes, this model has " +
                           std::to_string(t.numBytes) + ")");
    sources[i] = &mt;
  }
  if (!expectedFingerprint.empty() &&
      manifest.meta.modelFingerprint != expectedFingerprint)
    return Status::error(different + "fingerprint " +
                         manifest.meta.modelFingerprint + ", this model " +
                         expectedFingerprint + ")");

  // Open the shards and check every range before reading anything.
  std::map<std::string, FILE *> shards;
  auto closeAll = [&]() {
    for (auto &entry : shards)
      std::fclose(entry.second);
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ManifestTensor &mt = *sources[i];
    const std::string shardPath = dir + "/" + mt.file;
    FILE *f;
    auto it = shards.find(mt.file);
    if (it != shards.end()) {
      f = it->second;
    } else {
      f = std::fopen(shardPath.c_str(), "rb");
      if (!f) {
        int e = errno;
        closeAll();
        return Status::error(shardPath + ": cannot open: " + errnoText(e));
      }
      shards[mt.file] = f;
    }
    struct stat st;
    const int64_t expected = manifest.shardBytes[mt.file];
    if (fstat(fileno(f), &st) != 0 ||
        static_cast<int64_t>(st.st_size) != expected) {
      closeAll();
      return Status::error(shardPath + ": has " +
                           std::to_string(static_cast<int64_t>(st.st_size)) +
                           " bytes, the manifest says " +
                           std::to_string(expected) +
                           (st.st_size < expected ? " (truncated)" : ""));
    }
  }
  // Each tensor read and checked against its checksum; a float tensor must
  // hold finite values. On a failure the caller drops what was read.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ManifestTensor &mt = *sources[i];
    FILE *f = shards[mt.file];
    const std::string shardPath = dir + "/" + mt.file;
    if (mt.bytes > 0 &&
        (fseeko(f, static_cast<off_t>(mt.offset), SEEK_SET) != 0 ||
         std::fread(tensors[i].data, 1, static_cast<size_t>(mt.bytes), f) !=
             static_cast<size_t>(mt.bytes))) {
      closeAll();
      return Status::error(shardPath + ": truncated");
    }
    if (crc32c(0, tensors[i].data, static_cast<size_t>(mt.bytes)) != mt.crc) {
      closeAll();
      return Status::error(shardPath + ": tensor '" + mt.name +
                           "' fails its checksum (the file was changed or "
                           "corrupted)");
    }
    if (!allFinite(mt.dtype, tensors[i].data, mt.bytes)) {
      closeAll();
      return Status::error(shardPath + ": tensor '" + mt.name +
                           "' holds NaN or infinity");
    }
  }
  closeAll();
  meta = manifest.meta;
  return Status::ok();
}

} // namespace autopar::rt
