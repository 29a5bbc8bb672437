//===- RuntimeDataKernelsTest.cpp - CPU data kernels against references ---===//
//
// The data-movement and reduction kernels of runtime/cpu/Kernels.h against
// plain-loop references: gathers and their backward, the strided-copy
// memcpy / 32x32-tile transpose / generic paths, axis-block copies, the
// reduce column / row / general paths, accumulation, and the call-free
// exp of the attention kernels. Copies and gathers must match bit for bit;
// float results are compared with a relative tolerance against double
// references, under several OpenMP thread counts where threads matter.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Math.h"
#include "test/unit/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace autopar::rt::cpu;
using namespace autopar::test;

namespace {

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

TEST(RuntimeKernelsTest, Gather) {
  struct Case {
    int64_t outer, axisSize, inner, numIndices;
  };
  const Case cases[] = {{1, 5, 1, 3},     {3, 7, 4, 9},     {4, 6, 1, 10},
                        {2, 10, 16, 25},  {1, 1, 3, 4},
                        {8, 50, 64, 40}}; // parallel for 4/8-byte elements
  uint32_t seed = 110;
  for (const Case &c : cases)
    for (int64_t elem : {1, 4, 8})
      for (bool i64 : {false, true}) {
        SCOPED_TRACE("outer=" + std::to_string(c.outer) +
                     " axis=" + std::to_string(c.axisSize) +
                     " inner=" + std::to_string(c.inner) +
                     " n=" + std::to_string(c.numIndices) +
                     " elem=" + std::to_string(elem) +
                     " indices64=" + (i64 ? "1" : "0"));
        int64_t innerBytes = c.inner * elem;
        std::vector<uint8_t> data =
            randomBytes(c.outer * c.axisSize * innerBytes, seed++);
        std::mt19937 gen(seed++);
        std::vector<int64_t> idx(c.numIndices);
        for (int64_t i = 0; i < c.numIndices; ++i) {
          int64_t v = static_cast<int64_t>(gen() % c.axisSize);
          idx[i] = (i % 2) ? v - c.axisSize : v; // half negative
        }
        idx[0] = -1; // last
        std::vector<int32_t> idx32(idx.begin(), idx.end());
        const void *ip = i64 ? static_cast<const void *>(idx.data())
                             : static_cast<const void *>(idx32.data());
        std::vector<uint8_t> ref(c.outer * c.numIndices * innerBytes);
        for (int64_t o = 0; o < c.outer; ++o)
          for (int64_t i = 0; i < c.numIndices; ++i) {
            int64_t k = idx[i] < 0 ? idx[i] + c.axisSize : idx[i];
            for (int64_t b = 0; b < innerBytes; ++b)
              ref[(o * c.numIndices + i) * innerBytes + b] =
                  data[(o * c.axisSize + k) * innerBytes + b];
          }
        forThreadCounts([&](int) {
          std::vector<uint8_t> out(ref.size(), 0xAB);
          gather(data.data(), ip, i64, out.data(), c.outer, c.axisSize,
                 innerBytes, c.numIndices);
          EXPECT_TRUE(out == ref) << "gather output differs";
        });
      }
}

TEST(RuntimeKernelsTest, GatherBackward) {
  struct Case {
    int64_t outer, axisSize, inner, numIndices;
  };
  const Case cases[] = {{1, 5, 1, 8},    {3, 4, 2, 9},  {2, 6, 5, 12},
                        {2, 10, 37, 30}, {1, 3, 3, 1}, {4, 20, 100, 64}};
  uint32_t seed = 130;
  for (const Case &c : cases)
    for (bool i64 : {false, true}) {
      SCOPED_TRACE("outer=" + std::to_string(c.outer) +
                   " axis=" + std::to_string(c.axisSize) +
                   " inner=" + std::to_string(c.inner) +
                   " n=" + std::to_string(c.numIndices) +
                   " indices64=" + (i64 ? "1" : "0"));
      std::mt19937 gen(seed++);
      std::vector<int64_t> idx(c.numIndices);
      for (int64_t i = 0; i < c.numIndices; ++i) {
        int64_t v = static_cast<int64_t>(gen() % c.axisSize);
        idx[i] = (i % 3 == 1) ? v - c.axisSize : v;
      }
      // Duplicates, also one spelled negatively.
      idx[0] = 1 % c.axisSize;
      if (c.numIndices > 2) {
        idx[1] = 1 % c.axisSize;
        idx[2] = 1 % c.axisSize - c.axisSize;
      }
      std::vector<int32_t> idx32(idx.begin(), idx.end());
      const void *ip = i64 ? static_cast<const void *>(idx.data())
                           : static_cast<const void *>(idx32.data());
      std::vector<float> dout =
          randomFloats(c.outer * c.numIndices * c.inner, seed++);
      std::vector<double> ref(c.outer * c.axisSize * c.inner, 0.0);
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t i = 0; i < c.numIndices; ++i) {
          int64_t k = idx[i] < 0 ? idx[i] + c.axisSize : idx[i];
          for (int64_t j = 0; j < c.inner; ++j)
            ref[(o * c.axisSize + k) * c.inner + j] +=
                dout[(o * c.numIndices + i) * c.inner + j];
        }
      forThreadCounts([&](int) {
        std::vector<float> dd(ref.size(), kNaN); // must be zeroed
        gatherBackward(ip, i64, dout.data(), dd.data(), c.outer, c.axisSize,
                       c.inner, c.numIndices);
        expectClose(dd, ref, 1e-5, 1.0, "gatherBackward");
      });
    }
}

//===----------------------------------------------------------------------===//
// Strided copy / scatter
//===----------------------------------------------------------------------===//

/// out[i] = in[offset + sum i_d strides[d]], bytewise.
std::vector<uint8_t> naiveStridedCopy(const std::vector<uint8_t> &in,
                                      const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &strides,
                                      int64_t offset, int64_t elem) {
  int64_t total = 1;
  for (int64_t s : shape)
    total *= s;
  std::vector<uint8_t> out(total * elem);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = offset, rem = i;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      off += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    EXPECT_GE(off, 0);
    EXPECT_LT(off * elem, static_cast<int64_t>(in.size()));
    std::memcpy(&out[i * elem], &in[off * elem], elem);
  }
  return out;
}

struct StridedCase {
  const char *name;
  int64_t inElements;
  std::vector<int64_t> shape, strides;
  int64_t offset;
};

std::vector<StridedCase> stridedCases() {
  return {
      // Contiguous: merges to a single row (memcpy path).
      {"contiguous", 2 * 3 * 4, {2, 3, 4}, {12, 4, 1}, 0},
      // Permutation (2,3,0,1) of [2,3,4,5]: merges to [20, 6] with strides
      // [1, 20] (a transpose of the merged dims).
      {"permute-merge", 120, {4, 5, 2, 3}, {5, 1, 60, 20}, 0},
      // Permutation (1,0,2) of [3,4,5]: innermost in-stride 1 (memcpy rows).
      {"permute-rows", 60, {4, 3, 5}, {5, 20, 1}, 0},
      // Slice x[1:4, :, 2:7] of [6,7,9]: rows of 5 (memcpy), with an offset.
      {"slice-rows", 6 * 7 * 9, {3, 7, 5}, {63, 9, 1}, 63 + 2},
      // Unit dims mixed in around a slice.
      {"unit-dims", 6 * 7 * 9, {1, 3, 1, 7, 5, 1}, {999, 63, 5, 9, 1, 7}, 65},
      // Broadcast (stride 0) of a row.
      {"broadcast", 7, {5, 7}, {0, 1}, 0},
      // Transpose of the last two dims of [3, 70, 45] (planes, sizes not
      // multiples of 32): tiled path.
      {"transpose-tiled", 3 * 70 * 45, {3, 45, 70}, {3150, 1, 45}, 0},
      // A larger transpose (parallel tiles): [5, 150, 100] -> [5, 100, 150].
      {"transpose-tiled-big", 5 * 150 * 100, {5, 100, 150}, {15000, 1, 100},
       0},
      // Transpose of a 4-d tensor whose outer dims do not merge.
      {"transpose-4d", 2 * 3 * 33 * 40, {3, 2, 40, 33}, {1320, 3960, 1, 40},
       0},
      // Transposed with a reversed column order: tiled with a negative
      // column stride.
      {"transpose-reversed", 40 * 35, {35, 40}, {1, -35}, 39 * 35},
      // Reversed slice x[6:1:-2, ::-1] of [8, 10]: negative strides (generic).
      {"reversed-slice", 80, {3, 10}, {-20, -1}, 69},
      // Reversed outer dim only: rows contiguous, negative row stride.
      {"reversed-rows", 80, {8, 10}, {-10, 1}, 70},
      // Strided innermost (every third element) in 3 dims: generic.
      {"step-slice", 4 * 5 * 30, {2, 5, 10}, {300, 30, 3}, 151},
      // Overlapping views (as_strided / unfold): equal strides must not be
      // merged. Sliding windows of 5 over 10 elements (rows contiguous).
      {"sliding-window", 10, {6, 5}, {1, 1}, 0},
      {"overlap-step", 12, {3, 4}, {2, 2}, 1},
      // Diagonal: generic with a non-unit stride.
      {"diagonal", 64, {8}, {9}, 0},
      // Scalar (all unit dims).
      {"scalar", 10, {1, 1}, {4, 1}, 7},
      {"rank0", 10, {}, {}, 3},
      // A large generic copy (parallel rows): step 2 innermost.
      {"generic-big", 300 * 600, {300, 300}, {600, 2}, 1},
      // A large memcpy-path copy (parallel rows).
      {"rows-big", 400 * 300, {400, 200}, {300, 1}, 50},
  };
}

TEST(RuntimeKernelsTest, StridedCopy) {
  uint32_t seed = 150;
  for (const StridedCase &sc : stridedCases())
    for (int64_t elem : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::string(sc.name) + " elem=" + std::to_string(elem));
      std::vector<uint8_t> in = randomBytes(sc.inElements * elem, seed++);
      std::vector<uint8_t> ref =
          naiveStridedCopy(in, sc.shape, sc.strides, sc.offset, elem);
      forThreadCounts([&](int) {
        std::vector<uint8_t> out(ref.size(), 0xCD);
        stridedCopy(in.data(), out.data(), static_cast<int>(sc.shape.size()),
                    sc.shape.data(), sc.strides.data(), sc.offset, elem);
        size_t firstBad = ref.size();
        for (size_t i = 0; i < ref.size(); ++i)
          if (out[i] != ref[i]) {
            firstBad = i;
            break;
          }
        EXPECT_EQ(firstBad, ref.size())
            << "stridedCopy differs first at byte " << firstBad << " (element "
            << firstBad / elem << ")";
      });
    }
}

TEST(RuntimeKernelsTest, StridedScatterInvertsSlice) {
  struct Case {
    const char *name;
    int64_t outElements;
    std::vector<int64_t> shape, strides;
    int64_t offset;
  };
  const Case cases[] = {
      // x[1:4, :, 2:7:2] of [6,7,9].
      {"step-slice", 6 * 7 * 9, {3, 7, 3}, {63, 9, 2}, 63 + 2},
      // x[:, 3:8] of [5, 10]: contiguous rows.
      {"rows", 50, {5, 5}, {10, 1}, 3},
      // Reversed slice x[6:1:-2, ::-1] of [8, 10].
      {"reversed", 80, {3, 10}, {-20, -1}, 69},
      // Transposed view of [30, 40].
      {"transpose", 1200, {40, 30}, {1, 40}, 0},
      // Unit dims and a large slice (parallel).
      {"big", 400 * 300, {1, 400, 1, 250}, {5, 300, 3, 1}, 25},
      {"scalar", 9, {}, {}, 4},
  };
  uint32_t seed = 170;
  for (const Case &c : cases)
    for (int64_t elem : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::string(c.name) + " elem=" + std::to_string(elem));
      int64_t total = 1;
      for (int64_t s : c.shape)
        total *= s;
      std::vector<uint8_t> in = randomBytes(total * elem, seed++);
      // Reference: zeros, then the slice positions.
      std::vector<uint8_t> ref(c.outElements * elem, 0);
      for (int64_t i = 0; i < total; ++i) {
        int64_t off = c.offset, rem = i;
        for (int d = static_cast<int>(c.shape.size()) - 1; d >= 0; --d) {
          off += (rem % c.shape[d]) * c.strides[d];
          rem /= c.shape[d];
        }
        std::memcpy(&ref[off * elem], &in[i * elem], elem);
      }
      forThreadCounts([&](int) {
        std::vector<uint8_t> out(ref.size(), 0xEE);
        stridedScatter(in.data(), out.data(), c.outElements,
                       static_cast<int>(c.shape.size()), c.shape.data(),
                       c.strides.data(), c.offset, elem);
        EXPECT_TRUE(out == ref) << "stridedScatter output differs";
        // Slicing the scattered tensor gives the input back.
        std::vector<uint8_t> back(in.size(), 0x11);
        stridedCopy(out.data(), back.data(), static_cast<int>(c.shape.size()),
                    c.shape.data(), c.strides.data(), c.offset, elem);
        EXPECT_TRUE(back == in) << "slice of the scatter differs from input";
      });
    }
}

//===----------------------------------------------------------------------===//
// copyAxisBlock
//===----------------------------------------------------------------------===//

TEST(RuntimeKernelsTest, CopyAxisBlock) {
  struct Case {
    int64_t outer, n, bigN, offset, innerBytes;
  };
  const Case cases[] = {{1, 3, 3, 0, 4},      {4, 2, 7, 3, 12},
                        {3, 5, 9, 4, 1},      {5, 1, 6, 0, 8},
                        {2, 4, 10, 6, 24},    {300, 20, 50, 17, 16}};
  uint32_t seed = 190;
  for (const Case &c : cases) {
    SCOPED_TRACE("outer=" + std::to_string(c.outer) +
                 " n=" + std::to_string(c.n) + " bigN=" +
                 std::to_string(c.bigN) + " offset=" +
                 std::to_string(c.offset) + " innerBytes=" +
                 std::to_string(c.innerBytes));
    std::vector<uint8_t> small = randomBytes(c.outer * c.n * c.innerBytes,
                                             seed++);
    std::vector<uint8_t> big = randomBytes(c.outer * c.bigN * c.innerBytes,
                                           seed++);
    // Into the big tensor (concat): other positions untouched.
    std::vector<uint8_t> refBig = big;
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t b = 0; b < c.innerBytes; ++b)
          refBig[(o * c.bigN + c.offset + j) * c.innerBytes + b] =
              small[(o * c.n + j) * c.innerBytes + b];
    // Out of the big tensor (split).
    std::vector<uint8_t> refSmall(small.size());
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t b = 0; b < c.innerBytes; ++b)
          refSmall[(o * c.n + j) * c.innerBytes + b] =
              big[(o * c.bigN + c.offset + j) * c.innerBytes + b];
    forThreadCounts([&](int) {
      std::vector<uint8_t> gotBig = big;
      copyAxisBlock(small.data(), gotBig.data(), c.outer, c.n, c.bigN,
                    c.offset, c.innerBytes, true);
      EXPECT_TRUE(gotBig == refBig) << "copyAxisBlock into big differs";
      std::vector<uint8_t> gotSmall(small.size(), 0x5A);
      copyAxisBlock(big.data(), gotSmall.data(), c.outer, c.n, c.bigN,
                    c.offset, c.innerBytes, false);
      EXPECT_TRUE(gotSmall == refSmall) << "copyAxisBlock out of big differs";
    });
  }
}

//===----------------------------------------------------------------------===//
// Reduce
//===----------------------------------------------------------------------===//

std::vector<double> naiveReduce(ReduceKind kind, const std::vector<float> &in,
                                const std::vector<int64_t> &shape,
                                const std::vector<bool> &reduced) {
  int rank = static_cast<int>(shape.size());
  int64_t total = 1, outCount = 1, redCount = 1;
  for (int d = 0; d < rank; ++d) {
    total *= shape[d];
    (reduced[d] ? redCount : outCount) *= shape[d];
  }
  bool isMax = kind == ReduceKind::Max;
  std::vector<double> acc(outCount, isMax ? -INFINITY : 0.0);
  std::vector<bool> sawNaN(outCount, false);
  for (int64_t i = 0; i < total; ++i) {
    // Multi-index of i, then the output index over the kept dims.
    int64_t rem = i, o = 0, mul = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t id = rem % shape[d];
      rem /= shape[d];
      if (!reduced[d]) {
        o += id * mul;
        mul *= shape[d];
      }
    }
    double v = in[i];
    if (isMax) {
      if (std::isnan(v))
        sawNaN[o] = true;
      else
        acc[o] = std::max(acc[o], v);
    } else {
      acc[o] += v;
    }
  }
  for (int64_t o = 0; o < outCount; ++o) {
    if (kind == ReduceKind::Mean)
      acc[o] /= static_cast<double>(redCount);
    if (isMax && sawNaN[o])
      acc[o] = NAN;
  }
  return acc;
}

struct ReduceCase {
  const char *name;
  std::vector<int64_t> shape;
  std::vector<bool> reduced;
};

void runReduceCase(const ReduceCase &rc, const std::vector<float> &in,
                   ReduceKind kind) {
  std::vector<double> ref = naiveReduce(kind, in, rc.shape, rc.reduced);
  int rank = static_cast<int>(rc.shape.size());
  bool red[kMaxRank] = {};
  for (int d = 0; d < rank; ++d)
    red[d] = rc.reduced[d];
  int64_t redCount = 1;
  for (int d = 0; d < rank; ++d)
    if (rc.reduced[d])
      redCount *= rc.shape[d];
  double rtol = redCount > 1000 ? 1e-4 : 1e-5;
  forThreadCounts([&](int) {
    std::vector<float> out(ref.size(), kNaN);
    reduce(kind, in.data(), out.data(), rank, rc.shape.data(), red);
    if (kind == ReduceKind::Max) {
      // Max is exact.
      for (size_t i = 0; i < ref.size(); ++i) {
        if (std::isnan(ref[i]))
          EXPECT_TRUE(std::isnan(out[i])) << "max element " << i;
        else
          EXPECT_EQ(out[i], static_cast<float>(ref[i])) << "max element " << i;
      }
    } else {
      expectClose(out, ref, rtol, kind == ReduceKind::Sum ? 1.0 : 1e-2,
                  kind == ReduceKind::Sum ? "reduce sum" : "reduce mean");
    }
  });
}

std::vector<ReduceCase> reduceCases() {
  return {
      // [reduced, kept]: column path (300 columns: blocks of 64 and a part).
      {"reduced-kept", {37, 300}, {true, false}},
      {"reduced-kept-big", {200, 300}, {true, false}}, // parallel
      {"reduced-reduced-kept", {3, 5, 7}, {true, true, false}},
      // [kept, reduced]: row path.
      {"kept-reduced", {50, 77}, {false, true}},
      {"kept-reduced-big", {300, 100}, {false, true}}, // parallel
      {"kept-kept-reduced", {4, 5, 6}, {false, false, true}},
      // General path.
      {"reduced-kept-reduced", {5, 6, 7}, {true, false, true}},
      {"kept-reduced-kept", {4, 9, 6}, {false, true, false}},
      {"general-4d", {3, 4, 5, 6}, {false, true, false, true}},
      {"general-big", {30, 40, 20}, {true, false, true}}, // parallel
      // Full reduction to a scalar.
      {"full", {13, 17}, {true, true}},
      {"full-long", {100000}, {true}},
      // Unit dims mixed in.
      {"unit-column", {1, 5, 1, 6}, {false, true, true, false}},
      {"unit-row", {4, 1, 5, 1}, {false, true, true, false}},
      {"unit-general", {3, 1, 4, 1, 5}, {true, false, false, true, true}},
      {"unit-reduced-only", {3, 1, 4}, {false, true, false}},
      {"all-unit", {1, 1}, {true, false}},
      {"nothing-reduced", {3, 4}, {false, false}},
  };
}

TEST(RuntimeKernelsTest, Reduce) {
  uint32_t seed = 210;
  for (const ReduceCase &rc : reduceCases()) {
    int64_t total = 1;
    for (int64_t s : rc.shape)
      total *= s;
    std::vector<float> in = randomFloats(total, seed++, -1.0f, 2.0f);
    for (ReduceKind kind :
         {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max}) {
      SCOPED_TRACE(std::string(rc.name) +
                   " kind=" + std::to_string(static_cast<int>(kind)));
      runReduceCase(rc, in, kind);
    }
  }
}

TEST(RuntimeKernelsTest, ReduceMaxPropagatesNaN) {
  uint32_t seed = 240;
  for (const ReduceCase &rc : reduceCases()) {
    int64_t total = 1;
    for (int64_t s : rc.shape)
      total *= s;
    std::vector<float> in = randomFloats(total, seed++, -1.0f, 2.0f);
    // NaNs at the first element, in the middle followed by larger values,
    // and at the last element.
    in[0] = kNaN;
    if (total > 2) {
      in[total / 2] = kNaN;
      in[total / 2 + 1] = 100.0f;
      in[total - 1] = kNaN;
    }
    SCOPED_TRACE(rc.name);
    runReduceCase(rc, in, ReduceKind::Max);
    // Sum also propagates NaN.
    runReduceCase(rc, in, ReduceKind::Sum);
  }
}

//===----------------------------------------------------------------------===//
// accumulateInto
//===----------------------------------------------------------------------===//

TEST(RuntimeKernelsTest, AccumulateInto) {
  for (int64_t n : {1, 17, 1000, 100000}) { // last: parallel
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> src = randomFloats(n, 260);
    std::vector<float> dst0 = randomFloats(n, 261);
    for (float scale : {1.0f, -0.5f, 3.0f})
      forThreadCounts([&](int) {
        std::vector<double> refAcc(n), refSet(n);
        for (int64_t i = 0; i < n; ++i) {
          refAcc[i] = static_cast<double>(dst0[i]) +
                      static_cast<double>(scale) * src[i];
          refSet[i] = static_cast<double>(scale) * src[i];
        }
        std::vector<float> dst = dst0;
        accumulateInto(dst.data(), src.data(), n, scale, true);
        expectClose(dst, refAcc, 1e-5, 1.0, "accumulateInto accumulate");
        // Without accumulate the old contents (even NaN) are dropped.
        std::vector<float> fresh(n, kNaN);
        accumulateInto(fresh.data(), src.data(), n, scale, false);
        expectClose(fresh, refSet, 1e-5, 1e-3, "accumulateInto overwrite");
      });
  }
}

//===----------------------------------------------------------------------===//
// expNonPositive (runtime/cpu/Math.h)
//===----------------------------------------------------------------------===//

TEST(RuntimeKernelsTest, ExpNonPositiveWithinUlps) {
  // Every 61st float of [-87, -0] against exp in double.
  double worst = 0;
  float worstAt = 0;
  for (uint32_t bits = 0x80000000u; bits <= 0xC2AE0000u; bits += 61) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    const double ref = std::exp(static_cast<double>(x));
    const float near = static_cast<float>(ref);
    const double ulp =
        std::nextafter(near, std::numeric_limits<float>::infinity()) - near;
    const double err = std::fabs(autopar::rt::expNonPositive(x) - ref) / ulp;
    if (err > worst) {
      worst = err;
      worstAt = x;
    }
  }
  EXPECT_LE(worst, 1.5) << "at x = " << worstAt;
  EXPECT_EQ(autopar::rt::expNonPositive(0.0f), 1.0f);
  EXPECT_EQ(
      autopar::rt::expNonPositive(-std::numeric_limits<float>::infinity()),
      0.0f);
  EXPECT_EQ(autopar::rt::expNonPositive(-100.0f), 0.0f);
  EXPECT_TRUE(std::isnan(autopar::rt::expNonPositive(kNaN)));
}

} // namespace
