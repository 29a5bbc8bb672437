//===- RuntimeAttentionTest.cpp - fused attention against naive references ===//
//
// runtime/cpu/Attention.h against the unfused composition computed in
// double here (scores, mask, softmax, weighted sum; the backward by the
// explicit formulas): shapes with T != S under a causal mask, odd T, D from
// 1 to 64, more heads than threads and fewer (both backward decompositions),
// q/k/v/out/dout/dq/dk/dv addressed in [B, T, H, D] memory through strides,
// broadcast bool masks, fully masked rows (NaN out, -inf lse, nothing in the
// backward). Also: the backward against finite differences of the forward,
// inputs with overlapping rows, and results bit-identical under 1 and 2
// OpenMP threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Kernels.h"
#include "test/unit/AttentionProblem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace autopar::rt;

namespace {

using test::AttentionCase;
using test::MaskKind;
using Shape = AttentionCase;
using Problem = test::AttentionProblem;

/// Element (b, h, i, c) of a tensor in memory with the given strides.
template <typename T>
T &at(std::vector<T> &x, const int64_t *st, int64_t b, int64_t h, int64_t i,
      int64_t c) {
  return x[b * st[0] + h * st[1] + i * st[2] + c];
}
template <typename T>
const T &at(const std::vector<T> &x, const int64_t *st, int64_t b, int64_t h,
            int64_t i, int64_t c) {
  return x[b * st[0] + h * st[1] + i * st[2] + c];
}

/// Whether query i of head (b, h) may see key j.
bool attends(const AttentionDesc &d, int64_t b, int64_t h, int64_t i,
             int64_t j) {
  if (d.causal && j > i + d.s - d.t)
    return false;
  const int64_t *ms = d.maskStrides;
  return !d.mask || d.mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
}

/// The unfused composition in double, every tensor dense [B, H, rows, D]
/// (lse [B, H, T]).
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;

  explicit Reference(const Problem &p) {
    const AttentionDesc &d = p.desc;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    out.assign(d.batch * d.heads * d.t * d.d, 0);
    lse.assign(d.batch * d.heads * d.t, 0);
    dq.assign(out.size(), 0);
    dk.assign(d.batch * d.heads * d.s * d.d, 0);
    dv.assign(dk.size(), 0);
    std::vector<double> s(d.s), prob(d.s), dp(d.s);
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.heads; ++h)
        for (int64_t i = 0; i < d.t; ++i) {
          const int64_t row = (b * d.heads + h) * d.t + i;
          double max = -INFINITY;
          for (int64_t j = 0; j < d.s; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < d.d; ++c)
              dot += static_cast<double>(at(p.q, d.qStrides, b, h, i, c)) *
                     at(p.k, d.kStrides, b, h, j, c);
            s[j] = attends(d, b, h, i, j) ? d.scale * dot : -INFINITY;
            max = std::max(max, s[j]);
          }
          if (max == -INFINITY) {
            // Fully masked: NaN out, and nothing in the backward.
            lse[row] = -INFINITY;
            for (int64_t c = 0; c < d.d; ++c)
              out[row * d.d + c] = nan;
            continue;
          }
          double sum = 0;
          for (int64_t j = 0; j < d.s; ++j)
            sum += std::exp(s[j] - max);
          lse[row] = max + std::log(sum);
          for (int64_t j = 0; j < d.s; ++j)
            prob[j] = std::exp(s[j] - max) / sum;
          for (int64_t c = 0; c < d.d; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < d.s; ++j)
              acc += prob[j] * at(p.v, d.vStrides, b, h, j, c);
            out[row * d.d + c] = acc;
          }
          // Backward: Di = dout . out, dP = dout v^T, dS = p (dP - Di).
          double di = 0;
          for (int64_t c = 0; c < d.d; ++c)
            di += at(p.dout, d.doutStrides, b, h, i, c) * out[row * d.d + c];
          for (int64_t j = 0; j < d.s; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < d.d; ++c)
              acc +=
                  static_cast<double>(at(p.dout, d.doutStrides, b, h, i, c)) *
                  at(p.v, d.vStrides, b, h, j, c);
            dp[j] = prob[j] * (acc - di);
          }
          for (int64_t j = 0; j < d.s; ++j) {
            const int64_t key = ((b * d.heads + h) * d.s + j) * d.d;
            for (int64_t c = 0; c < d.d; ++c) {
              dq[row * d.d + c] +=
                  d.scale * dp[j] * at(p.k, d.kStrides, b, h, j, c);
              dk[key + c] += d.scale * dp[j] * at(p.q, d.qStrides, b, h, i, c);
              dv[key + c] += prob[j] * at(p.dout, d.doutStrides, b, h, i, c);
            }
          }
        }
  }
};

/// A tensor in memory with the given strides, as dense [B, H, rows, D].
std::vector<float> dense(const std::vector<float> &x, const int64_t *st,
                         const AttentionDesc &d, int64_t rows) {
  std::vector<float> r;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < d.d; ++c)
          r.push_back(at(x, st, b, h, i, c));
  return r;
}

/// Checks |got - ref| <= rtol * (|ref| + max |ref|) elementwise (NaN must
/// match NaN, infinities must be equal).
void expectClose(const std::vector<float> &got, const std::vector<double> &ref,
                 double rtol, const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double scale = 0;
  for (double r : ref)
    if (std::isfinite(r))
      scale = std::max(scale, std::fabs(r));
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    bool ok;
    if (std::isnan(r) || std::isinf(r))
      ok = std::isnan(r) ? std::isnan(g) : g == r;
    else
      ok =
          std::isfinite(g) && std::fabs(g - r) <= rtol * (std::fabs(r) + scale);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " expected " << r
                    << " found " << g;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size()
                    << " elements differ";
}

/// Relative tolerance against the double reference.
constexpr double kTol = 5e-6;

void checkAgainstReference(const Shape &shape) {
  SCOPED_TRACE(shape.name);
  Problem p(shape);
  p.forward();
  p.backward();
  Reference ref(p);
  const AttentionDesc &d = p.desc;
  expectClose(dense(p.out, d.outStrides, d, d.t), ref.out, kTol, "out");
  expectClose(p.lse, ref.lse, kTol, "lse");
  expectClose(dense(p.dq, d.dqStrides, d, d.t), ref.dq, kTol, "dq");
  expectClose(dense(p.dk, d.dkStrides, d, d.s), ref.dk, kTol, "dk");
  expectClose(dense(p.dv, d.dvStrides, d, d.s), ref.dv, kTol, "dv");
}

// Fewer than 8 heads take the backward's two-pass (key blocks, row blocks)
// decomposition; 8 or more a head per task. Blocks are 64 rows and keys.
const Shape kShapes[] = {
    {"odd T, D=8, causal", 2, 3, 13, 13, 8, true},
    {"T<S causal, D=32", 1, 2, 5, 9, 32, true},
    {"T>S causal: fully masked rows", 1, 2, 9, 5, 16, true},
    {"D=64 causal, partial blocks, head tasks", 2, 4, 130, 130, 64, true},
    {"D=64, T != S, block tasks", 1, 3, 100, 70, 64, false},
    {"T<S causal, many heads", 3, 3, 67, 150, 32, true},
    {"T>S causal, block tasks", 1, 2, 150, 67, 32, true},
    {"single row and key, D=1", 1, 1, 1, 1, 1, false},
    {"key padding mask", 2, 2, 20, 33, 8, false, MaskKind::KeyPadding},
    {"key padding mask, causal, head tasks", 4, 3, 70, 70, 16, true,
     MaskKind::KeyPadding},
    {"fully masked row", 1, 2, 11, 17, 8, false, MaskKind::Rows},
    {"fully masked row, causal, head tasks", 2, 4, 80, 90, 32, true,
     MaskKind::Rows},
    {"strided [B,T,H,D]", 2, 3, 19, 23, 32, false, MaskKind::None, true},
    {"strided causal, head tasks", 2, 5, 70, 70, 64, true, MaskKind::None,
     true},
    {"strided, mask, block tasks", 1, 3, 66, 129, 16, true,
     MaskKind::KeyPadding, true},
};

TEST(RuntimeAttentionTest, MatchesReference) {
  for (const Shape &shape : kShapes)
    checkAgainstReference(shape);
}

TEST(RuntimeAttentionTest, OverlappingInputRows) {
  // k and v rows 1 and 2 elements apart (sliding windows over their
  // buffers), which BLAS cannot read: read through dense copies.
  Problem p({"overlapping rows", 2, 2, 5, 6, 4, true});
  AttentionDesc &d = p.desc;
  const int64_t kStrides[3] = {2 * 16, 16, 1}, vStrides[3] = {2 * 16, 16, 2};
  std::copy(kStrides, kStrides + 3, d.kStrides);
  std::copy(vStrides, vStrides + 3, d.vStrides);
  p.forward();
  p.backward();
  Reference ref(p);
  expectClose(dense(p.out, d.outStrides, d, d.t), ref.out, kTol, "out");
  expectClose(p.lse, ref.lse, kTol, "lse");
  expectClose(dense(p.dq, d.dqStrides, d, d.t), ref.dq, kTol, "dq");
  expectClose(dense(p.dk, d.dkStrides, d, d.s), ref.dk, kTol, "dk");
  expectClose(dense(p.dv, d.dvStrides, d, d.s), ref.dv, kTol, "dv");
}

TEST(RuntimeAttentionTest, FullyMaskedRow) {
  Shape shape{"fully masked row", 1, 2, 11, 17, 8, false, MaskKind::Rows};
  Problem p(shape);
  p.forward();
  p.backward();
  const AttentionDesc &d = p.desc;
  const int64_t row = d.t / 2;
  for (int64_t h = 0; h < d.heads; ++h) {
    EXPECT_EQ(p.lse[h * d.t + row], -INFINITY);
    for (int64_t c = 0; c < d.d; ++c) {
      EXPECT_TRUE(std::isnan(at(p.out, d.outStrides, 0, h, row, c)));
      EXPECT_EQ(at(p.dq, d.dqStrides, 0, h, row, c), 0.0f);
      EXPECT_TRUE(std::isfinite(at(p.dk, d.dkStrides, 0, h, 0, c)));
      EXPECT_TRUE(std::isfinite(at(p.dv, d.dvStrides, 0, h, 0, c)));
    }
  }
}

/// The backward against central differences of the forward:
/// loss = sum(out * dout).
void checkFiniteDifferences(const Shape &shape) {
  SCOPED_TRACE(shape.name);
  Problem p(shape, 7);
  p.forward();
  p.backward();
  const AttentionDesc &d = p.desc;
  auto loss = [&] {
    std::vector<float> out(p.out.size()), lse(p.lse.size());
    cpu::attentionForward(d, p.q.data(), p.k.data(), p.v.data(), out.data(),
                          lse.data());
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i)
      l += static_cast<double>(out[i]) * p.dout[i];
    return l;
  };
  const float eps = 1e-2f;
  auto check = [&](std::vector<float> &x, const std::vector<float> &grad,
                   const char *what) {
    double scale = 0;
    for (float g : grad)
      scale = std::max(scale, std::fabs(static_cast<double>(g)));
    for (size_t i = 0; i < x.size(); ++i) {
      const float saved = x[i];
      x[i] = saved + eps;
      const double up = loss();
      x[i] = saved - eps;
      const double down = loss();
      x[i] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      EXPECT_NEAR(grad[i], numeric, 2e-3 * (std::fabs(numeric) + scale))
          << what << "[" << i << "]";
    }
  };
  check(p.q, p.dq, "dq");
  check(p.k, p.dk, "dk");
  check(p.v, p.dv, "dv");
}

TEST(RuntimeAttentionTest, BackwardMatchesFiniteDifferences) {
  checkFiniteDifferences({"tiny causal, mask, block tasks", 1, 2, 3, 5, 4, true,
                          MaskKind::KeyPadding});
  checkFiniteDifferences({"tiny causal strided, head tasks", 2, 4, 3, 4, 2,
                          true, MaskKind::None, true});
}

TEST(RuntimeAttentionTest, SameResultsUnderOneAndTwoThreads) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  const Shape shapes[] = {
      {"head tasks", 2, 4, 130, 150, 32, true, MaskKind::KeyPadding, true},
      {"block tasks", 1, 3, 200, 130, 64, true, MaskKind::Rows},
  };
  for (const Shape &shape : shapes) {
    SCOPED_TRACE(shape.name);
    Problem one(shape), two(shape);
    omp_set_num_threads(1);
    one.forward();
    one.backward();
    omp_set_num_threads(2);
    two.forward();
    two.backward();
    auto same = [](const std::vector<float> &a, const std::vector<float> &b) {
      return a.size() == b.size() &&
             std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same(one.out, two.out));
    EXPECT_TRUE(same(one.lse, two.lse));
    EXPECT_TRUE(same(one.dq, two.dq));
    EXPECT_TRUE(same(one.dk, two.dk));
    EXPECT_TRUE(same(one.dv, two.dv));
  }
  omp_set_num_threads(saved);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

} // namespace
