//===- Checkpoint.cpp - Logical checkpoints addressed by name -------------===//
//
// Saving (the shard, then the manifest, into DIR.tmp-<pid>, swapped in for
// DIR by rename), the rotation of the checkpoints kept beside DIR, and
// loading: the whole manifest is checked before any tensor is read.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/support/Crc32c.h"
#include "runtime/support/File.h"
#include "runtime/support/Json.h"

#include <algorithm>
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
    if (root.find("loss_scale_hysteresis_left") &&
        (!getInt(root, "loss_scale_hysteresis_left",
                 out.meta.lossScaleHysteresisLeft) ||
         out.meta.lossScaleHysteresisLeft < 0))
      return bad("'loss_scale_hysteresis_left' is not an integer >= 0");
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

int64_t checkpointStep(const std::string &dir) {
  std::string text;
  JsonValue root;
  int64_t step = -1;
  if (readWholeFile(dir + "/" + kManifestName, text).isOk() &&
      parseJson(text, root).isOk() && getInt(root, "step", step))
    return step;
  return -1;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

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
              ",\"loss_scale_hysteresis_left\":" +
              std::to_string(meta.lossScaleHysteresisLeft) +
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
  Status read = readWholeFile(manifestPath, text, &err);
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
