//===- Attention.cu - fused scaled dot-product attention (CUDA) -----------===//
//
// runtime/cuda/Attention.h as flash-attention-2 style kernels; here the f32
// ones (bfloat16 and half: Attention16.cu):
//
//  - Forward: a block per (b*h, block of kBr query rows) keeps its q tile in
//    shared memory and walks the key/value tiles of kBc rows (under a causal
//    mask only those left of the block's last diagonal), with an online
//    softmax: a running maximum m and sum l per row, the out accumulator
//    rescaled by exp(m_old - m_new) whenever m grows. It writes out = acc / l
//    and lse = m + log(l).
//  - Backward, three kernels: rowStatsKernel computes Di = dout . out per
//    query row (into cuda::scratch, with the lse to subtract: +inf for a
//    fully masked row, whose Di is 0); keysKernel, a block per (b*h, block
//    of kBc keys), walks the query tiles that see its keys and accumulates
//    dk, dv in registers; queriesKernel, a block per (b*h, block of kBr
//    query rows), walks the key tiles and accumulates dq. Both recompute
//    p = exp(s - lse) and dS = p (dP - Di); dq gets its own kernel instead
//    of atomics, so every output element is written by one thread, once,
//    after a fixed-order sum.
//
// Every kernel runs 256 threads as a 16 x 16 grid (ty, tx) over its tiles:
// a thread owns the tile entries (ty + 16 r, tx + 16 c), so a row's entries
// lie in the 16 lanes of one half-warp (row maxima and sums are butterfly
// shuffles over those lanes), and of the D columns of an accumulator it
// owns tx + 16 e. Tiles of D-wide rows are stored [rows][kD + 1] in shared
// memory (zero-filled past the valid rows and past D), score tiles
// [rows][cols + 1]: the padding puts the 16 rows a half-warp reads at once
// into 16 different banks. kD (64 or 128) bounds D; dot products loop over
// the actual D.
//
// In these f32 kernels every product is a scalar fp32 FMA loop (fp32
// parity with the CPU target: no TF32). The bf16 and half kernels
// (Attention16.cu) run their products on tensor cores (mma.sync); what
// they still lack against FlashAttention-2 is cp.async double-buffering of
// the K/V tiles, ldmatrix fragment loads and, on sm_90, wgmma.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/AttentionCommon.cuh"

#include <cmath>
#include <cstdint>

namespace autopar::rt::cuda {

namespace {

/// Threads along each side of the thread grid over a tile.
constexpr int kSide = 16;

/// Tile sizes of the kernels for head dims up to kD (multiples of kSide).
/// Shared memory stays under 99 KiB (the opt-in limit of sm_86/sm_89; sm_80
/// allows 163 KiB, sm_90 227 KiB).
template <int kD> struct Tiles;
template <> struct Tiles<64> {
  static constexpr int kForwardRows = 64, kForwardKeys = 64;
  static constexpr int kBackwardRows = 64, kBackwardKeys = 64;
};
template <> struct Tiles<128> {
  static constexpr int kForwardRows = 64, kForwardKeys = 32;
  static constexpr int kBackwardRows = 32, kBackwardKeys = 32;
};

/// Floats of a shared tile of `rows` rows of `width` floats (padded).
__host__ __device__ constexpr int tileFloats(int rows, int width) {
  return rows * (width + 1);
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Copies rows [row0, row0 + kRows) of a head (`rows` of them valid, D
/// contiguous floats each, `stride` apart) into tile [kRows][kD + 1], with
/// zeros past the valid rows and past D.
template <int kRows, int kD>
__device__ void loadTile(float *tile, const float *head, int64_t stride,
                         int64_t row0, int rows, int d) {
  for (int idx = threadIdx.x; idx < kRows * kD; idx += kThreads) {
    const int r = idx / kD, c = idx % kD;
    tile[r * (kD + 1) + c] =
        r < rows && c < d ? head[(row0 + r) * stride + c] : 0.0f;
  }
}

/// acc[r][c] = a[ty + 16 r] . b[tx + 16 c] over the first d floats of the
/// rows of tiles a and b ([*][kD + 1]).
template <int kR, int kC, int kD>
__device__ void tileDots(const float *a, const float *b, int d,
                         float (&acc)[kR][kC]) {
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int c = 0; c < kC; ++c)
      acc[r][c] = 0.0f;
#pragma unroll 4
  for (int e = 0; e < d; ++e) {
    float av[kR], bv[kC];
#pragma unroll
    for (int r = 0; r < kR; ++r)
      av[r] = a[(ty + kSide * r) * (kD + 1) + e];
#pragma unroll
    for (int c = 0; c < kC; ++c)
      bv[c] = b[(tx + kSide * c) * (kD + 1) + e];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < kC; ++c)
        acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
}

/// acc[r][e] += sum over c < kCols of w[ty + 16 r][c] * x[c][tx + 16 e],
/// for a score tile w ([*][kCols + 1]) and a tile x ([kCols][kD + 1]).
template <int kR, int kCols, int kD>
__device__ void tileAccumulate(const float *w, const float *x,
                               float (&acc)[kR][kD / kSide]) {
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
#pragma unroll 4
  for (int c = 0; c < kCols; ++c) {
    float wv[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r)
      wv[r] = w[(ty + kSide * r) * (kCols + 1) + c];
#pragma unroll
    for (int e = 0; e < kD / kSide; ++e) {
      const float xv = x[c * (kD + 1) + tx + kSide * e];
#pragma unroll
      for (int r = 0; r < kR; ++r)
        acc[r][e] = fmaf(wv[r], xv, acc[r][e]);
    }
  }
}

/// Reduces `v` over the 16 lanes of a half-warp (the threads of one tile
/// row) in a fixed butterfly; every lane gets the result. All 32 lanes
/// must call it.
template <typename Op> __device__ float rowReduce(float v, Op op) {
  for (int offset = kSide / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <int kD, int kBr, int kBc> constexpr int forwardSharedFloats() {
  return tileFloats(kBr, kD) + 2 * tileFloats(kBc, kD) + tileFloats(kBr, kBc);
}

template <int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(AttentionDesc d, const float *q, const float *k,
                  const float *v, float *out, float *lse) {
  static_assert(kD % kSide == 0 && kBr % kSide == 0 && kBc % kSide == 0);
  constexpr int kR = kBr / kSide, kC = kBc / kSide, kE = kD / kSide;
  extern __shared__ float shared[];
  float *qTile = shared;                      // [kBr][kD + 1]
  float *kTile = qTile + tileFloats(kBr, kD); // [kBc][kD + 1]
  float *vTile = kTile + tileFloats(kBc, kD); // [kBc][kD + 1]
  float *pTile = vTile + tileFloats(kBc, kD); // [kBr][kBc + 1]
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const auto [bh, b, h, i0, keyEnd, rows, mask] = queryBlock(d, kBr);
  const float *kHead = headOf(k, d.kStrides, b, h);
  const float *vHead = headOf(v, d.vStrides, b, h);
  loadTile<kBr, kD>(qTile, headOf(q, d.qStrides, b, h), d.qStrides[2], i0, rows,
                    static_cast<int>(d.d));

  // Per owned row: running maximum, running sum, unnormalized out.
  float m[kR], l[kR], acc[kR][kE];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e)
      acc[r][e] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
    const int cols = static_cast<int>(clampTo(d.s - j0, 0, kBc));
    __syncthreads(); // the previous tiles' readers are done
    loadTile<kBc, kD>(kTile, kHead, d.kStrides[2], j0, cols,
                      static_cast<int>(d.d));
    loadTile<kBc, kD>(vTile, vHead, d.vStrides[2], j0, cols,
                      static_cast<int>(d.d));
    __syncthreads();
    float s[kR][kC];
    tileDots<kR, kC, kD>(qTile, kTile, static_cast<int>(d.d), s);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int64_t i = i0 + ty + kSide * r;
      float tileMax = -INFINITY;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int64_t j = j0 + tx + kSide * c;
        s[r][c] = attends(d, mask, i, j) ? d.scale * s[r][c] : -INFINITY;
        tileMax = fmaxf(tileMax, s[r][c]);
      }
      const float mNew = fmaxf(m[r], rowReduce(tileMax, MaxOp()));
      // While every key so far is masked, mNew is -inf: subtract 0, so
      // that p and the rescale factor are exp(-inf) = 0, not NaN.
      const float base = mNew == -INFINITY ? 0.0f : mNew;
      const float rescale = expf(m[r] - base);
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const float p = expf(s[r][c] - base);
        pTile[(ty + kSide * r) * (kBc + 1) + tx + kSide * c] = p;
        sum += p;
      }
      l[r] = l[r] * rescale + rowReduce(sum, SumOp());
      m[r] = mNew;
#pragma unroll
      for (int e = 0; e < kE; ++e)
        acc[r][e] *= rescale;
    }
    __syncthreads();
    tileAccumulate<kR, kBc, kD>(pTile, vTile, acc);
  }

  float *outHead = headOf(out, d.outStrides, b, h);
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t i = i0 + ty + kSide * r;
    if (i >= d.t)
      continue;
    // l is at least 1 unless every key of the row is masked.
    const bool masked = l[r] == 0.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const int c = tx + kSide * e;
      if (c < d.d)
        outHead[i * d.outStrides[2] + c] = masked ? NAN : acc[r][e] / l[r];
    }
    if (tx == 0)
      lse[bh * d.t + i] = masked ? -INFINITY : m[r] + logf(l[r]);
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

template <int kD, int kBr, int kBc> constexpr int keysSharedFloats() {
  return 2 * tileFloats(kBc, kD) + 2 * tileFloats(kBr, kD) +
         2 * tileFloats(kBc, kBr) + 2 * kBr;
}

/// dk and dv of keys [j0, j0 + kBc) of head bh, from the query tiles of kBr
/// rows that see them. Tiles are keys x queries: a thread owns keys
/// ty + 16 r.
template <int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kThreads)
    keysKernel(AttentionDesc d, const float *q, const float *k, const float *v,
               const float *dout, const float *lseRows, const float *diRows,
               float *dk, float *dv) {
  static_assert(kD % kSide == 0 && kBr % kSide == 0 && kBc % kSide == 0);
  constexpr int kR = kBc / kSide, kC = kBr / kSide, kE = kD / kSide;
  extern __shared__ float shared[];
  float *kTile = shared;                          // [kBc][kD + 1]
  float *vTile = kTile + tileFloats(kBc, kD);     // [kBc][kD + 1]
  float *qTile = vTile + tileFloats(kBc, kD);     // [kBr][kD + 1]
  float *gTile = qTile + tileFloats(kBr, kD);     // dout [kBr][kD + 1]
  float *pTile = gTile + tileFloats(kBr, kD);     // p^T [kBc][kBr + 1]
  float *dsTile = pTile + tileFloats(kBc, kBr);   // dS^T [kBc][kBr + 1]
  float *lseTile = dsTile + tileFloats(kBc, kBr); // [kBr]
  float *diTile = lseTile + kBr;                  // [kBr]
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const auto [bh, b, h, j0, queryBegin, keys, mask] = keyBlock(d, kBc);
  const int dim = static_cast<int>(d.d);
  const float *qHead = headOf(q, d.qStrides, b, h);
  const float *gHead = headOf(dout, d.doutStrides, b, h);
  loadTile<kBc, kD>(kTile, headOf(k, d.kStrides, b, h), d.kStrides[2], j0, keys,
                    dim);
  loadTile<kBc, kD>(vTile, headOf(v, d.vStrides, b, h), d.vStrides[2], j0, keys,
                    dim);

  float dkAcc[kR][kE], dvAcc[kR][kE];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int e = 0; e < kE; ++e)
      dkAcc[r][e] = dvAcc[r][e] = 0.0f;
  for (int64_t i0 = queryBegin; i0 < d.t; i0 += kBr) {
    const int queries = static_cast<int>(clampTo(d.t - i0, 0, kBr));
    __syncthreads(); // the previous tiles' readers are done
    loadTile<kBr, kD>(qTile, qHead, d.qStrides[2], i0, queries, dim);
    loadTile<kBr, kD>(gTile, gHead, d.doutStrides[2], i0, queries, dim);
    for (int c = threadIdx.x; c < kBr; c += kThreads) {
      lseTile[c] = c < queries ? lseRows[bh * d.t + i0 + c] : INFINITY;
      diTile[c] = c < queries ? diRows[bh * d.t + i0 + c] : 0.0f;
    }
    __syncthreads();
    // s^T = k q^T, dP^T = v dout^T; p^T = exp(scale s^T - lse),
    // dS^T = p^T (dP^T - Di).
    float s[kR][kC], dp[kR][kC];
    tileDots<kR, kC, kD>(kTile, qTile, dim, s);
    tileDots<kR, kC, kD>(vTile, gTile, dim, dp);
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int key = ty + kSide * r, query = tx + kSide * c;
        const float p = attends(d, mask, i0 + query, j0 + key)
                            ? expf(d.scale * s[r][c] - lseTile[query])
                            : 0.0f;
        pTile[key * (kBr + 1) + query] = p;
        dsTile[key * (kBr + 1) + query] = p * (dp[r][c] - diTile[query]);
      }
    __syncthreads();
    // dv += p^T dout, dk += dS^T q (scaled at the end).
    tileAccumulate<kR, kBr, kD>(pTile, gTile, dvAcc);
    tileAccumulate<kR, kBr, kD>(dsTile, qTile, dkAcc);
  }

  float *dkHead = headOf(dk, d.dkStrides, b, h);
  float *dvHead = headOf(dv, d.dvStrides, b, h);
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t j = j0 + ty + kSide * r;
    if (j >= d.s)
      continue;
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const int c = tx + kSide * e;
      if (c < d.d) {
        dkHead[j * d.dkStrides[2] + c] = d.scale * dkAcc[r][e];
        dvHead[j * d.dvStrides[2] + c] = dvAcc[r][e];
      }
    }
  }
}

template <int kD, int kBr, int kBc> constexpr int queriesSharedFloats() {
  return 2 * tileFloats(kBr, kD) + 2 * tileFloats(kBc, kD) +
         tileFloats(kBr, kBc);
}

/// dq of query rows [i0, i0 + kBr) of head bh, from the key tiles of kBc
/// keys they see. Tiles are queries x keys: a thread owns rows ty + 16 r.
template <int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kThreads)
    queriesKernel(AttentionDesc d, const float *q, const float *k,
                  const float *v, const float *dout, const float *lseRows,
                  const float *diRows, float *dq) {
  static_assert(kD % kSide == 0 && kBr % kSide == 0 && kBc % kSide == 0);
  constexpr int kR = kBr / kSide, kC = kBc / kSide, kE = kD / kSide;
  extern __shared__ float shared[];
  float *qTile = shared;                       // [kBr][kD + 1]
  float *gTile = qTile + tileFloats(kBr, kD);  // dout [kBr][kD + 1]
  float *kTile = gTile + tileFloats(kBr, kD);  // [kBc][kD + 1]
  float *vTile = kTile + tileFloats(kBc, kD);  // [kBc][kD + 1]
  float *dsTile = vTile + tileFloats(kBc, kD); // [kBr][kBc + 1]
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const auto [bh, b, h, i0, keyEnd, rows, mask] = queryBlock(d, kBr);
  const int dim = static_cast<int>(d.d);
  const float *kHead = headOf(k, d.kStrides, b, h);
  const float *vHead = headOf(v, d.vStrides, b, h);
  loadTile<kBr, kD>(qTile, headOf(q, d.qStrides, b, h), d.qStrides[2], i0, rows,
                    dim);
  loadTile<kBr, kD>(gTile, headOf(dout, d.doutStrides, b, h), d.doutStrides[2],
                    i0, rows, dim);
  float lseR[kR], diR[kR], dqAcc[kR][kE];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t i = i0 + ty + kSide * r;
    lseR[r] = i < d.t ? lseRows[bh * d.t + i] : INFINITY;
    diR[r] = i < d.t ? diRows[bh * d.t + i] : 0.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e)
      dqAcc[r][e] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
    const int cols = static_cast<int>(clampTo(d.s - j0, 0, kBc));
    __syncthreads(); // the previous tiles' readers are done
    loadTile<kBc, kD>(kTile, kHead, d.kStrides[2], j0, cols, dim);
    loadTile<kBc, kD>(vTile, vHead, d.vStrides[2], j0, cols, dim);
    __syncthreads();
    // p = exp(scale q k^T - lse), dS = p (dout v^T - Di).
    float s[kR][kC], dp[kR][kC];
    tileDots<kR, kC, kD>(qTile, kTile, dim, s);
    tileDots<kR, kC, kD>(gTile, vTile, dim, dp);
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int row = ty + kSide * r, key = tx + kSide * c;
        const float p = attends(d, mask, i0 + row, j0 + key)
                            ? expf(d.scale * s[r][c] - lseR[r])
                            : 0.0f;
        dsTile[row * (kBc + 1) + key] = p * (dp[r][c] - diR[r]);
      }
    __syncthreads();
    // dq += dS k (scaled at the end).
    tileAccumulate<kR, kBc, kD>(dsTile, kTile, dqAcc);
  }

  float *dqHead = headOf(dq, d.dqStrides, b, h);
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t i = i0 + ty + kSide * r;
    if (i >= d.t)
      continue;
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const int c = tx + kSide * e;
      if (c < d.d)
        dqHead[i * d.dqStrides[2] + c] = d.scale * dqAcc[r][e];
    }
  }
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

constexpr int floatBytes(int floats) {
  return floats * static_cast<int>(sizeof(float));
}

template <int kD>
void forward(DeviceContext &ctx, const AttentionDesc &d, const float *q,
             const float *k, const float *v, float *out, float *lse) {
  constexpr int kBr = Tiles<kD>::kForwardRows, kBc = Tiles<kD>::kForwardKeys;
  launch(ctx, forwardKernel<kD, kBr, kBc>, d.batch * d.heads, ceilDiv(d.t, kBr),
         kThreads, floatBytes(forwardSharedFloats<kD, kBr, kBc>()), d, q, k, v,
         out, lse);
}

template <int kD>
void backward(DeviceContext &ctx, const AttentionDesc &d, const float *q,
              const float *k, const float *v, const float *dout,
              const float *lseRows, const float *diRows, float *dq, float *dk,
              float *dv) {
  constexpr int kBr = Tiles<kD>::kBackwardRows;
  constexpr int kBc = Tiles<kD>::kBackwardKeys;
  const int64_t heads = d.batch * d.heads;
  launch(ctx, keysKernel<kD, kBr, kBc>, heads, ceilDiv(d.s, kBc), kThreads,
         floatBytes(keysSharedFloats<kD, kBr, kBc>()), d, q, k, v, dout,
         lseRows, diRows, dk, dv);
  launch(ctx, queriesKernel<kD, kBr, kBc>, heads, ceilDiv(d.t, kBr), kThreads,
         floatBytes(queriesSharedFloats<kD, kBr, kBc>()), d, q, k, v, dout,
         lseRows, diRows, dq);
}

} // namespace

void attentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                      const float *q, const float *k, const float *v,
                      float *out, float *lse) {
  checkShape(ctx, desc, __FILE__, __LINE__, "cuda::attentionForward");
  if (desc.d <= 64)
    forward<64>(ctx, desc, q, k, v, out, lse);
  else
    forward<128>(ctx, desc, q, k, v, out, lse);
}

void attentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                       const float *q, const float *k, const float *v,
                       const float *out, const float *lse, const float *dout,
                       float *dq, float *dk, float *dv) {
  checkShape(ctx, desc, __FILE__, __LINE__, "cuda::attentionBackward");
  float *lseRows = rowStats(ctx, desc, out, lse, dout);
  const float *diRows = lseRows ? lseRows + desc.batch * desc.heads * desc.t
                                : nullptr;
  if (desc.d <= 64)
    backward<64>(ctx, desc, q, k, v, dout, lseRows, diRows, dq, dk, dv);
  else
    backward<128>(ctx, desc, q, k, v, dout, lseRows, diRows, dq, dk, dv);
}

} // namespace autopar::rt::cuda
