//===- Attention.cpp - fused scaled dot-product attention (CPU) -----------===//
//
// runtime/cpu/Attention.h on oneDNN's SGEMM and OpenMP. The work is cut into
// tiles of whole score rows: a task takes kRowBlock query rows of one
// (b, h), computes their scores against every key they may see (under a
// causal mask, only keys up to the last row's diagonal) with one SGEMM into
// a buffer of its thread, sets the entries the masks hide to -inf, takes
// e = exp(s - max) of each row (maximum first; expNonPositive, whose
// vector body is as fast on -inf as on any score; the sum in float lanes)
// and multiplies e by V with a second SGEMM, dividing each output row by
// its sum afterwards (D divisions instead of S). Each thread has one such
// buffer (kRowBlock x S scores) for the call; no T x S matrix exists.
// Problems below kMinParallelWork run on the calling thread.
//
// The backward recomputes p = exp(s - lse) tile by tile, with
// Di = dout[i] . out[i], dS = p * (dP - Di), dP = dout v^T:
//
//  - With at least kMinHeadTasks heads (batch x heads), a task is one head:
//    for each block of query rows, dq = scale * dS k directly, and
//    dv += p^T dout, dk += scale * dS^T q in block order (five SGEMMs per
//    block, nothing recomputed).
//  - With fewer heads (too few tasks to keep the threads busy), two passes
//    of independent tasks: one per block of kKeyBlock keys computes its dk
//    and dv against all the queries that see them (the scores transposed,
//    keys x queries), one per block of query rows its dq (the scores
//    computed twice: seven SGEMMs instead of five).
//
// No task writes what another writes, and how the work is cut depends only
// on the shapes, so results do not depend on the number of threads.
// Masked entries have p = 0. A fully masked row (lse = -inf; its out is
// NaN) contributes nothing to the backward: its dq row is 0, and dk, dv
// get nothing from it (where the exported graph's backward would spread
// NaN through dv).
//
// SGEMMs (Blas.h) run single-threaded inside the OpenMP regions. They read
// rows through their stride, which must be at least D; an input whose rows
// overlap (a row stride below D, such as 0 for rows broadcast by an Expand)
// is first copied densely. Output row strides must be at least D (or the
// dim a single row).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Blas.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace autopar::rt::cpu {

namespace {

/// Query rows per task.
constexpr int64_t kRowBlock = 64;
/// Keys per task of the backward's dk/dv pass.
constexpr int64_t kKeyBlock = 64;
/// From this many heads on, the backward takes a head per task.
constexpr int64_t kMinHeadTasks = 8;
/// Below this many multiply-adds per product (B H T S D) the kernels run
/// on the calling thread: waking the OpenMP threads would cost more.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t work(const AttentionDesc &d) {
  return d.batch * d.heads * d.t * d.s * d.d;
}

/// The rows of one (b, h) of a tensor.
template <typename T> struct Rows {
  T *data;
  int64_t ld;
  T *row(int64_t i) const { return data + i * ld; }
};

template <typename T>
Rows<T> rowsOf(T *base, const int64_t strides[3], int64_t b, int64_t h) {
  return {base + b * strides[0] + h * strides[1], strides[2]};
}

/// Where an input's rows overlap (row stride below D, over more than one
/// row), makes a dense [B, H, rows, D] copy in `copy`, points `strides` at
/// it and returns it; otherwise returns `x`.
const float *denseIfOverlapping(const AttentionDesc &d, const float *x,
                                int64_t strides[3], int64_t rows,
                                std::vector<float> &copy) {
  if (rows <= 1 || strides[2] >= d.d)
    return x;
  copy.resize(d.batch * d.heads * rows * d.d);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      Rows<const float> in = rowsOf(x, strides, b, h);
      float *o = copy.data() + (b * d.heads + h) * rows * d.d;
      for (int64_t i = 0; i < rows; ++i)
        std::copy(in.row(i), in.row(i) + d.d, o + i * d.d);
    }
  strides[0] = d.heads * rows * d.d;
  strides[1] = rows * d.d;
  strides[2] = d.d;
  return copy.data();
}

/// The key position of query i under the causal mask: it sees keys
/// j <= position(i).
int64_t position(const AttentionDesc &d, int64_t i) {
  return d.positions ? d.positions[i] : i + d.s - d.t;
}

/// The first query in [lo, hi) that sees key `key` (hi if none): queries'
/// positions increase.
int64_t firstQuerySeeing(const AttentionDesc &d, int64_t key, int64_t lo,
                         int64_t hi) {
  if (!d.positions)
    return std::clamp<int64_t>(key - (d.s - d.t), lo, hi);
  return std::lower_bound(d.positions + lo, d.positions + hi, key) -
         d.positions;
}

/// How many keys (from 0) queries [0, rowEnd) may see.
int64_t keyEnd(const AttentionDesc &d, int64_t rowEnd) {
  if (!d.causal)
    return d.s;
  if (rowEnd <= 0)
    return 0;
  return std::clamp<int64_t>(position(d, rowEnd - 1) + 1, 0, d.s);
}

/// The first query that may see key `key`.
int64_t queryBegin(const AttentionDesc &d, int64_t key) {
  if (!d.causal)
    return 0;
  return firstQuerySeeing(d, key, 0, d.t);
}

/// The entries [begin, end) of row r of a tile of scores that the causal
/// mask leaves visible (all `cols` without it): entry (r, c) is query
/// i0 + r and key j0 + c, or with `keyRows` key j0 + r and query i0 + c.
/// Query i sees keys j <= position(i).
struct Span {
  int64_t begin, end;
};
Span causalSpan(const AttentionDesc &d, int64_t i0, int64_t j0, int64_t r,
                int64_t cols, bool keyRows) {
  if (!d.causal)
    return {0, cols};
  if (!d.positions) {
    const int64_t shift = d.s - d.t;
    if (keyRows) // queries from j0 + r - shift on
      return {std::clamp<int64_t>(j0 + r - shift - i0, 0, cols), cols};
    return {0, std::clamp<int64_t>(i0 + r + shift + 1 - j0, 0, cols)};
  }
  if (keyRows) { // the queries (all in range) that see key j0 + r
    const int64_t hi = std::min(i0 + cols, d.t);
    return {firstQuerySeeing(d, j0 + r, i0, hi) - i0, cols};
  }
  return {0, std::clamp<int64_t>(d.positions[i0 + r] + 1 - j0, 0, cols)};
}

/// Sets the entries of a tile of scores of head (b, h) that the bool mask
/// masks to -inf (entries as for causalSpan; leading dim ld).
void applyMask(const AttentionDesc &d, int64_t b, int64_t h, int64_t i0,
               int64_t j0, int64_t rows, int64_t cols, float *s, int64_t ld,
               bool keyRows) {
  if (!d.mask)
    return;
  const int64_t *ms = d.maskStrides;
  const bool *mask = d.mask + b * ms[0] + h * ms[1] + i0 * ms[2] + j0 * ms[3];
  const int64_t rowStride = keyRows ? ms[3] : ms[2];
  const int64_t colStride = keyRows ? ms[2] : ms[3];
  for (int64_t r = 0; r < rows; ++r) {
    const bool *mr = mask + r * rowStride;
    float *sr = s + r * ld;
    for (int64_t c = 0; c < cols; ++c)
      if (!mr[c * colStride])
        sr[c] = -kInf;
  }
}

/// Sets the entries of a tile of scores that the causal mask hides to
/// -inf (entries as for causalSpan; leading dim ld), so that the loops
/// after it run over whole rows: exp turns them into 0.
void maskCausal(const AttentionDesc &d, int64_t i0, int64_t j0, int64_t rows,
                int64_t cols, float *s, int64_t ld, bool keyRows) {
  if (!d.causal)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    const Span span = causalSpan(d, i0, j0, r, cols, keyRows);
    float *sr = s + r * ld;
    std::fill(sr, sr + span.begin, -kInf);
    std::fill(sr + span.end, sr + cols, -kInf);
  }
}

/// Turns row `sr` of scores into p = exp(s - lse[c]) and row `dsr` of dP
/// into dS = p (dP - di[c]) (lse, di per column: `perColumn`; else lse[0],
/// di[0] for the row). Masked entries (-inf, or a fully masked row's
/// lse = +inf) get p = 0, dS = 0.
void scoreGrads(float *sr, float *dsr, int64_t cols, const float *lse,
                const float *di, bool perColumn) {
  if (perColumn) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float p = expNonPositive(sr[c] - lse[c]);
      sr[c] = p;
      dsr[c] = p * (dsr[c] - di[c]);
    }
    return;
  }
  const float l = lse[0], dr = di[0];
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    const float p = expNonPositive(sr[c] - l);
    sr[c] = p;
    dsr[c] = p * (dsr[c] - dr);
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// out and lse of query rows [i0, i0 + kRowBlock) of head (b, h); `s` holds
/// kRowBlock x S floats.
void forwardRows(const AttentionDesc &d, int64_t b, int64_t h, int64_t i0,
                 const float *q, const float *k, const float *v, float *out,
                 float *lse, float *s) {
  const int64_t rows = std::min(kRowBlock, d.t - i0);
  const int64_t cols = keyEnd(d, i0 + rows);
  Rows<const float> qh = rowsOf(q, d.qStrides, b, h);
  Rows<const float> kh = rowsOf(k, d.kStrides, b, h);
  Rows<const float> vh = rowsOf(v, d.vStrides, b, h);
  Rows<float> outh = rowsOf(out, d.outStrides, b, h);
  float *lseRows = lse + (b * d.heads + h) * d.t + i0;
  float maxes[kRowBlock], sums[kRowBlock];

  sgemm(false, true, rows, cols, d.d, d.scale, qh.row(i0), qh.ld, kh.data,
        kh.ld, 0.0f, s, cols);
  applyMask(d, b, h, i0, 0, rows, cols, s, cols, /*keyRows=*/false);
  maskCausal(d, i0, 0, rows, cols, s, cols, /*keyRows=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    float *sr = s + r * cols;
    const float max = cols > 0 ? rowMax(sr, cols) : -kInf;
    if (max == -kInf) {
      // Every key masked: exp(-inf - max) would be NaN; 0 here, NaN below.
      std::fill(sr, sr + cols, 0.0f);
      maxes[r] = -kInf;
      sums[r] = 0;
      continue;
    }
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) {
      const float e = expNonPositive(sr[c] - max);
      sr[c] = e;
      sum += e;
    }
    maxes[r] = max;
    sums[r] = sum;
  }
  sgemm(false, false, rows, d.d, cols, 1.0f, s, cols, vh.data, vh.ld, 0.0f,
        outh.row(i0), outh.ld);
#pragma omp simd
  for (int64_t r = 0; r < rows; ++r)
    lseRows[r] = maxes[r] + logf(sums[r]);
  for (int64_t r = 0; r < rows; ++r) {
    float *o = outh.row(i0 + r);
    if (sums[r] == 0) {
      lseRows[r] = -kInf;
      std::fill(o, o + d.d, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const float inv = 1.0f / sums[r];
#pragma omp simd
    for (int64_t c = 0; c < d.d; ++c)
      o[c] *= inv;
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// What the backward reads of the forward, per query row of every head
/// (dense [B, H, T]): the lse to subtract from the scores (+inf for a fully
/// masked row, so that its p is 0) and Di = dout . out (0 for a fully
/// masked row, whose out is NaN).
struct RowStats {
  std::vector<float> lse, di;
};

RowStats rowStats(const AttentionDesc &d, const float *out, const float *lse,
                  const float *dout) {
  const int64_t numRows = d.batch * d.heads * d.t;
  RowStats stats;
  stats.lse.resize(numRows);
  stats.di.resize(numRows);
#pragma omp parallel for if (numRows * d.d > 32768)
  for (int64_t row = 0; row < numRows; ++row) {
    const int64_t bh = row / d.t, i = row % d.t;
    const int64_t b = bh / d.heads, h = bh % d.heads;
    if (lse[row] == -kInf) {
      stats.lse[row] = kInf;
      stats.di[row] = 0;
      continue;
    }
    const float *o = rowsOf(out, d.outStrides, b, h).row(i);
    const float *g = rowsOf(dout, d.doutStrides, b, h).row(i);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < d.d; ++c)
      sum += o[c] * g[c];
    stats.lse[row] = lse[row];
    stats.di[row] = sum;
  }
  return stats;
}

/// The tensors of the backward.
struct Grads {
  const float *q, *k, *v, *dout;
  float *dq, *dk, *dv;
};

/// dq of query rows [i0, i0 + kRowBlock) of head (b, h), and, with
/// `accumulateKV`, their terms of dk and dv added to dk, dv. `s` and `ds`
/// hold kRowBlock x S floats each.
void backwardRows(const AttentionDesc &d, const RowStats &stats, const Grads &g,
                  int64_t b, int64_t h, int64_t i0, bool accumulateKV, float *s,
                  float *ds) {
  const int64_t rows = std::min(kRowBlock, d.t - i0);
  const int64_t cols = keyEnd(d, i0 + rows);
  Rows<const float> qh = rowsOf(g.q, d.qStrides, b, h);
  Rows<const float> kh = rowsOf(g.k, d.kStrides, b, h);
  Rows<const float> vh = rowsOf(g.v, d.vStrides, b, h);
  Rows<const float> douth = rowsOf(g.dout, d.doutStrides, b, h);
  Rows<float> dqh = rowsOf(g.dq, d.dqStrides, b, h);
  const int64_t first = (b * d.heads + h) * d.t + i0;
  const float *lse = stats.lse.data() + first, *di = stats.di.data() + first;

  if (cols == 0) {
    for (int64_t r = 0; r < rows; ++r)
      std::fill(dqh.row(i0 + r), dqh.row(i0 + r) + d.d, 0.0f);
    return;
  }
  // p = exp(scale q k^T - lse), dP = dout v^T, dS = p (dP - Di).
  sgemm(false, true, rows, cols, d.d, d.scale, qh.row(i0), qh.ld, kh.data,
        kh.ld, 0.0f, s, cols);
  applyMask(d, b, h, i0, 0, rows, cols, s, cols, /*keyRows=*/false);
  maskCausal(d, i0, 0, rows, cols, s, cols, /*keyRows=*/false);
  sgemm(false, true, rows, cols, d.d, 1.0f, douth.row(i0), douth.ld, vh.data,
        vh.ld, 0.0f, ds, cols);
  for (int64_t r = 0; r < rows; ++r)
    scoreGrads(s + r * cols, ds + r * cols, cols, lse + r, di + r,
               /*perColumn=*/false);
  sgemm(false, false, rows, d.d, cols, d.scale, ds, cols, kh.data, kh.ld, 0.0f,
        dqh.row(i0), dqh.ld);
  if (!accumulateKV)
    return;
  Rows<float> dkh = rowsOf(g.dk, d.dkStrides, b, h);
  Rows<float> dvh = rowsOf(g.dv, d.dvStrides, b, h);
  sgemm(true, false, cols, d.d, rows, 1.0f, s, cols, douth.row(i0), douth.ld,
        1.0f, dvh.data, dvh.ld);
  sgemm(true, false, cols, d.d, rows, d.scale, ds, cols, qh.row(i0), qh.ld,
        1.0f, dkh.data, dkh.ld);
}

/// dk and dv of keys [j0, j0 + kKeyBlock) of head (b, h) from every query
/// that sees them, on tiles of keys x queries. `s` and `ds` hold
/// kKeyBlock x T floats each.
void backwardKeys(const AttentionDesc &d, const RowStats &stats, const Grads &g,
                  int64_t b, int64_t h, int64_t j0, float *s, float *ds) {
  const int64_t keys = std::min(kKeyBlock, d.s - j0);
  const int64_t qb = queryBegin(d, j0), queries = d.t - qb;
  Rows<const float> qh = rowsOf(g.q, d.qStrides, b, h);
  Rows<const float> kh = rowsOf(g.k, d.kStrides, b, h);
  Rows<const float> vh = rowsOf(g.v, d.vStrides, b, h);
  Rows<const float> douth = rowsOf(g.dout, d.doutStrides, b, h);
  Rows<float> dkh = rowsOf(g.dk, d.dkStrides, b, h);
  Rows<float> dvh = rowsOf(g.dv, d.dvStrides, b, h);
  const int64_t first = (b * d.heads + h) * d.t + qb;
  const float *lse = stats.lse.data() + first, *di = stats.di.data() + first;

  if (queries == 0) {
    for (int64_t r = 0; r < keys; ++r) {
      std::fill(dkh.row(j0 + r), dkh.row(j0 + r) + d.d, 0.0f);
      std::fill(dvh.row(j0 + r), dvh.row(j0 + r) + d.d, 0.0f);
    }
    return;
  }
  // p^T = exp(scale k q^T - lse), dP^T = v dout^T, dS^T = p^T (dP^T - Di).
  sgemm(false, true, keys, queries, d.d, d.scale, kh.row(j0), kh.ld, qh.row(qb),
        qh.ld, 0.0f, s, queries);
  applyMask(d, b, h, qb, j0, keys, queries, s, queries, /*keyRows=*/true);
  maskCausal(d, qb, j0, keys, queries, s, queries, /*keyRows=*/true);
  sgemm(false, true, keys, queries, d.d, 1.0f, vh.row(j0), vh.ld, douth.row(qb),
        douth.ld, 0.0f, ds, queries);
  for (int64_t r = 0; r < keys; ++r)
    scoreGrads(s + r * queries, ds + r * queries, queries, lse, di,
               /*perColumn=*/true);
  sgemm(false, false, keys, d.d, queries, 1.0f, s, queries, douth.row(qb),
        douth.ld, 0.0f, dvh.row(j0), dvh.ld);
  sgemm(false, false, keys, d.d, queries, d.scale, ds, queries, qh.row(qb),
        qh.ld, 0.0f, dkh.row(j0), dkh.ld);
}

} // namespace

void attentionForward(const AttentionDesc &desc, const float *q, const float *k,
                      const float *v, float *out, float *lse) {
  AttentionDesc d = desc;
  std::vector<float> qCopy, kCopy, vCopy;
  q = denseIfOverlapping(d, q, d.qStrides, d.t, qCopy);
  k = denseIfOverlapping(d, k, d.kStrides, d.s, kCopy);
  v = denseIfOverlapping(d, v, d.vStrides, d.s, vCopy);
  const int64_t heads = d.batch * d.heads, blocks = ceilDiv(d.t, kRowBlock);
  const int64_t tasks = heads * blocks;
#pragma omp parallel if (tasks > 1 && work(d) >= kMinParallelWork)
  {
    std::vector<float> s(kRowBlock * std::max<int64_t>(d.s, 1));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      // Last row blocks first: under a causal mask they see the most keys.
      const int64_t bh = task / blocks;
      const int64_t i0 = (blocks - 1 - task % blocks) * kRowBlock;
      forwardRows(d, bh / d.heads, bh % d.heads, i0, q, k, v, out, lse,
                  s.data());
    }
  }
}

void attentionBackward(const AttentionDesc &desc, const float *q,
                       const float *k, const float *v, const float *out,
                       const float *lse, const float *dout, float *dq,
                       float *dk, float *dv) {
  AttentionDesc d = desc;
  std::vector<float> qCopy, kCopy, vCopy, outCopy, doutCopy;
  q = denseIfOverlapping(d, q, d.qStrides, d.t, qCopy);
  k = denseIfOverlapping(d, k, d.kStrides, d.s, kCopy);
  v = denseIfOverlapping(d, v, d.vStrides, d.s, vCopy);
  out = denseIfOverlapping(d, out, d.outStrides, d.t, outCopy);
  dout = denseIfOverlapping(d, dout, d.doutStrides, d.t, doutCopy);
  const RowStats stats = rowStats(d, out, lse, dout);
  const Grads g{q, k, v, dout, dq, dk, dv};
  const int64_t heads = d.batch * d.heads;
  const int64_t rowBlocks = ceilDiv(d.t, kRowBlock);
  const int64_t tileFloats = kRowBlock * std::max<int64_t>(d.s, 1);

  const bool parallel = work(d) >= kMinParallelWork;
  if (heads >= kMinHeadTasks) {
#pragma omp parallel if (parallel)
    {
      std::vector<float> s(tileFloats), ds(tileFloats);
#pragma omp for schedule(dynamic)
      for (int64_t bh = 0; bh < heads; ++bh) {
        const int64_t b = bh / d.heads, h = bh % d.heads;
        Rows<float> dkh = rowsOf(dk, d.dkStrides, b, h);
        Rows<float> dvh = rowsOf(dv, d.dvStrides, b, h);
        for (int64_t j = 0; j < d.s; ++j) {
          std::fill(dkh.row(j), dkh.row(j) + d.d, 0.0f);
          std::fill(dvh.row(j), dvh.row(j) + d.d, 0.0f);
        }
        for (int64_t i0 = 0; i0 < d.t; i0 += kRowBlock)
          backwardRows(d, stats, g, b, h, i0, /*accumulateKV=*/true, s.data(),
                       ds.data());
      }
    }
    return;
  }

  const int64_t keyBlocks = ceilDiv(d.s, kKeyBlock);
  const int64_t keyTasks = heads * keyBlocks, rowTasks = heads * rowBlocks;
#pragma omp parallel if (parallel && keyTasks + rowTasks > 2)
  {
    std::vector<float> s(
        std::max(tileFloats, kKeyBlock * std::max<int64_t>(d.t, 1)));
    std::vector<float> ds(s.size());
#pragma omp for schedule(dynamic) nowait
    for (int64_t task = 0; task < keyTasks; ++task) {
      // First key blocks first: under a causal mask they see the most rows.
      const int64_t bh = task / keyBlocks;
      const int64_t j0 = (task % keyBlocks) * kKeyBlock;
      backwardKeys(d, stats, g, bh / d.heads, bh % d.heads, j0, s.data(),
                   ds.data());
    }
    // dq of the row blocks (independent of dk and dv: no barrier needed).
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < rowTasks; ++task) {
      const int64_t bh = task / rowBlocks;
      const int64_t i0 = (rowBlocks - 1 - task % rowBlocks) * kRowBlock;
      backwardRows(d, stats, g, bh / d.heads, bh % d.heads, i0,
                   /*accumulateKV=*/false, s.data(), ds.data());
    }
  }
}

} // namespace autopar::rt::cpu
