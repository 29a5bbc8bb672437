//===- RuntimeDataTest.cpp - llm.c token files ----------------------------===//

#include "runtime/data/TokenFile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace autopar::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "autopar-rt-data-" + std::to_string(getpid()) +
         "-" + name;
}

/// Writes a header of three little-endian int32 (+ zeros) and `tokenBytes`.
void writeRaw(const std::string &path, int32_t magic, int32_t version,
              int32_t count, const std::vector<unsigned char> &tokenBytes,
              size_t headerBytes = 1024) {
  std::vector<unsigned char> bytes(1024, 0);
  int32_t fields[3] = {magic, version, count};
  for (int f = 0; f < 3; ++f)
    for (int i = 0; i < 4; ++i)
      bytes[4 * f + i] = static_cast<unsigned char>(
          static_cast<uint32_t>(fields[f]) >> (8 * i));
  bytes.resize(headerBytes);
  bytes.insert(bytes.end(), tokenBytes.begin(), tokenBytes.end());
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

TokenFile iota(int n) {
  TokenFile file;
  file.path = "iota.bin";
  for (int i = 0; i < n; ++i)
    file.tokens.push_back(static_cast<uint16_t>(i));
  return file;
}

TEST(RuntimeDataTest, WriteThenLoadRoundTrips) {
  std::string path = tempPath("roundtrip.bin");
  std::vector<uint16_t> tokens = {0, 1, 255, 256, 65535, 50256, 7};
  ASSERT_TRUE(writeTokenFile(path, tokens).isOk());
  TokenFile file;
  Status s = loadTokenFile(path, file);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(file.path, path);
  EXPECT_EQ(file.tokens, tokens);

  // The bytes are the llm.c layout: little-endian header, then uint16 LE.
  FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<unsigned char> bytes(1024 + 2 * tokens.size() + 1);
  size_t got = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  ASSERT_EQ(got, 1024 + 2 * tokens.size());
  EXPECT_EQ(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24,
            20240520);
  EXPECT_EQ(bytes[4], 1);
  EXPECT_EQ(bytes[8], 7);
  EXPECT_EQ(bytes[1024 + 2 * 3], 0x00); // 256
  EXPECT_EQ(bytes[1024 + 2 * 3 + 1], 0x01);
  // No temporary file is left behind.
  std::string tmp = path + ".tmp-" + std::to_string(getpid());
  EXPECT_NE(access(tmp.c_str(), F_OK), 0);
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, EmptyTokenListRoundTrips) {
  std::string path = tempPath("empty.bin");
  ASSERT_TRUE(writeTokenFile(path, {}).isOk());
  TokenFile file;
  ASSERT_TRUE(loadTokenFile(path, file).isOk());
  EXPECT_TRUE(file.tokens.empty());
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, MissingFile) {
  std::string path = tempPath("does-not-exist.bin");
  TokenFile file;
  Status s = loadTokenFile(path, file);
  EXPECT_EQ(s.message(), path + ": cannot open: No such file or directory");
}

TEST(RuntimeDataTest, ShortHeader) {
  std::string path = tempPath("short.bin");
  writeRaw(path, 20240520, 1, 0, {}, 1000);
  TokenFile file;
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path + ": too short for the 1024-byte header");
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, BadMagic) {
  std::string path = tempPath("magic.bin");
  writeRaw(path, 123, 1, 0, {});
  TokenFile file;
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path + ": not a token file (magic 123, expected 20240520)");
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, BadVersion) {
  std::string path = tempPath("version.bin");
  writeRaw(path, 20240520, 2, 0, {});
  TokenFile file;
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path + ": unsupported version 2 (expected 1)");
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, CountMismatch) {
  std::string path = tempPath("count.bin");
  writeRaw(path, 20240520, 1, 5, {1, 0, 2, 0, 3, 0});
  TokenFile file;
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path + ": header says 5 tokens but the file holds 3");
  writeRaw(path, 20240520, 1, 2, {1, 0, 2, 0, 3, 0});
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path + ": header says 2 tokens but the file holds 3");
  writeRaw(path, 20240520, 1, 3, {1, 0, 2, 0, 3, 0, 9});
  EXPECT_EQ(loadTokenFile(path, file).message(),
            path +
                ": header says 3 tokens but the file holds 3 and a stray byte");
  writeRaw(path, 20240520, 1, 3, {1, 0, 2, 0, 3, 0});
  Status ok = loadTokenFile(path, file);
  ASSERT_TRUE(ok.isOk()) << ok.message();
  EXPECT_EQ(file.tokens, (std::vector<uint16_t>{1, 2, 3}));
  std::remove(path.c_str());
}

TEST(RuntimeDataTest, WriteToMissingDirectoryFails) {
  std::string path = tempPath("no-such-dir") + "/tokens.bin";
  EXPECT_EQ(writeTokenFile(path, {1, 2}).message(),
            path + ": cannot write: No such file or directory");
}

TEST(RuntimeDataTest, CheckTooFewTokens) {
  TokenFile file = iota(100);
  file.path = "small.bin";
  EXPECT_EQ(checkTokenFile(file, 4, 256, 50257).message(),
            "small.bin: 100 tokens, fewer than one step needs (B*T+1 = 1025)");
  // Exactly B*T+1 is enough.
  EXPECT_TRUE(checkTokenFile(iota(1025), 4, 256, 50257).isOk());
  EXPECT_FALSE(checkTokenFile(iota(1024), 4, 256, 50257).isOk());
}

TEST(RuntimeDataTest, CheckVocabulary) {
  TokenFile file = iota(50);
  file.path = "data/tok.bin";
  file.tokens[30] = 300;
  file.tokens[40] = 65535;
  EXPECT_EQ(checkTokenFile(file, 2, 4, 256).message(),
            "data/tok.bin: token 300 at position 30 is outside the "
            "vocabulary (size 256)");
  // Tokens 0..49 except the two are fine for 50257; all are below 65536.
  file.tokens[30] = 255;
  EXPECT_EQ(checkTokenFile(file, 2, 4, 50257).message(),
            "data/tok.bin: token 65535 at position 40 is outside the "
            "vocabulary (size 50257)");
  EXPECT_TRUE(checkTokenFile(file, 2, 4, 65536).isOk());
  // The first token equal to the vocabulary size is already outside.
  TokenFile edge = iota(20);
  EXPECT_EQ(checkTokenFile(edge, 1, 4, 19).message(),
            "iota.bin: token 19 at position 19 is outside the vocabulary "
            "(size 19)");
}

TEST(RuntimeDataTest, StepsPerPass) {
  EXPECT_EQ(stepsPerPass(iota(20), 2, 3), 3); // floor(19 / 6)
  EXPECT_EQ(stepsPerPass(iota(19), 2, 3), 3); // floor(18 / 6)
  EXPECT_EQ(stepsPerPass(iota(18), 2, 3), 2); // floor(17 / 6)
  EXPECT_EQ(stepsPerPass(iota(7), 2, 3), 1);
  EXPECT_EQ(stepsPerPass(iota(6), 2, 3), 0);
}

TEST(RuntimeDataTest, FillSamplesFirstPass) {
  TokenFile file = iota(20); // token i has value i
  const int64_t B = 2, T = 3;
  std::vector<int64_t> in(B * T), tg(B * T);
  for (int64_t step = 0; step < 3; ++step) {
    fillSamples(file, step, B, T, 0, B, in.data(), tg.data());
    for (int64_t g = 0; g < B; ++g)
      for (int64_t j = 0; j < T; ++j) {
        EXPECT_EQ(in[g * T + j], (step * B + g) * T + j);
        EXPECT_EQ(tg[g * T + j], (step * B + g) * T + j + 1);
      }
  }
  fillSamples(file, 2, B, T, 0, B, in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<int64_t>{12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(tg, (std::vector<int64_t>{13, 14, 15, 16, 17, 18}));
}

TEST(RuntimeDataTest, FillSamplesWrapsWholeSteps) {
  TokenFile file = iota(20); // 3 steps per pass of 6 tokens (+1 target)
  const int64_t B = 2, T = 3;
  std::vector<int64_t> in(B * T), tg(B * T), in0(B * T), tg0(B * T);
  fillSamples(file, 0, B, T, 0, B, in0.data(), tg0.data());
  fillSamples(file, 3, B, T, 0, B, in.data(), tg.data());
  EXPECT_EQ(in, in0);
  EXPECT_EQ(tg, tg0);
  fillSamples(file, 7, B, T, 0, B, in.data(), tg.data()); // = step 1
  EXPECT_EQ(in, (std::vector<int64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(tg, (std::vector<int64_t>{7, 8, 9, 10, 11, 12}));

  // Exactly B*T+1 tokens: every step is step 0.
  TokenFile tight = iota(7);
  fillSamples(tight, 5, B, T, 0, B, in.data(), tg.data());
  EXPECT_EQ(in, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(tg, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(RuntimeDataTest, FillSamplesSubsetMatchesWholeBatch) {
  // A rank or micro-batch that fills samples [first, first+n) sees exactly
  // those rows of the whole step.
  TokenFile file = iota(1000);
  const int64_t B = 8, T = 5;
  std::vector<int64_t> in(B * T), tg(B * T);
  for (int64_t step : {0, 4, 24, 25, 99}) {
    fillSamples(file, step, B, T, 0, B, in.data(), tg.data());
    for (int64_t first = 0; first < B; first += 3) {
      int64_t n = std::min<int64_t>(3, B - first);
      std::vector<int64_t> pin(n * T), ptg(n * T);
      fillSamples(file, step, B, T, first, n, pin.data(), ptg.data());
      for (int64_t k = 0; k < n * T; ++k) {
        EXPECT_EQ(pin[k], in[first * T + k]) << step << " " << first;
        EXPECT_EQ(ptg[k], tg[first * T + k]) << step << " " << first;
      }
    }
  }
  // Step 25 of a 24-step pass (floor(999/40)) is step 1.
  fillSamples(file, 25, B, T, 0, 1, in.data(), tg.data());
  EXPECT_EQ(in[0], 40);
}

} // namespace
