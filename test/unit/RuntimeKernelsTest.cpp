//===- RuntimeKernelsTest.cpp - CPU kernels against naive references ------===//
//
// The compute kernels of runtime/cpu/Kernels.h against plain-loop
// references in double precision, on random inputs (fixed seeds) and on
// shapes that reach each fast path and the general path: the GEMM serial /
// batch-parallel / oneDNN-threaded / row-split / column-split paths, the
// threaded layer-norm backward, softmax and the cross-entropy losses.
// Thread-dependent kernels run under several OpenMP thread counts. Float
// results are compared with a relative tolerance against double references.
// RuntimeDataKernelsTest.cpp has the data-movement and reduction kernels.
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
// GEMM
//===----------------------------------------------------------------------===//

struct GemmCase {
  std::vector<int64_t> batchShape;
  std::vector<int64_t> aStrides, bStrides; // empty: dense batch
  bool transA, transB;
  int64_t m, n, k;
  float alpha;
  int64_t padA = 3, padB = 2; // extra leading-dimension elements
};

void runGemmCase(const GemmCase &gc, uint32_t seed) {
  GemmDesc d;
  d.batchRank = static_cast<int>(gc.batchShape.size());
  int64_t batch = 1;
  for (int i = 0; i < d.batchRank; ++i) {
    d.batchShape[i] = gc.batchShape[i];
    batch *= gc.batchShape[i];
  }
  d.transA = gc.transA;
  d.transB = gc.transB;
  d.m = gc.m;
  d.n = gc.n;
  d.k = gc.k;
  d.alpha = gc.alpha;
  // Stored A is [m, k] (or [k, m] transposed), B is [k, n] (or [n, k]).
  int64_t aRows = gc.transA ? gc.k : gc.m, aCols = gc.transA ? gc.m : gc.k;
  int64_t bRows = gc.transB ? gc.n : gc.k, bCols = gc.transB ? gc.k : gc.n;
  d.lda = aCols + gc.padA;
  d.ldb = bCols + gc.padB;
  int64_t aMat = aRows * d.lda, bMat = bRows * d.ldb;
  // Batch strides: dense unless given (in units of matrices).
  int64_t aSpan = 1, bSpan = 1;
  {
    int64_t sa = aMat, sb = bMat;
    for (int i = d.batchRank - 1; i >= 0; --i) {
      d.aBatchStrides[i] = gc.aStrides.empty() ? sa : gc.aStrides[i] * aMat;
      d.bBatchStrides[i] = gc.bStrides.empty() ? sb : gc.bStrides[i] * bMat;
      sa *= gc.batchShape[i];
      sb *= gc.batchShape[i];
    }
    for (int i = 0; i < d.batchRank; ++i) {
      aSpan += (gc.batchShape[i] - 1) * d.aBatchStrides[i] / aMat;
      bSpan += (gc.batchShape[i] - 1) * d.bBatchStrides[i] / bMat;
    }
  }
  std::vector<float> a = randomFloats(aSpan * aMat, seed);
  std::vector<float> b = randomFloats(bSpan * bMat, seed + 1);

  std::vector<double> ref(batch * gc.m * gc.n), absRef(ref.size());
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t aOff = 0, bOff = 0, rem = bi;
    for (int i = d.batchRank - 1; i >= 0; --i) {
      int64_t idx = rem % gc.batchShape[i];
      rem /= gc.batchShape[i];
      aOff += idx * d.aBatchStrides[i];
      bOff += idx * d.bBatchStrides[i];
    }
    for (int64_t i = 0; i < gc.m; ++i)
      for (int64_t j = 0; j < gc.n; ++j) {
        double s = 0, sa = 0;
        for (int64_t p = 0; p < gc.k; ++p) {
          double av = gc.transA ? a[aOff + p * d.lda + i]
                                : a[aOff + i * d.lda + p];
          double bv = gc.transB ? b[bOff + j * d.ldb + p]
                                : b[bOff + p * d.ldb + j];
          s += av * bv;
          sa += std::fabs(av * bv);
        }
        ref[(bi * gc.m + i) * gc.n + j] = gc.alpha * s;
        absRef[(bi * gc.m + i) * gc.n + j] = std::fabs(gc.alpha) * sa;
      }
  }
  std::vector<float> c(ref.size(), kNaN); // every element must be written
  gemm(d, a.data(), b.data(), c.data());
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    // Error bound relative to sum |a b| (cancellation-aware), at least
    // relative to |ref|.
    double tol = 1e-5 * std::max(absRef[i], 1e-6);
    if (!(std::fabs(c[i] - ref[i]) <= tol) && ++bad <= 5)
      ADD_FAILURE() << "gemm element " << i << " expected " << ref[i]
                    << " found " << c[i];
  }
  EXPECT_EQ(bad, 0) << bad << " of " << ref.size() << " gemm elements differ";
}

void runGemmAllTrans(GemmCase gc, uint32_t seed) {
  for (int t = 0; t < 4; ++t) {
    gc.transA = t & 1;
    gc.transB = t & 2;
    SCOPED_TRACE(std::string("transA=") + (gc.transA ? "1" : "0") +
                 " transB=" + (gc.transB ? "1" : "0"));
    runGemmCase(gc, seed + t);
  }
}

TEST(RuntimeKernelsTest, GemmTinyBelowThreshold) {
  forThreadCounts([](int) {
    runGemmAllTrans({{}, {}, {}, false, false, 3, 4, 5, 1.0f}, 10);
    runGemmAllTrans({{}, {}, {}, false, false, 17, 9, 13, -0.75f}, 11);
    // Batched but small overall.
    runGemmAllTrans({{2, 3}, {}, {}, false, false, 5, 6, 7, 2.5f}, 12);
  });
}

TEST(RuntimeKernelsTest, GemmBatchParallel) {
  forThreadCounts([](int) {
    // batch 6 >= threads, 2*6*20*30*40 = 288000 flops.
    runGemmAllTrans({{2, 3}, {}, {}, false, false, 20, 30, 40, 1.0f}, 20);
    runGemmAllTrans({{6}, {}, {}, false, false, 31, 17, 45, -1.5f}, 21);
    // Broadcast batch dims: A broadcast over dim 1, B over dim 0.
    runGemmAllTrans({{2, 3}, {1, 0}, {0, 1}, false, false, 20, 30, 40, 0.5f},
                    22);
    // B shared by the whole batch (a weight).
    runGemmAllTrans({{5}, {1}, {0}, false, false, 33, 19, 50, 1.0f}, 23);
  });
}

TEST(RuntimeKernelsTest, GemmBatchFoldedIntoRows) {
  forThreadCounts([](int) {
    // B broadcast over both batch dims and A's matrices back to back: one
    // product of 2 * 3 * 40 rows (with transA, a batch of products).
    runGemmAllTrans({{2, 3}, {}, {0, 0}, false, false, 40, 30, 50, 1.5f}, 50);
    // A batch dim of extent 1 between them.
    runGemmAllTrans({{2, 1, 3}, {}, {0, 0, 0}, false, false, 17, 45, 33, 1.0f},
                    51);
    // A's matrices with a gap between them (every other one): not foldable.
    runGemmAllTrans({{2, 3}, {6, 2}, {0, 0}, false, false, 40, 30, 50, -1.0f},
                    52);
  });
}

TEST(RuntimeKernelsTest, GemmRowSplit) {
  forThreadCounts([](int) {
    // Batch 1, m >= n, not multiples of 16.
    runGemmAllTrans({{}, {}, {}, false, false, 70, 33, 50, 1.0f}, 30);
    runGemmAllTrans({{}, {}, {}, false, false, 45, 45, 60, 0.3f}, 31);
    // m smaller than 16 * threads: some threads get no rows.
    runGemmAllTrans({{}, {}, {}, false, false, 40, 20, 150, -2.0f}, 32);
    // Batch 2 < threads 3, 4: each product split; A broadcast.
    runGemmAllTrans({{2}, {0}, {1}, false, false, 50, 40, 55, 1.25f}, 33);
  });
}

TEST(RuntimeKernelsTest, GemmShortInnerThreadedByOneDnn) {
  forThreadCounts([](int) {
    // Batch 1, k <= m, n: one product oneDNN cuts over the threads.
    runGemmAllTrans({{}, {}, {}, false, false, 120, 90, 40, 1.0f}, 60);
    runGemmAllTrans({{}, {}, {}, false, false, 64, 64, 64, -0.5f}, 61);
    // Folded into rows: 2 * 3 * 40 rows, k 20.
    runGemmAllTrans({{2, 3}, {}, {0, 0}, false, false, 40, 30, 20, 1.5f}, 62);
  });
}

TEST(RuntimeKernelsTest, GemmColumnSplit) {
  forThreadCounts([](int) {
    // Batch 1, m < n.
    runGemmAllTrans({{}, {}, {}, false, false, 21, 90, 60, 1.0f}, 40);
    runGemmAllTrans({{}, {}, {}, false, false, 5, 300, 80, -0.5f}, 41);
    runGemmAllTrans({{}, {}, {}, false, false, 1, 1000, 120, 2.0f}, 42);
    // Batch 2 with broadcast B.
    runGemmAllTrans({{1, 2}, {0, 1}, {0, 0}, false, false, 30, 77, 50, 0.7f},
                    43);
  });
}

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

std::vector<double> naiveLayerNorm(const std::vector<double> &x,
                                   const std::vector<double> &scale,
                                   const std::vector<double> *bias,
                                   int64_t rows, int64_t cols, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += x[r * cols + j];
    mean /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = (x[r * cols + j] - mean) * rstd * scale[j] +
                        (bias ? (*bias)[j] : 0.0);
  }
  return y;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

TEST(RuntimeKernelsTest, LayerNormForward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {3, 7},
                            {16, 100},
                            {300, 70}}) { // last: parallel path
    SCOPED_TRACE("rows=" + std::to_string(rows) +
                 " cols=" + std::to_string(cols));
    // A mean offset makes the centering matter.
    std::vector<float> x = randomFloats(rows * cols, 50, 2.0f, 4.0f);
    std::vector<float> scale = randomFloats(cols, 51, 0.5f, 1.5f);
    std::vector<float> bias = randomFloats(cols, 52);
    std::vector<double> xd = toDouble(x), sd = toDouble(scale),
                        bd = toDouble(bias);
    double eps = 1e-5;
    std::vector<float> y(rows * cols, kNaN);
    forThreadCounts([&](int) {
      layerNormForward(x.data(), scale.data(), bias.data(), y.data(), rows,
                       cols, eps);
      expectClose(y, naiveLayerNorm(xd, sd, &bd, rows, cols, eps), 1e-5, 1.0,
                  "layerNorm y with bias");
      std::fill(y.begin(), y.end(), kNaN);
      layerNormForward(x.data(), scale.data(), nullptr, y.data(), rows, cols,
                       eps);
      expectClose(y, naiveLayerNorm(xd, sd, nullptr, rows, cols, eps), 1e-5,
                  1.0, "layerNorm y without bias");
    });
  }
}

struct LayerNormGrads {
  std::vector<float> dx, dscale, dbias;
};

LayerNormGrads runLayerNormBackward(const std::vector<float> &x,
                                    const std::vector<float> &scale,
                                    const std::vector<float> &dy, int64_t rows,
                                    int64_t cols, double eps) {
  LayerNormGrads g{std::vector<float>(rows * cols, kNaN),
                   std::vector<float>(cols, kNaN),
                   std::vector<float>(cols, kNaN)};
  layerNormBackward(x.data(), scale.data(), dy.data(), g.dx.data(),
                    g.dscale.data(), g.dbias.data(), rows, cols, eps);
  return g;
}

TEST(RuntimeKernelsTest, LayerNormBackwardFormula) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {4, 7},
                            {33, 65},
                            {300, 70}, // threaded partial sums
                            {2000, 9}}) {
    SCOPED_TRACE("rows=" + std::to_string(rows) +
                 " cols=" + std::to_string(cols));
    std::vector<float> x = randomFloats(rows * cols, 60, -3.0f, 1.0f);
    std::vector<float> scale = randomFloats(cols, 61, -1.5f, 1.5f);
    std::vector<float> dy = randomFloats(rows * cols, 62);
    double eps = 1e-5;
    // Reference by the textbook formula, in double.
    std::vector<double> dx(rows * cols), dscale(cols, 0.0), dbias(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j)
        mean += x[r * cols + j];
      mean /= cols;
      for (int64_t j = 0; j < cols; ++j)
        var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
      var /= cols;
      double rstd = 1.0 / std::sqrt(var + eps);
      std::vector<double> xhat(cols), g(cols);
      double meanG = 0, meanGX = 0;
      for (int64_t j = 0; j < cols; ++j) {
        xhat[j] = (x[r * cols + j] - mean) * rstd;
        g[j] = static_cast<double>(dy[r * cols + j]) * scale[j];
        meanG += g[j] / cols;
        meanGX += g[j] * xhat[j] / cols;
        dscale[j] += dy[r * cols + j] * xhat[j];
        dbias[j] += dy[r * cols + j];
      }
      for (int64_t j = 0; j < cols; ++j)
        dx[r * cols + j] = rstd * (g[j] - meanG - xhat[j] * meanGX);
    }
    forThreadCounts([&](int) {
      LayerNormGrads got = runLayerNormBackward(x, scale, dy, rows, cols, eps);
      expectClose(got.dx, dx, 1e-5, 1.0, "layerNorm dx");
      expectClose(got.dscale, dscale, 1e-5, 1.0, "layerNorm dscale");
      expectClose(got.dbias, dbias, 1e-5, 1.0, "layerNorm dbias");
    });
  }
}

TEST(RuntimeKernelsTest, LayerNormBackwardFiniteDifferences) {
  const int64_t rows = 4, cols = 7;
  const double eps = 1e-3;
  std::vector<float> x = randomFloats(rows * cols, 70, -2.0f, 2.0f);
  std::vector<float> scale = randomFloats(cols, 71, -1.5f, 1.5f);
  std::vector<float> bias = randomFloats(cols, 72);
  std::vector<float> dy = randomFloats(rows * cols, 73);
  std::vector<double> xd = toDouble(x), sd = toDouble(scale),
                      bd = toDouble(bias), dyd = toDouble(dy);
  // L = sum(y * dy), so dL/dinput is the backward of dy.
  auto loss = [&](const std::vector<double> &xv, const std::vector<double> &sv,
                  const std::vector<double> &bv) {
    std::vector<double> y = naiveLayerNorm(xv, sv, &bv, rows, cols, eps);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * dyd[i];
    return l;
  };
  const double h = 1e-6;
  auto fd = [&](std::vector<double> &v, size_t i) {
    double saved = v[i];
    v[i] = saved + h;
    double lp = loss(xd, sd, bd);
    v[i] = saved - h;
    double lm = loss(xd, sd, bd);
    v[i] = saved;
    return (lp - lm) / (2 * h);
  };
  std::vector<double> fdx(rows * cols), fds(cols), fdb(cols);
  for (size_t i = 0; i < fdx.size(); ++i)
    fdx[i] = fd(xd, i);
  for (int64_t j = 0; j < cols; ++j) {
    fds[j] = fd(sd, j);
    fdb[j] = fd(bd, j);
  }
  LayerNormGrads got = runLayerNormBackward(x, scale, dy, rows, cols, eps);
  expectClose(got.dx, fdx, 1e-5, 1.0, "layerNorm dx vs finite differences");
  expectClose(got.dscale, fds, 1e-5, 1.0,
              "layerNorm dscale vs finite differences");
  expectClose(got.dbias, fdb, 1e-5, 1.0,
              "layerNorm dbias vs finite differences");
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

std::vector<double> naiveSoftmax(const std::vector<double> &x, int64_t outer,
                                 int64_t n, int64_t inner) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j)
        s += std::exp(x[(o * n + j) * inner + i] - mx);
      for (int64_t j = 0; j < n; ++j)
        y[(o * n + j) * inner + i] =
            std::exp(x[(o * n + j) * inner + i] - mx) / s;
    }
  return y;
}

const int64_t kSoftmaxShapes[][3] = {
    {1, 1, 1}, {3, 10, 1}, {2, 5, 4}, {4, 33, 7}, {1, 3, 20},
    {8, 64, 40}, // parallel path, inner > 1
    {200, 100, 1}};

TEST(RuntimeKernelsTest, SoftmaxForward) {
  for (auto &s : kSoftmaxShapes) {
    int64_t outer = s[0], n = s[1], inner = s[2];
    SCOPED_TRACE("outer=" + std::to_string(outer) + " n=" + std::to_string(n) +
                 " inner=" + std::to_string(inner));
    std::vector<float> x = randomFloats(outer * n * inner, 80, -8.0f, 8.0f);
    // The last entry of each softmax row is far above the others: exp()
    // overflows in float unless the true maximum along the (strided) axis
    // is subtracted.
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        x[(o * n + n - 1) * inner + i] += 90.0f;
    std::vector<double> ref = naiveSoftmax(toDouble(x), outer, n, inner);
    forThreadCounts([&](int) {
      std::vector<float> y(x.size(), kNaN);
      softmaxForward(x.data(), y.data(), outer, n, inner);
      expectClose(y, ref, 1e-5, 1e-6, "softmax y");
    });
  }
}

TEST(RuntimeKernelsTest, SoftmaxBackward) {
  for (auto &s : kSoftmaxShapes) {
    int64_t outer = s[0], n = s[1], inner = s[2];
    SCOPED_TRACE("outer=" + std::to_string(outer) + " n=" + std::to_string(n) +
                 " inner=" + std::to_string(inner));
    std::vector<float> x = randomFloats(outer * n * inner, 81, -3.0f, 3.0f);
    std::vector<double> yd = naiveSoftmax(toDouble(x), outer, n, inner);
    std::vector<float> y(yd.begin(), yd.end());
    std::vector<float> dy = randomFloats(y.size(), 82);
    std::vector<double> ref(y.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          int64_t e = (o * n + j) * inner + i;
          dot += static_cast<double>(y[e]) * dy[e];
        }
        for (int64_t j = 0; j < n; ++j) {
          int64_t e = (o * n + j) * inner + i;
          ref[e] = y[e] * (dy[e] - dot);
        }
      }
    forThreadCounts([&](int) {
      std::vector<float> dx(y.size(), kNaN);
      softmaxBackward(y.data(), dy.data(), dx.data(), outer, n, inner);
      expectClose(dx, ref, 1e-5, 0.1, "softmax dx");
    });
  }
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// Per-element losses in double (ignored: 0) and the count of valid ones.
std::vector<double> naiveCrossEntropy(const std::vector<double> &scores,
                                      const std::vector<int64_t> &labels,
                                      int64_t outer, int64_t classes,
                                      int64_t inner, bool hasIgnore,
                                      int64_t ignore, int64_t *valid) {
  std::vector<double> l(outer * inner, 0.0);
  *valid = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t e = o * inner + i;
      if (hasIgnore && labels[e] == ignore)
        continue;
      ++*valid;
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < classes; ++c)
        mx = std::max(mx, scores[(o * classes + c) * inner + i]);
      for (int64_t c = 0; c < classes; ++c)
        s += std::exp(scores[(o * classes + c) * inner + i] - mx);
      l[e] = std::log(s) + mx - scores[(o * classes + labels[e]) * inner + i];
    }
  return l;
}

std::vector<double> reduceLoss(const std::vector<double> &per, Reduction red,
                               int64_t valid) {
  if (red == Reduction::None)
    return per;
  double s = 0;
  for (double v : per)
    s += v;
  if (red == Reduction::Mean)
    s /= static_cast<double>(valid);
  return {s};
}

struct CeCase {
  int64_t outer, classes, inner;
  bool hasIgnore;
  int64_t ignore;
};

void runCrossEntropy(const CeCase &cc, Reduction red, bool labels64,
                     uint32_t seed) {
  int64_t count = cc.outer * cc.inner;
  std::vector<float> scores =
      randomFloats(cc.outer * cc.classes * cc.inner, seed, -4.0f, 4.0f);
  std::mt19937 gen(seed + 7);
  std::vector<int64_t> labels(count);
  for (int64_t e = 0; e < count; ++e)
    labels[e] = static_cast<int64_t>(gen() % cc.classes);
  if (cc.hasIgnore) // at least one ignored label, at the start and middle
    for (int64_t e = 0; e < count; e += 3)
      labels[e] = cc.ignore;
  std::vector<int32_t> labels32(labels.begin(), labels.end());
  const void *lab = labels64 ? static_cast<const void *>(labels.data())
                             : static_cast<const void *>(labels32.data());
  int64_t valid = 0;
  std::vector<double> sd = toDouble(scores);
  std::vector<double> per = naiveCrossEntropy(
      sd, labels, cc.outer, cc.classes, cc.inner, cc.hasIgnore, cc.ignore,
      &valid);
  std::vector<double> ref = reduceLoss(per, red, valid);
  std::vector<float> loss(ref.size(), kNaN);
  softmaxCrossEntropyForward(scores.data(), lab, labels64, loss.data(),
                             cc.outer, cc.classes, cc.inner, red, cc.hasIgnore,
                             cc.ignore);
  expectClose(loss, ref, 1e-5, 1e-3, "cross-entropy loss");

  // Backward against the formula (softmax - onehot) * g.
  std::vector<float> dloss =
      randomFloats(red == Reduction::None ? count : 1, seed + 3, 0.5f, 2.0f);
  std::vector<double> dref(scores.size(), 0.0);
  for (int64_t o = 0; o < cc.outer; ++o)
    for (int64_t i = 0; i < cc.inner; ++i) {
      int64_t e = o * cc.inner + i;
      if (cc.hasIgnore && labels[e] == cc.ignore)
        continue;
      double g = red == Reduction::None ? dloss[e] : dloss[0];
      if (red == Reduction::Mean)
        g /= valid;
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < cc.classes; ++c)
        mx = std::max(mx, sd[(o * cc.classes + c) * cc.inner + i]);
      for (int64_t c = 0; c < cc.classes; ++c)
        s += std::exp(sd[(o * cc.classes + c) * cc.inner + i] - mx);
      for (int64_t c = 0; c < cc.classes; ++c) {
        int64_t k = (o * cc.classes + c) * cc.inner + i;
        dref[k] = (std::exp(sd[k] - mx) / s - (c == labels[e] ? 1.0 : 0.0)) * g;
      }
    }
  std::vector<float> ds(scores.size(), kNaN);
  softmaxCrossEntropyBackward(scores.data(), lab, labels64, dloss.data(),
                              ds.data(), cc.outer, cc.classes, cc.inner, red,
                              cc.hasIgnore, cc.ignore);
  expectClose(ds, dref, 1e-5, 1e-3, "cross-entropy dscores");

  // Backward against central differences of the double forward, on small
  // cases.
  if (scores.size() <= 400) {
    std::vector<double> fd(scores.size());
    const double h = 1e-6;
    auto total = [&]() {
      int64_t v = 0;
      std::vector<double> per =
          naiveCrossEntropy(sd, labels, cc.outer, cc.classes, cc.inner,
                            cc.hasIgnore, cc.ignore, &v);
      std::vector<double> r = reduceLoss(per, red, v);
      double t = 0;
      for (size_t i = 0; i < r.size(); ++i)
        t += r[i] * dloss[i];
      return t;
    };
    for (size_t k = 0; k < sd.size(); ++k) {
      double saved = sd[k];
      sd[k] = saved + h;
      double lp = total();
      sd[k] = saved - h;
      double lm = total();
      sd[k] = saved;
      fd[k] = (lp - lm) / (2 * h);
    }
    expectClose(ds, fd, 1e-5, 0.1, "cross-entropy dscores vs FD");
  }
}

TEST(RuntimeKernelsTest, SoftmaxCrossEntropy) {
  const CeCase cases[] = {
      {1, 1, 1, false, 0},     {6, 5, 1, false, 0},  {6, 5, 1, true, -100},
      {3, 4, 5, false, 0},     {3, 4, 5, true, 2},   {2, 7, 3, true, -1},
      {64, 300, 1, true, -100}, // parallel path
      {16, 50, 30, true, 0}};   // parallel path, inner > 1
  const Reduction reds[] = {Reduction::None, Reduction::Sum, Reduction::Mean};
  uint32_t seed = 90;
  for (const CeCase &cc : cases)
    for (Reduction red : reds)
      for (bool l64 : {false, true}) {
        SCOPED_TRACE("outer=" + std::to_string(cc.outer) +
                     " classes=" + std::to_string(cc.classes) +
                     " inner=" + std::to_string(cc.inner) +
                     " ignore=" + (cc.hasIgnore ? std::to_string(cc.ignore)
                                                : std::string("none")) +
                     " reduction=" + std::to_string(static_cast<int>(red)) +
                     " labels64=" + (l64 ? "1" : "0"));
        forThreadCounts([&](int) { runCrossEntropy(cc, red, l64, seed); });
        seed += 10;
      }
}

TEST(RuntimeKernelsTest, SoftmaxCrossEntropyAllIgnored) {
  const int64_t outer = 3, classes = 4, inner = 2;
  std::vector<float> scores = randomFloats(outer * classes * inner, 100);
  for (bool l64 : {false, true}) {
    std::vector<int64_t> l64v(outer * inner, -100);
    std::vector<int32_t> l32v(outer * inner, -100);
    const void *lab = l64 ? static_cast<const void *>(l64v.data())
                          : static_cast<const void *>(l32v.data());
    float loss = 0.0f;
    softmaxCrossEntropyForward(scores.data(), lab, l64, &loss, outer, classes,
                               inner, Reduction::Mean, true, -100);
    EXPECT_TRUE(std::isnan(loss)) << "all-ignored mean loss: " << loss;
    float sum = kNaN;
    softmaxCrossEntropyForward(scores.data(), lab, l64, &sum, outer, classes,
                               inner, Reduction::Sum, true, -100);
    EXPECT_EQ(sum, 0.0f);
    std::vector<float> none(outer * inner, kNaN);
    softmaxCrossEntropyForward(scores.data(), lab, l64, none.data(), outer,
                               classes, inner, Reduction::None, true, -100);
    for (float v : none)
      EXPECT_EQ(v, 0.0f);
    float dloss = 1.0f;
    std::vector<float> ds(scores.size(), kNaN);
    softmaxCrossEntropyBackward(scores.data(), lab, l64, &dloss, ds.data(),
                                outer, classes, inner, Reduction::Mean, true,
                                -100);
    for (float v : ds)
      EXPECT_EQ(v, 0.0f) << "all-ignored mean dscores";
  }
}

/// A padded vocabulary (validClasses < classes): the loss and the real
/// classes' dscores are those of the unpadded scores, whatever the padded
/// classes hold; their dscores are 0; a label among them is out of range
/// (NaN).
TEST(RuntimeKernelsTest, SoftmaxCrossEntropyPaddedClasses) {
  for (auto [outer, valid, classes, inner] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{6, 5, 8, 1},
        {4, 7, 64, 1},
        {3, 5, 6, 3},
        {2, 1, 4, 2}}) {
    SCOPED_TRACE("outer=" + std::to_string(outer) + " valid=" +
                 std::to_string(valid) + " classes=" + std::to_string(classes) +
                 " inner=" + std::to_string(inner));
    const int64_t count = outer * inner;
    std::vector<float> real = randomFloats(outer * valid * inner, 7);
    // The padded scores: the real ones, then large values that would
    // dominate a softmax over every class.
    std::vector<float> padded(outer * classes * inner, 40.0f);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < valid; ++c)
        for (int64_t i = 0; i < inner; ++i)
          padded[(o * classes + c) * inner + i] =
              real[(o * valid + c) * inner + i];
    std::vector<int64_t> labels(count);
    for (int64_t e = 0; e < count; ++e)
      labels[e] = (e * 3) % valid;
    for (Reduction red : {Reduction::Mean, Reduction::None}) {
      const size_t n = red == Reduction::None ? size_t(count) : 1;
      std::vector<float> want(n), got(n, kNaN);
      softmaxCrossEntropyForward(real.data(), labels.data(), true, want.data(),
                                 outer, valid, inner, red, false, 0);
      softmaxCrossEntropyForward(padded.data(), labels.data(), true, got.data(),
                                 outer, classes, inner, red, false, 0, valid);
      for (size_t k = 0; k < n; ++k)
        EXPECT_FLOAT_EQ(got[k], want[k]) << "loss " << k;
      std::vector<float> dloss(n, 1.5f);
      std::vector<float> dWant(real.size()), dGot(padded.size(), kNaN);
      softmaxCrossEntropyBackward(real.data(), labels.data(), true,
                                  dloss.data(), dWant.data(), outer, valid,
                                  inner, red, false, 0);
      softmaxCrossEntropyBackward(padded.data(), labels.data(), true,
                                  dloss.data(), dGot.data(), outer, classes,
                                  inner, red, false, 0, valid);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < classes; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            float g = dGot[(o * classes + c) * inner + i];
            if (c < valid)
              EXPECT_FLOAT_EQ(g, dWant[(o * valid + c) * inner + i])
                  << "dscores " << o << "," << c << "," << i;
            else
              EXPECT_EQ(g, 0.0f) << "padded dscores " << o << "," << c;
          }
    }
    // A label among the padded classes: out of range.
    std::vector<int64_t> bad = labels;
    bad[0] = valid;
    float loss = 0;
    softmaxCrossEntropyForward(padded.data(), bad.data(), true, &loss, outer,
                               classes, inner, Reduction::Mean, false, 0,
                               valid);
    EXPECT_TRUE(std::isnan(loss)) << "label " << valid << " of " << valid;
  }
}

/// Vocab-parallel cross-entropy: the classes split into `blocks` blocks;
/// the max over the blocks, then each block's statistics summed, give the
/// loss of the whole, and each block's dscores are the whole's columns.
TEST(RuntimeKernelsTest, CrossEntropyShards) {
  for (auto [outer, classes, inner, blocks] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{6, 12, 1, 3},
        {4, 10, 3, 2},
        {5, 8, 1, 4}}) {
    const int64_t count = outer * inner, block = classes / blocks;
    std::vector<float> scores =
        randomFloats(outer * classes * inner, 7 + classes, -4.0f, 4.0f);
    std::vector<int64_t> labels(count);
    for (int64_t e = 0; e < count; ++e)
      labels[e] = e % 4 == 1 ? -100 : (e * 7 + 3) % classes;
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    for (bool l64 : {false, true}) {
      const void *lab = l64 ? static_cast<const void *>(labels.data())
                            : static_cast<const void *>(labels32.data());
      // Block b: scores[o, b * block + c, i].
      auto blockOf = [&](const std::vector<float> &all, int64_t b) {
        std::vector<float> out(outer * block * inner);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t c = 0; c < block; ++c)
            for (int64_t i = 0; i < inner; ++i)
              out[(o * block + c) * inner + i] =
                  all[(o * classes + b * block + c) * inner + i];
        return out;
      };
      std::vector<float> max(count, -INFINITY);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < classes; ++c)
          for (int64_t i = 0; i < inner; ++i)
            max[o * inner + i] = std::max(
                max[o * inner + i], scores[(o * classes + c) * inner + i]);
      std::vector<float> sumExp(count, 0.0f), target(count, 0.0f);
      for (int64_t b = 0; b < blocks; ++b) {
        std::vector<float> s = blockOf(scores, b), se(count, kNaN),
                           t(count, kNaN);
        int64_t offset = b * block;
        crossEntropyShardStats(s.data(), lab, l64, max.data(), &offset,
                               se.data(), t.data(), outer, block, inner);
        for (int64_t e = 0; e < count; ++e) {
          sumExp[e] += se[e];
          target[e] += t[e];
        }
      }
      std::vector<float> whole(count, kNaN);
      softmaxCrossEntropyForward(scores.data(), lab, l64, whole.data(), outer,
                                 classes, inner, Reduction::None, true, -100);
      std::vector<double> lse(count);
      for (int64_t e = 0; e < count; ++e) {
        lse[e] = std::log(static_cast<double>(sumExp[e])) + max[e];
        if (labels[e] != -100) {
          EXPECT_NEAR(lse[e] - target[e], whole[e], 1e-5 * (1 + whole[e]))
              << "element " << e;
        }
      }
      // The gradient, each reduction.
      for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
        std::vector<float> dloss =
            randomFloats(red == Reduction::None ? count : 1, 3, 0.5f, 2.0f);
        std::vector<float> ds(scores.size(), kNaN);
        softmaxCrossEntropyBackward(scores.data(), lab, l64, dloss.data(),
                                    ds.data(), outer, classes, inner, red, true,
                                    -100);
        std::vector<float> lsef(lse.begin(), lse.end());
        for (int64_t b = 0; b < blocks; ++b) {
          std::vector<float> s = blockOf(scores, b), want = blockOf(ds, b);
          std::vector<float> got(s.size(), kNaN);
          int64_t offset = b * block;
          crossEntropyShardBackward(s.data(), lab, l64, dloss.data(),
                                    lsef.data(), &offset, got.data(), outer,
                                    block, inner, red, true, -100);
          for (size_t k = 0; k < got.size(); ++k)
            EXPECT_NEAR(got[k], want[k], 1e-6 + 1e-5 * std::fabs(want[k]))
                << "block " << b << " element " << k;
        }
      }
    }
  }
}

} // namespace
