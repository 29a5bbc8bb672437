//===- RuntimeLogCheckpointTest.cpp - Logger, checkpoints, JSON -----------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/log/Logger.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/Json.h"
#include "test/unit/TestFiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace autopar::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "autopar-rt-ckpt-" + std::to_string(getpid()) +
         "-" + name;
}

std::vector<std::string> readLines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

using autopar::test::readFile;
using autopar::test::writeFile;

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

void removeDir(const std::string &dir) {
  for (const char *name : {"manifest.json", "shard-00000.bin", "notes.txt"})
    std::remove((dir + "/" + name).c_str());
  rmdir(dir.c_str());
}

double number(const JsonValue &obj, const char *key) {
  const JsonValue *v = obj.find(key);
  EXPECT_NE(v, nullptr) << key;
  if (!v)
    return -1;
  EXPECT_EQ(v->kind, JsonValue::Kind::Number) << key;
  return v->number;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

TEST(RuntimeJsonTest, ParsesTheSubset) {
  JsonValue v;
  Status s = parseJson(
      " {\"a\": [1, -2.5e3, 0, true, false, null],\n \"s\": \"x\\\"\\\\\\/"
      "\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"big\": 9007199254740993, "
      "\"o\": {}} ",
      v);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(v.kind, JsonValue::Kind::Object);
  const JsonValue *a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 6u);
  EXPECT_TRUE(a->array[0].isInteger);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_FALSE(a->array[1].isInteger);
  EXPECT_EQ(a->array[1].number, -2500);
  EXPECT_EQ(a->array[3].kind, JsonValue::Kind::Bool);
  EXPECT_TRUE(a->array[3].boolean);
  EXPECT_FALSE(a->array[4].boolean);
  EXPECT_EQ(a->array[5].kind, JsonValue::Kind::Null);
  EXPECT_EQ(v.find("s")->string, "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("big")->integer, 9007199254740993LL);
  EXPECT_EQ(v.find("o")->kind, JsonValue::Kind::Object);
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(RuntimeJsonTest, RejectsWhatIsNotJson) {
  JsonValue v;
  EXPECT_EQ(parseJson("[1,]", v).message(),
            "bad JSON at byte 3 (unexpected character)");
  EXPECT_EQ(parseJson("{\"a\":1,\"a\":2}", v).message(),
            "bad JSON at byte 7 (duplicate key \"a\")");
  EXPECT_EQ(parseJson("01", v).message(),
            "bad JSON at byte 1 (bad number (leading zero))");
  EXPECT_EQ(parseJson("\"a\nb\"", v).message(),
            "bad JSON at byte 2 (control character in string)");
  EXPECT_EQ(parseJson("{} x", v).message(),
            "bad JSON at byte 3 (unexpected text after the document)");
  EXPECT_EQ(parseJson("", v).message(),
            "bad JSON at byte 0 (unexpected end of input)");
  EXPECT_EQ(parseJson("{'a':1}", v).message(),
            "bad JSON at byte 1 (expected a string key)");
  EXPECT_EQ(parseJson("NaN", v).message(),
            "bad JSON at byte 0 (unexpected character)");
  EXPECT_FALSE(parseJson("\"\\ud800\"", v).isOk());
  EXPECT_FALSE(
      parseJson(std::string(300, '[') + std::string(300, ']'), v).isOk());
}

TEST(RuntimeJsonTest, QuoteRoundTrips) {
  std::string text = "a\"b\\c\nd\x01\xc3\xa9";
  JsonValue v;
  ASSERT_TRUE(parseJson(jsonQuote(text), v).isOk());
  EXPECT_EQ(v.string, text);
  EXPECT_EQ(jsonQuote("x\ty"), "\"x\\ty\"");
}

//===----------------------------------------------------------------------===//
// Logger
//===----------------------------------------------------------------------===//

TEST(RuntimeLoggerTest, LinesParseBack) {
  std::string path = tempPath("log.jsonl");
  testing::internal::CaptureStdout();
  std::string out;
  {
    Logger log;
    Status s = log.open(path, /*append=*/false);
    ASSERT_TRUE(s.isOk()) << s.message();
    log.logStep({0, 10.9876543210123, 3e-4, 1.5, 100.0, 2000.0}, 3);
    log.logStep({1, NAN, 2.5e-4, INFINITY, 50.0, 4000.0}, 3);
    log.logEvent("{\"event\":\"eval\",\"step\":1,\"loss\":9.5}");
    log.logStep({2, 3.25, 0.0, 0.125, 50.0, 4000.0}, 3);
    log.finish();
    EXPECT_TRUE(log.writeStatus().isOk());
  }
  out = testing::internal::GetCapturedStdout();
  // Not a terminal: no progress bar, only the summary.
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("3 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("0.2 s"), std::string::npos) << out;
  EXPECT_NE(out.find("10.9877 -> 3.2500"), std::string::npos) << out;
  // 200 + 200 + 200 tokens in 0.2 s.
  EXPECT_NE(out.find("3000 tokens/s"), std::string::npos) << out;

  std::vector<std::string> lines = readLines(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "{\"step\":0,\"loss\":10.9876543,\"lr\":0.0003,"
                      "\"grad_norm\":1.5,\"ms\":100,\"tokens_per_s\":2000}");
  std::vector<JsonValue> parsed(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    Status s = parseJson(lines[i], parsed[i]);
    ASSERT_TRUE(s.isOk()) << lines[i] << ": " << s.message();
  }
  EXPECT_EQ(parsed[0].find("step")->integer, 0);
  EXPECT_NEAR(number(parsed[0], "loss"), 10.9876543210123, 1e-7);
  EXPECT_EQ(number(parsed[0], "lr"), 3e-4);
  EXPECT_EQ(number(parsed[0], "grad_norm"), 1.5);
  EXPECT_EQ(number(parsed[0], "ms"), 100);
  EXPECT_EQ(number(parsed[0], "tokens_per_s"), 2000);
  EXPECT_EQ(parsed[1].find("loss")->kind, JsonValue::Kind::Null);
  EXPECT_EQ(parsed[1].find("grad_norm")->kind, JsonValue::Kind::Null);
  EXPECT_EQ(number(parsed[1], "lr"), 2.5e-4);
  EXPECT_EQ(parsed[2].find("event")->string, "eval");
  EXPECT_EQ(parsed[3].find("step")->integer, 2);
  EXPECT_EQ(number(parsed[3], "loss"), 3.25);

  // Append keeps the old lines; a fresh open truncates.
  testing::internal::CaptureStdout();
  {
    Logger log;
    ASSERT_TRUE(log.open(path, /*append=*/true).isOk());
    log.logStep({3, 3.0, 1e-4, 0.5, 10.0, 100.0}, 10);
    log.finish();
  }
  EXPECT_EQ(readLines(path).size(), 5u);
  {
    Logger log;
    ASSERT_TRUE(log.open(path, /*append=*/false).isOk());
    log.logStep({0, 3.0, 1e-4, 0.5, 10.0, 100.0}, 10);
  } // The destructor closes the file without a summary.
  out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(readLines(path).size(), 1u);
  EXPECT_NE(out.find("1 steps"), std::string::npos) << out;
  std::remove(path.c_str());
}

TEST(RuntimeLoggerTest, OpenFailsUpFront) {
  std::string path = tempPath("no-such-dir") + "/log.jsonl";
  Logger log;
  EXPECT_EQ(log.open(path, false).message(),
            path + ": cannot write: No such file or directory");
}

TEST(RuntimeLoggerTest, EmptyPathLogsNothing) {
  testing::internal::CaptureStdout();
  Logger log;
  ASSERT_TRUE(log.open("", false).isOk());
  log.logStep({0, 1.0, 1e-3, 1.0, 1.0, 1.0}, 1);
  log.logEvent("{}");
  log.finish();
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("1 steps"), std::string::npos) << out;
}

TEST(RuntimeLoggerTest, JsonNumbers) {
  EXPECT_EQ(jsonNumber(0.1), "0.1");
  EXPECT_EQ(jsonNumber(1.0 / 3.0), "0.333333333");
  EXPECT_EQ(jsonNumber(1e-20), "1e-20");
  EXPECT_EQ(jsonNumber(NAN), "null");
  EXPECT_EQ(jsonNumber(-INFINITY), "null");
  // Exact: the fewest digits (at least 9) that read back to the same double.
  EXPECT_EQ(jsonExactNumber(0.1), "0.1");
  EXPECT_EQ(jsonExactNumber(224005.0), "224005");
  EXPECT_EQ(jsonExactNumber(672016.0 / 3.0), "224005.33333333334");
  EXPECT_EQ(std::strtod(jsonExactNumber(1.0 / 3.0).c_str(), nullptr), 1.0 / 3.0);
  EXPECT_EQ(jsonExactNumber(NAN), "null");
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

struct Tensors {
  std::vector<float> weight = {1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f};
  std::vector<float> bias = std::vector<float>(64);
  std::vector<int64_t> counter = {1, -2, 1LL << 40};
  std::vector<double> scalar = {0.125};
  std::vector<uint8_t> mask = {1, 0, 1};

  Tensors() {
    for (size_t i = 0; i < bias.size(); ++i)
      bias[i] = 0.5f * i;
  }
  std::vector<TensorRef> refs() {
    return {
        {"h.0.attn.c_attn.weight", "f32", {2, 3}, weight.data(), 24},
        {"h.0.attn.c_attn.bias", "f32", {64}, bias.data(), 256},
        {"step_counter", "i64", {3}, counter.data(), 24},
        {"scale", "f64", {}, scalar.data(), 8},
        {"mask", "bool", {3}, mask.data(), 3},
    };
  }
  void clear() {
    std::fill(weight.begin(), weight.end(), 0.f);
    std::fill(bias.begin(), bias.end(), 0.f);
    std::fill(counter.begin(), counter.end(), 0);
    scalar[0] = 0;
    std::fill(mask.begin(), mask.end(), 7);
  }
};

CheckpointMeta sampleMeta() {
  CheckpointMeta meta;
  meta.step = 123;
  meta.modelFingerprint = "sha256:abc\"def";
  meta.optimizer = "adamw";
  return meta;
}

TEST(RuntimeCheckpointTest, RoundTrip) {
  std::string dir = tempPath("rt");
  Tensors t;
  Status s = saveCheckpoint(dir, t.refs(), sampleMeta());
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(exists(dir + ".tmp-" + std::to_string(getpid())));

  // The manifest is format 2 with 64-byte aligned offsets, a CRC32C per
  // tensor, the shard's size and its own checksum, last.
  JsonValue manifest;
  const std::string text = readFile(dir + "/manifest.json");
  ASSERT_TRUE(parseJson(text, manifest).isOk());
  EXPECT_EQ(manifest.find("format")->integer, 2);
  EXPECT_EQ(manifest.find("step")->integer, 123);
  EXPECT_EQ(manifest.find("model")->string, "sha256:abc\"def");
  EXPECT_EQ(manifest.find("optimizer")->string, "adamw");
  const JsonValue &list = *manifest.find("tensors");
  ASSERT_EQ(list.array.size(), 5u);
  EXPECT_EQ(list.array[1].find("name")->string, "h.0.attn.c_attn.bias");
  EXPECT_EQ(list.array[1].find("dtype")->string, "f32");
  EXPECT_EQ(list.array[1].find("shape")->array[0].integer, 64);
  EXPECT_EQ(list.array[1].find("file")->string, "shard-00000.bin");
  EXPECT_EQ(list.array[1].find("offset")->integer, 64);
  EXPECT_EQ(list.array[1].find("bytes")->integer, 256);
  EXPECT_EQ(list.array[3].find("shape")->array.size(), 0u);
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x", crc32c(0, t.bias.data(), 256));
  EXPECT_EQ(list.array[1].find("crc32c")->string, crc);
  const JsonValue &shards = *manifest.find("shards");
  ASSERT_EQ(shards.array.size(), 1u);
  EXPECT_EQ(shards.array[0].find("file")->string, "shard-00000.bin");
  EXPECT_EQ(shards.array[0].find("bytes")->integer,
            int64_t(readFile(dir + "/shard-00000.bin").size()));
  const size_t at = text.rfind(",\"checksum\":\"crc32c:");
  ASSERT_NE(at, std::string::npos);
  std::snprintf(crc, sizeof(crc), "%08x", crc32c(0, text.data(), at));
  EXPECT_EQ(manifest.find("checksum")->string, std::string("crc32c:") + crc);

  Tensors loaded;
  loaded.clear();
  CheckpointMeta meta;
  s = loadCheckpoint(dir, loaded.refs(), meta, "sha256:abc\"def");
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(loaded.weight, t.weight);
  EXPECT_EQ(loaded.bias, t.bias);
  EXPECT_EQ(loaded.counter, t.counter);
  EXPECT_EQ(loaded.scalar, t.scalar);
  EXPECT_EQ(loaded.mask, t.mask);
  EXPECT_EQ(meta.step, 123);
  EXPECT_EQ(meta.modelFingerprint, "sha256:abc\"def");
  EXPECT_EQ(meta.optimizer, "adamw");

  // A subset loads by name, in any order; an empty fingerprint skips the
  // check; a trailing slash is fine.
  std::vector<float> bias(64);
  std::vector<TensorRef> subset = {
      {"h.0.attn.c_attn.bias", "f32", {64}, bias.data(), 256}};
  ASSERT_TRUE(loadCheckpoint(dir + "/", subset, meta, "").isOk());
  EXPECT_EQ(bias, t.bias);
  removeDir(dir);
}

TEST(RuntimeCheckpointTest, SaveReplacesAnOlderCheckpoint) {
  std::string dir = tempPath("replace");
  Tensors t;
  ASSERT_TRUE(saveCheckpoint(dir, t.refs(), sampleMeta()).isOk());
  t.weight[0] = 42.f;
  CheckpointMeta later = sampleMeta();
  later.step = 200;
  Status s = saveCheckpoint(dir, t.refs(), later);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(exists(dir + ".old-" + std::to_string(getpid())));
  Tensors loaded;
  CheckpointMeta meta;
  ASSERT_TRUE(loadCheckpoint(dir, loaded.refs(), meta, "").isOk());
  EXPECT_EQ(loaded.weight[0], 42.f);
  EXPECT_EQ(meta.step, 200);
  removeDir(dir);
}

TEST(RuntimeCheckpointTest, RefusesToReplaceOtherDirectories) {
  std::string dir = tempPath("foreign");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  writeFile(dir + "/notes.txt", "keep me");
  Tensors t;
  EXPECT_EQ(saveCheckpoint(dir, t.refs(), sampleMeta()).message(),
            dir + ": holds 'notes.txt', which is not part of a checkpoint; "
                  "refusing to replace it");
  EXPECT_EQ(readFile(dir + "/notes.txt"), "keep me");
  removeDir(dir);

  std::string file = tempPath("plain-file");
  writeFile(file, "x");
  EXPECT_EQ(saveCheckpoint(file, t.refs(), sampleMeta()).message(),
            file + ": exists and is not a checkpoint directory");
  std::remove(file.c_str());
}

TEST(RuntimeCheckpointTest, SaveChecksSizes) {
  std::vector<float> data(4);
  std::vector<TensorRef> refs = {{"w", "f32", {5}, data.data(), 16}};
  std::string dir = tempPath("sizes");
  EXPECT_EQ(saveCheckpoint(dir, refs, sampleMeta()).message(),
            dir + ": tensor 'w' (f32 [5]) has 16 bytes, expected 20");
  refs = {{"w", "f32", {4}, data.data(), 16},
          {"w", "f32", {4}, data.data(), 16}};
  EXPECT_EQ(saveCheckpoint(dir, refs, sampleMeta()).message(),
            dir + ": tensor 'w' given twice");
  EXPECT_FALSE(exists(dir));
}

TEST(RuntimeCheckpointTest, Crc32c) {
  // The check value of CRC-32C (RFC 3720's polynomial).
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  // Continued over pieces: the same as at once, at any split.
  const std::string text = "autopar checkpoints carry a CRC32C per tensor";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(crc32c(crc32c(0, text.data(), cut), text.data() + cut,
                     text.size() - cut),
              crc32c(0, text.data(), text.size()));
}

/// `text` (a manifest) with its checksum made right again: what a tool
/// that edits a checkpoint on purpose would write.
std::string resigned(const std::string &text) {
  const std::string key = ",\"checksum\":\"crc32c:";
  const size_t at = text.rfind(key);
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x", crc32c(0, text.data(), at));
  return text.substr(0, at) + key + crc + "\"}\n";
}

std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(RuntimeCheckpointTest, CorruptionsAreRefused) {
  const std::string dir = tempPath("corrupt");
  const std::string manifestPath = dir + "/manifest.json",
                    shard = dir + "/shard-00000.bin";
  Tensors t;
  ASSERT_TRUE(saveCheckpoint(dir, t.refs(), sampleMeta()).isOk());
  const std::string manifest = readFile(manifestPath), bytes = readFile(shard);
  CheckpointMeta meta;
  auto load = [&]() {
    Tensors loaded;
    return loadCheckpoint(dir, loaded.refs(), meta, "").message();
  };
  ASSERT_EQ(load(), "");

  // One bit of a tensor flipped; a tensor zeroed.
  std::string flipped = bytes;
  flipped[64 + 5] ^= 0x10; // In h.0.attn.c_attn.bias.
  writeFile(shard, flipped);
  EXPECT_EQ(load(), shard + ": tensor 'h.0.attn.c_attn.bias' fails its "
                            "checksum (the file was changed or corrupted)");
  std::string zeroed = bytes;
  std::fill(zeroed.begin(), zeroed.begin() + 24, '\0');
  writeFile(shard, zeroed);
  EXPECT_EQ(load(), shard + ": tensor 'h.0.attn.c_attn.weight' fails its "
                            "checksum (the file was changed or corrupted)");
  writeFile(shard, bytes);

  // The manifest edited without its checksum.
  writeFile(manifestPath, replaced(manifest, "\"step\":123", "\"step\":124"));
  EXPECT_EQ(load(), manifestPath + ": fails its checksum (the manifest was "
                                   "changed or corrupted)");
  writeFile(manifestPath,
            replaced(manifest, ",\"checksum\":\"crc32c:", ",\"sum\":\"x"));
  EXPECT_EQ(load(), manifestPath + ": 'checksum' is missing or not "
                                   "\"crc32c:<8 hex digits>\"");

  // Edited with the checksum made right: what the manifest says is
  // checked too.
  writeFile(manifestPath,
            resigned(replaced(manifest, "\"step\":123", "\"step\":-5")));
  EXPECT_EQ(load(),
            manifestPath + ": 'step' is missing or not an integer >= 0");
  writeFile(manifestPath,
            resigned(replaced(manifest, "\"offset\":64,", "\"offset\":80,")));
  EXPECT_EQ(load(), manifestPath + ": tensors 'h.0.attn.c_attn.bias' and "
                                   "'step_counter' overlap in shard-00000.bin");
  writeFile(manifestPath,
            resigned(replaced(manifest, "\"shape\":[64]", "\"shape\":[65]")));
  EXPECT_EQ(load(), manifestPath + ": 'tensors[1]' (f32 [65]) has 256 bytes");
  writeFile(manifestPath, resigned(replaced(manifest, "\"shape\":[2,3]",
                                            "\"shape\":[-2,-3]")));
  EXPECT_EQ(load(), manifestPath + ": 'tensors[0].shape' holds a dim that is "
                                   "not an integer >= 0");
  writeFile(manifestPath,
            resigned(replaced(manifest, "\"shape\":[2,3]",
                              "\"shape\":[4294967296,4294967296]")));
  EXPECT_EQ(load(), manifestPath + ": 'tensors[0].shape' [4294967296, "
                                   "4294967296] overflows int64");

  // NaN written with a matching checksum (a diverged run's state).
  std::vector<float> nan = t.weight;
  nan[2] = std::nanf("");
  Tensors diverged;
  diverged.weight = nan;
  ASSERT_TRUE(saveCheckpoint(dir, diverged.refs(), sampleMeta()).isOk());
  EXPECT_EQ(load(), shard + ": tensor 'h.0.attn.c_attn.weight' holds NaN or "
                            "infinity");
  removeDir(dir);
}

TEST(RuntimeCheckpointTest, StaleTemporariesAreRemoved) {
  const std::string dir = tempPath("stale");
  // A save killed before its swap: DIR.tmp-<pid> of a process that is gone
  // (no pid is that large); one of a running process (this one's parent)
  // stays.
  const std::string gone = dir + ".tmp-999999999",
                    running = dir + ".tmp-" + std::to_string(getppid());
  for (const std::string &d : {gone, running}) {
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    writeFile(d + "/manifest.json", "{}");
  }
  Tensors t;
  ASSERT_TRUE(saveCheckpoint(dir, t.refs(), sampleMeta()).isOk());
  EXPECT_FALSE(exists(gone));
  EXPECT_TRUE(exists(running));
  removeDir(running);
  removeDir(dir);
}

TEST(RuntimeCheckpointTest, KeepLastRotates) {
  const std::string dir = tempPath("rotate");
  Tensors t;
  CheckpointMeta meta = sampleMeta();
  for (int64_t step : {10, 20, 30, 40}) {
    meta.step = step;
    t.weight[0] = float(step);
    ASSERT_TRUE(saveCheckpoint(dir, t.refs(), meta, /*keepLast=*/3).isOk());
  }
  // DIR the newest, the two before it beside it.
  EXPECT_FALSE(exists(dir + ".step-10"));
  for (int64_t step : {20, 30}) {
    const std::string kept = dir + ".step-" + std::to_string(step);
    Tensors loaded;
    CheckpointMeta read;
    ASSERT_TRUE(loadCheckpoint(kept, loaded.refs(), read, "").isOk()) << kept;
    EXPECT_EQ(read.step, step);
    EXPECT_EQ(loaded.weight[0], float(step));
    removeDir(kept);
  }
  Tensors loaded;
  CheckpointMeta read;
  ASSERT_TRUE(loadCheckpoint(dir, loaded.refs(), read, "").isOk());
  EXPECT_EQ(read.step, 40);
  removeDir(dir);
}

TEST(RuntimeCheckpointTest, SaveTargetsAreCheckedFirst) {
  EXPECT_TRUE(checkSaveTarget(tempPath("new")).isOk());
  const std::string file = tempPath("target-file");
  writeFile(file, "x");
  EXPECT_EQ(checkSaveTarget(file).message(),
            file + ": exists and is not a checkpoint directory");
  EXPECT_EQ(checkSaveTarget(file + "/ck").message(),
            file + "/ck: cannot write: " + file + " is not a directory");
  std::remove(file.c_str());
  EXPECT_EQ(checkSaveTarget("/nonexistent-autopar/ck").message(),
            "/nonexistent-autopar/ck: cannot write: /nonexistent-autopar is "
            "not a directory");
}

TEST(RuntimeCheckpointTest, MismatchMessages) {
  std::string dir = tempPath("mismatch");
  Tensors t;
  ASSERT_TRUE(saveCheckpoint(dir, t.refs(), sampleMeta()).isOk());
  CheckpointMeta meta;
  std::vector<float> buf(96);

  std::vector<TensorRef> refs = t.refs();
  refs[1].shape = {96};
  refs[1].data = buf.data();
  refs[1].numBytes = 384;
  EXPECT_EQ(loadCheckpoint(dir, refs, meta, "").message(),
            dir + ": checkpoint is of a different model (tensor "
                  "'h.0.attn.c_attn.bias' has shape [64], this model has "
                  "[96])");

  refs = t.refs();
  refs[0].shape = {3, 2};
  EXPECT_EQ(loadCheckpoint(dir, refs, meta, "").message(),
            dir + ": checkpoint is of a different model (tensor "
                  "'h.0.attn.c_attn.weight' has shape [2, 3], this model has "
                  "[3, 2])");

  refs = t.refs();
  refs.push_back({"x", "f32", {1}, buf.data(), 4});
  EXPECT_EQ(loadCheckpoint(dir, refs, meta, "").message(),
            dir + ": checkpoint is of a different model (tensor 'x' missing)");

  refs = t.refs();
  refs[3].dtype = "f32";
  refs[3].numBytes = 4;
  EXPECT_EQ(loadCheckpoint(dir, refs, meta, "").message(),
            dir + ": checkpoint is of a different model (tensor 'scale' has "
                  "dtype f64, this model has f32)");

  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "sha256:other").message(),
            dir + ": checkpoint is of a different model (fingerprint "
                  "sha256:abc\"def, this model sha256:other)");

  // Another optimizer is named before any tensor is matched.
  refs = t.refs();
  refs.push_back({"x", "f32", {1}, buf.data(), 4});
  EXPECT_EQ(loadCheckpoint(dir, refs, meta, "", "sgd").message(),
            dir + ": checkpoint was trained with " + sampleMeta().optimizer +
                ", this program trains with sgd");
  CheckpointMeta sameOptimizer;
  EXPECT_TRUE(loadCheckpoint(dir, t.refs(), sameOptimizer, "",
                             sampleMeta().optimizer)
                  .isOk());

  // A failed load leaves meta and the buffers alone.
  EXPECT_EQ(meta.step, 0);

  // Truncated shard.
  std::string shard = dir + "/shard-00000.bin";
  std::string bytes = readFile(shard);
  writeFile(shard, bytes.substr(0, bytes.size() - 1));
  Tensors loaded;
  loaded.clear();
  EXPECT_EQ(loadCheckpoint(dir, loaded.refs(), meta, "").message(),
            shard + ": has 450 bytes, the manifest says 451 (truncated)");
  EXPECT_EQ(loaded.weight[0], 0.f); // Nothing read before the check.

  // Broken manifest.
  writeFile(dir + "/manifest.json", "{\"format\":2,");
  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "").message(),
            dir + "/manifest.json: bad JSON at byte 12 (expected a string "
                  "key)");
  writeFile(dir + "/manifest.json", "{\"format\":3}");
  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "").message(),
            dir + "/manifest.json: unsupported format 3 (expected 2)");
  writeFile(dir + "/manifest.json", "{\"format\":1}");
  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "").message(),
            dir + "/manifest.json: format 1 (an older autopar's, without "
                  "checksums) cannot be verified: save it again with this "
                  "version");

  std::remove((dir + "/manifest.json").c_str());
  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "").message(),
            dir + ": no checkpoint (manifest.json missing)");
  removeDir(dir);
  EXPECT_EQ(loadCheckpoint(dir, t.refs(), meta, "").message(),
            dir + ": no checkpoint (manifest.json missing)");
}

} // namespace
