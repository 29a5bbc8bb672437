//===- Attention16.cu - fused attention on tensor cores (CUDA) ------------===//
//
// runtime/cuda/Attention.h on bfloat16 or IEEE half q, k, v, out, dout,
// dq, dk, dv: the three passes of the f32 kernels (Attention.cu; forward,
// then backward as keysKernel16 for dk, dv and queriesKernel16 for dq,
// after rowStatsKernel), with every product a warp-wide mma.sync.m16n8k16
// (16-bit inputs, f32 accumulation; sm_80 and later):
//
//  - A block runs four warps; each warp owns 16 rows of the block's 64
//    query rows (forward, dq) or 64 keys (dk, dv), so a row's scores lie
//    in the four lanes of one quad (lane / 4 picks the row, lane % 4 the
//    column pair) and row maxima and sums are two shuffles.
//  - Score tiles stay in registers: an m16n8 f32 accumulator pair is laid
//    out as the m16k16 A operand of the next product, so p (rounded to the
//    16-bit type, as FlashAttention-2 does) and dS feed the second product
//    without going through shared memory.
//  - Operand tiles are staged in shared memory as 16-bit rows padded by 8
//    elements (fragment loads are 32-bit words, conflict-free); where a
//    product needs an operand transposed (v in p v, dout and q in the key
//    gradients, k in dq) the tile is also stored transposed.
//  - Softmax statistics, lse, Di and every accumulator are f32; results are
//    rounded once to the 16-bit type. Fully masked rows behave as in the
//    f32 kernels (NaN out, -inf lse, nothing in the backward).
//
// Where the program has cuDNN and the plan lets it (attention_backend),
// cuDNN's fused attention runs instead (runtime/cuda/CudnnAttention.h);
// these kernels run what it does not take.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/AttentionCommon.cuh"
#include "runtime/cuda/CudnnAttention.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace autopar::rt::cuda {

namespace {

/// 16-bit elements of padding after each shared tile row.
constexpr int kPad = 8;
constexpr int kWarps16 = 4;
constexpr int kThreads16 = kWarps16 * kWarp;
/// Rows of a block (16 per warp): query rows of the forward and dq kernels,
/// keys of the dk/dv kernel.
constexpr int kBlockRows16 = 16 * kWarps16;

/// Tile sizes of the 16-bit kernels for head dims up to kD: keys per step
/// of the forward and dq kernels, queries per step of the dk/dv kernel
/// (fewer at kD = 128, where the accumulators take 128 registers).
template <int kD> struct Tiles16;
template <> struct Tiles16<64> {
  static constexpr int kForwardKeys = 64, kQueriesKeys = 64, kKeysQueries = 64;
};
template <> struct Tiles16<128> {
  static constexpr int kForwardKeys = 64, kQueriesKeys = 32, kKeysQueries = 32;
};

/// Two values rounded to T in one 32-bit word, `lo` in the low half (the
/// lower-numbered element of an mma fragment pair).
template <typename T> __device__ uint32_t pack(float lo, float hi) {
  const T pair[2] = {fromFloat<T>(lo), fromFloat<T>(hi)};
  uint32_t word;
  memcpy(&word, pair, sizeof(word));
  return word;
}

/// c += a b for an m16k16 A fragment `a` and a k16n8 B fragment (b0, b1),
/// f32 accumulator c (PTX mma.sync.aligned.m16n8k16.row.col).
__device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                    uint32_t b1, __nv_bfloat16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                 "r"(b1));
#else
  // The host refuses to launch these kernels below sm_80
  // (requireTensorCores).
  __trap();
#endif
}
__device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                    uint32_t b1, __half) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                 "r"(b1));
#else
  __trap();
#endif
}

/// The 32-bit word holding tile elements (r, c) and (r, c + 1) of a shared
/// tile with rows of `ld` elements (c and ld even).
template <typename T>
__device__ uint32_t word(const T *tile, int ld, int r, int c) {
  return *reinterpret_cast<const uint32_t *>(tile + r * ld + c);
}

/// The m16k16 A fragment of rows [r0, r0 + 16), columns [c0, c0 + 16) of a
/// row-major shared tile: lane (g = lane / 4, q = lane % 4) holds rows g and
/// g + 8, columns 2q, 2q + 1 and 2q + 8, 2q + 9.
template <typename T>
__device__ void loadA(uint32_t (&a)[4], const T *tile, int ld, int r0,
                      int c0) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, q = lane % 4;
  a[0] = word(tile, ld, r0 + g, c0 + 2 * q);
  a[1] = word(tile, ld, r0 + g + 8, c0 + 2 * q);
  a[2] = word(tile, ld, r0 + g, c0 + 2 * q + 8);
  a[3] = word(tile, ld, r0 + g + 8, c0 + 2 * q + 8);
}

/// c += A x^T over columns [0, kD) for the k16n8 B operands x^T of rows
/// [n0, n0 + 8) of a row-major shared tile x (B[k][n] = x[n0 + n][k]):
/// lane (g, q) reads row n0 + g, columns 2q, 2q + 1 and 2q + 8, 2q + 9.
template <typename T, int kK>
__device__ void mmaRows(float (&c)[4], const uint32_t (&a)[kK / 16][4],
                        const T *x, int ld, int n0) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    mma(c, a[kk], word(x, ld, n0 + g, kk * 16 + 2 * q),
        word(x, ld, n0 + g, kk * 16 + 2 * q + 8), T());
}

/// s[n] (n < kN / 8) = A x^T for the 16 rows of A (fragments over kK
/// columns, from a row-major shared tile at row r0) and rows [8 n, 8 n + 8)
/// of the row-major shared tile x: scores of 16 rows against kN rows.
template <typename T, int kK, int kN>
__device__ void rowProducts(float (&s)[kN / 8][4], const T *aTile, int ldA,
                            int r0, const T *x, int ldX) {
  uint32_t a[kK / 16][4];
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    loadA(a[kk], aTile, ldA, r0, kk * 16);
#pragma unroll
  for (int n = 0; n < kN / 8; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    mmaRows<T, kK>(s[n], a, x, ldX, n * 8);
  }
}

/// acc += P x for a 16 x kK score tile P in accumulator layout (p[n] holds
/// columns [8 n, 8 n + 8)), rounded to T, and a kK x (8 * kN) operand given
/// transposed: xt is a row-major shared tile [8 kN][ldT] with xt[n][k] =
/// x[k][n].
template <typename T, int kK, int kN>
__device__ void accumulateProducts(float (&acc)[kN][4],
                                   const float (&p)[kK / 8][4], const T *xt,
                                   int ldT) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    // Accumulator tiles 2 kk and 2 kk + 1 are the A fragment of columns
    // [16 kk, 16 kk + 16).
    const uint32_t a[4] = {pack<T>(p[2 * kk][0], p[2 * kk][1]),
                           pack<T>(p[2 * kk][2], p[2 * kk][3]),
                           pack<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < kN; ++n)
      mma(acc[n], a, word(xt, ldT, n * 8 + g, kk * 16 + 2 * q),
          word(xt, ldT, n * 8 + g, kk * 16 + 2 * q + 8), T());
  }
}

/// Copies rows [row0, row0 + kRows) of a head (`rows` valid, `d` contiguous
/// elements each, `stride` apart) into the shared tile [kRows][kD + kPad]
/// and/or transposed into [kD][kRows + kPad] (each when not null); zeros
/// past the valid rows and past d. All kThreads16 threads call it. Rows of
/// whole 16-byte words (d and stride multiples of 8, aligned) are read
/// and written a word at a time.
template <int kRows, int kD, typename T>
__device__ void stageTile(T *tile, T *transposed, const T *head,
                          int64_t stride, int64_t row0, int rows, int d) {
  constexpr int kVec = 16 / sizeof(T);
  static_assert((kD + kPad) % kVec == 0, "shared rows of whole words");
  const T zero = fromFloat<T>(0.0f);
  const bool words =
      d % kVec == 0 && stride % kVec == 0 &&
      reinterpret_cast<uintptr_t>(head + row0 * stride) % 16 == 0;
  if (words) {
    for (int idx = threadIdx.x; idx < kRows * (kD / kVec); idx += kThreads16) {
      const int r = idx / (kD / kVec), c = idx % (kD / kVec) * kVec;
      uint4 word = make_uint4(0, 0, 0, 0); // +0.0 in both 16-bit types
      if (r < rows && c < d)
        word = *reinterpret_cast<const uint4 *>(head + (row0 + r) * stride + c);
      if (tile)
        *reinterpret_cast<uint4 *>(tile + r * (kD + kPad) + c) = word;
      if (transposed) {
        T x[kVec];
        memcpy(x, &word, sizeof(word));
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          transposed[(c + e) * (kRows + kPad) + r] = x[e];
      }
    }
    return;
  }
  for (int idx = threadIdx.x; idx < kRows * kD; idx += kThreads16) {
    const int r = idx / kD, c = idx % kD;
    const T x = r < rows && c < d ? head[(row0 + r) * stride + c] : zero;
    if (tile)
      tile[r * (kD + kPad) + c] = x;
    if (transposed)
      transposed[c * (kRows + kPad) + r] = x;
  }
}

/// Elements of a shared tile of `rows` rows of `width` (padded).
__host__ __device__ constexpr int tile16(int rows, int width) {
  return rows * (width + kPad);
}

/// Reduces `v` over the four lanes of a quad (the lanes holding one score
/// row) in a fixed butterfly; every lane gets the result.
template <typename Op> __device__ float quadReduce(float v, Op op) {
  v = op(v, __shfl_xor_sync(kFullMask, v, 1));
  return op(v, __shfl_xor_sync(kFullMask, v, 2));
}

template <int kD, int kBc> constexpr int forward16Elements() {
  return tile16(kBlockRows16, kD) + tile16(kBc, kD) + tile16(kD, kBc);
}

template <typename T, int kD, int kBc>
__global__ void __launch_bounds__(kThreads16)
    forwardKernel16(AttentionDesc d, const T *q, const T *k, const T *v,
                    T *out, float *lse) {
  static_assert(kD % 16 == 0 && kBc % 16 == 0);
  constexpr int kBr = kBlockRows16, kLd = kD + kPad, kLdT = kBc + kPad;
  extern __shared__ __align__(16) unsigned char shared16[];
  T *qTile = reinterpret_cast<T *>(shared16); // [kBr][kLd]
  T *kTile = qTile + tile16(kBr, kD);         // [kBc][kLd]
  T *vtTile = kTile + tile16(kBc, kD);        // v^T [kD][kLdT]
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, quad = lane % 4;
  const auto [bh, b, h, i0, keyEnd, rows, mask] = queryBlock(d, kBr);
  const int dim = static_cast<int>(d.d);
  const T *kHead = headOf(k, d.kStrides, b, h);
  const T *vHead = headOf(v, d.vStrides, b, h);
  stageTile<kBr, kD, T>(qTile, nullptr, headOf(q, d.qStrides, b, h),
                        d.qStrides[2], i0, rows, dim);
  __syncthreads();
  uint32_t qa[kD / 16][4];
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    loadA(qa[kk], qTile, kLd, warp * 16, kk * 16);

  // Rows i0 + 16 warp + g (r = 0) and that + 8 (r = 1): running maximum and
  // sum, and the out accumulator (acc[n][2 r + e] is column 8 n + 2 quad + e).
  const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
    const int cols = static_cast<int>(clampTo(d.s - j0, 0, kBc));
    __syncthreads(); // the previous tiles' readers are done
    stageTile<kBc, kD, T>(kTile, nullptr, kHead, d.kStrides[2], j0, cols, dim);
    stageTile<kBc, kD, T>(nullptr, vtTile, vHead, d.vStrides[2], j0, cols,
                          dim);
    __syncthreads();
    float s[kBc / 8][4];
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      mmaRows<T, kD>(s[n], qa, kTile, kLd, n * 8);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + n * 8 + 2 * quad + (e & 1);
        s[n][e] = attends(d, mask, row[e >> 1], j) ? d.scale * s[n][e]
                                                   : -INFINITY;
        tileMax[e >> 1] = fmaxf(tileMax[e >> 1], s[n][e]);
      }
    }
    float base[2], rescale[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mNew = fmaxf(m[r], quadReduce(tileMax[r], MaxOp()));
      // While every key so far is masked, mNew is -inf: subtract 0, so
      // that p and the rescale factor are exp(-inf) = 0, not NaN.
      base[r] = mNew == -INFINITY ? 0.0f : mNew;
      rescale[r] = expf(m[r] - base[r]);
      m[r] = mNew;
    }
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = expf(s[n][e] - base[e >> 1]);
        sum[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int r = 0; r < 2; ++r)
      l[r] = l[r] * rescale[r] + quadReduce(sum[r], SumOp());
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[n][e] *= rescale[e >> 1];
    accumulateProducts<T, kBc, kD / 8>(acc, s, vtTile, kLdT);
  }

  T *outHead = headOf(out, d.outStrides, b, h);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= d.t)
      continue;
    // l is at least 1 unless every key of the row is masked.
    const bool masked = l[r] == 0.0f;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * quad + e;
        if (c < dim)
          outHead[row[r] * d.outStrides[2] + c] =
              fromFloat<T>(masked ? NAN : acc[n][2 * r + e] / l[r]);
      }
    if (quad == 0)
      lse[bh * d.t + row[r]] = masked ? -INFINITY : m[r] + logf(l[r]);
  }
}

template <int kD, int kBr> constexpr int keys16Bytes() {
  return 2 * kBr * static_cast<int>(sizeof(float)) +
         2 * (2 * tile16(kBlockRows16, kD) + 2 * tile16(kBr, kD) +
              2 * tile16(kD, kBr));
}

/// dk and dv of the block's kBlockRows16 keys [j0, j0 + 64) of head bh, from
/// the query tiles of kBr rows that see them; scores are keys x queries.
template <typename T, int kD, int kBr>
__global__ void __launch_bounds__(kThreads16)
    keysKernel16(AttentionDesc d, const T *q, const T *k, const T *v,
                 const T *dout, const float *lseRows, const float *diRows,
                 T *dk, T *dv) {
  static_assert(kD % 16 == 0 && kBr % 16 == 0);
  constexpr int kBc = kBlockRows16, kLd = kD + kPad, kLdT = kBr + kPad;
  extern __shared__ __align__(16) unsigned char shared16[];
  float *lseTile = reinterpret_cast<float *>(shared16); // [kBr]
  float *diTile = lseTile + kBr;                        // [kBr]
  T *kTile = reinterpret_cast<T *>(diTile + kBr);       // [kBc][kLd]
  T *vTile = kTile + tile16(kBc, kD);                   // [kBc][kLd]
  T *qTile = vTile + tile16(kBc, kD);                   // [kBr][kLd]
  T *gTile = qTile + tile16(kBr, kD);                   // dout [kBr][kLd]
  T *qtTile = gTile + tile16(kBr, kD);                  // q^T [kD][kLdT]
  T *gtTile = qtTile + tile16(kD, kBr);                 // dout^T [kD][kLdT]
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, quad = lane % 4;
  const auto [bh, b, h, j0, queryBegin, keys, mask] = keyBlock(d, kBc);
  const int dim = static_cast<int>(d.d);
  const T *qHead = headOf(q, d.qStrides, b, h);
  const T *gHead = headOf(dout, d.doutStrides, b, h);
  stageTile<kBc, kD, T>(kTile, nullptr, headOf(k, d.kStrides, b, h),
                        d.kStrides[2], j0, keys, dim);
  stageTile<kBc, kD, T>(vTile, nullptr, headOf(v, d.vStrides, b, h),
                        d.vStrides[2], j0, keys, dim);

  const int64_t key[2] = {j0 + warp * 16 + g, j0 + warp * 16 + g + 8};
  float dkAcc[kD / 8][4], dvAcc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dkAcc[n][e] = dvAcc[n][e] = 0.0f;
  for (int64_t i0 = queryBegin; i0 < d.t; i0 += kBr) {
    const int queries = static_cast<int>(clampTo(d.t - i0, 0, kBr));
    __syncthreads(); // the previous tiles' readers are done
    stageTile<kBr, kD, T>(qTile, qtTile, qHead, d.qStrides[2], i0, queries,
                          dim);
    stageTile<kBr, kD, T>(gTile, gtTile, gHead, d.doutStrides[2], i0, queries,
                          dim);
    for (int c = threadIdx.x; c < kBr; c += kThreads16) {
      lseTile[c] = c < queries ? lseRows[bh * d.t + i0 + c] : INFINITY;
      diTile[c] = c < queries ? diRows[bh * d.t + i0 + c] : 0.0f;
    }
    __syncthreads();
    // s^T = k q^T, dP^T = v dout^T; p^T = exp(scale s^T - lse),
    // dS^T = p^T (dP^T - Di).
    float p[kBr / 8][4], ds[kBr / 8][4];
    rowProducts<T, kD, kBr>(p, kTile, kLd, warp * 16, qTile, kLd);
    rowProducts<T, kD, kBr>(ds, vTile, kLd, warp * 16, gTile, kLd);
#pragma unroll
    for (int n = 0; n < kBr / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int query = n * 8 + 2 * quad + (e & 1);
        p[n][e] = attends(d, mask, i0 + query, key[e >> 1])
                      ? expf(d.scale * p[n][e] - lseTile[query])
                      : 0.0f;
        ds[n][e] = p[n][e] * (ds[n][e] - diTile[query]);
      }
    // dv += p^T dout, dk += dS^T q (scaled at the end).
    accumulateProducts<T, kBr, kD / 8>(dvAcc, p, gtTile, kLdT);
    accumulateProducts<T, kBr, kD / 8>(dkAcc, ds, qtTile, kLdT);
  }

  T *dkHead = headOf(dk, d.dkStrides, b, h);
  T *dvHead = headOf(dv, d.dvStrides, b, h);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= d.s)
      continue;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * quad + e;
        if (c < dim) {
          dkHead[key[r] * d.dkStrides[2] + c] =
              fromFloat<T>(d.scale * dkAcc[n][2 * r + e]);
          dvHead[key[r] * d.dvStrides[2] + c] =
              fromFloat<T>(dvAcc[n][2 * r + e]);
        }
      }
  }
}

template <int kD, int kBc> constexpr int queries16Bytes() {
  return 2 * (2 * tile16(kBlockRows16, kD) + 2 * tile16(kBc, kD) +
              tile16(kD, kBc));
}

/// dq of the block's kBlockRows16 query rows of head bh, from the key tiles
/// of kBc keys they see; scores are queries x keys.
template <typename T, int kD, int kBc>
__global__ void __launch_bounds__(kThreads16)
    queriesKernel16(AttentionDesc d, const T *q, const T *k, const T *v,
                    const T *dout, const float *lseRows, const float *diRows,
                    T *dq) {
  static_assert(kD % 16 == 0 && kBc % 16 == 0);
  constexpr int kBr = kBlockRows16, kLd = kD + kPad, kLdT = kBc + kPad;
  extern __shared__ __align__(16) unsigned char shared16[];
  T *qTile = reinterpret_cast<T *>(shared16); // [kBr][kLd]
  T *gTile = qTile + tile16(kBr, kD);         // dout [kBr][kLd]
  T *kTile = gTile + tile16(kBr, kD);         // [kBc][kLd]
  T *vTile = kTile + tile16(kBc, kD);         // [kBc][kLd]
  T *ktTile = vTile + tile16(kBc, kD);        // k^T [kD][kLdT]
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, quad = lane % 4;
  const auto [bh, b, h, i0, keyEnd, rows, mask] = queryBlock(d, kBr);
  const int dim = static_cast<int>(d.d);
  const T *kHead = headOf(k, d.kStrides, b, h);
  const T *vHead = headOf(v, d.vStrides, b, h);
  stageTile<kBr, kD, T>(qTile, nullptr, headOf(q, d.qStrides, b, h),
                        d.qStrides[2], i0, rows, dim);
  stageTile<kBr, kD, T>(gTile, nullptr, headOf(dout, d.doutStrides, b, h),
                        d.doutStrides[2], i0, rows, dim);
  const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float lseR[2], diR[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lseR[r] = row[r] < d.t ? lseRows[bh * d.t + row[r]] : INFINITY;
    diR[r] = row[r] < d.t ? diRows[bh * d.t + row[r]] : 0.0f;
  }
  float dqAcc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
    dqAcc[n][0] = dqAcc[n][1] = dqAcc[n][2] = dqAcc[n][3] = 0.0f;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
    const int cols = static_cast<int>(clampTo(d.s - j0, 0, kBc));
    __syncthreads(); // the previous tiles' readers are done
    stageTile<kBc, kD, T>(kTile, ktTile, kHead, d.kStrides[2], j0, cols, dim);
    stageTile<kBc, kD, T>(vTile, nullptr, vHead, d.vStrides[2], j0, cols, dim);
    __syncthreads();
    // p = exp(scale q k^T - lse), dS = p (dout v^T - Di).
    float s[kBc / 8][4], ds[kBc / 8][4];
    rowProducts<T, kD, kBc>(s, qTile, kLd, warp * 16, kTile, kLd);
    rowProducts<T, kD, kBc>(ds, gTile, kLd, warp * 16, vTile, kLd);
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + n * 8 + 2 * quad + (e & 1);
        const float p = attends(d, mask, row[e >> 1], j)
                            ? expf(d.scale * s[n][e] - lseR[e >> 1])
                            : 0.0f;
        ds[n][e] = p * (ds[n][e] - diR[e >> 1]);
      }
    // dq += dS k (scaled at the end).
    accumulateProducts<T, kBc, kD / 8>(dqAcc, ds, ktTile, kLdT);
  }

  T *dqHead = headOf(dq, d.dqStrides, b, h);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= d.t)
      continue;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * quad + e;
        if (c < dim)
          dqHead[row[r] * d.dqStrides[2] + c] =
              fromFloat<T>(d.scale * dqAcc[n][2 * r + e]);
      }
  }
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

/// Fails unless the device has mma.sync on 16-bit floats (sm_80 and later).
void requireTensorCores(DeviceContext &ctx, int line, const char *call) {
  int major = 0, minor = 0;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                   ctx.deviceId));
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                   ctx.deviceId));
  if (major < 8) {
    char reason[128];
    std::snprintf(reason, sizeof(reason),
                  "16-bit attention needs compute capability 8.0 or newer, "
                  "the device has %d.%d",
                  major, minor);
    fail(&ctx, __FILE__, line, call, reason);
  }
}

template <typename T, int kD>
void forward16(DeviceContext &ctx, const AttentionDesc &d, const T *q,
               const T *k, const T *v, T *out, float *lse) {
  constexpr int kBc = Tiles16<kD>::kForwardKeys;
  launch(ctx, forwardKernel16<T, kD, kBc>, d.batch * d.heads,
         ceilDiv(d.t, kBlockRows16), kThreads16,
         2 * forward16Elements<kD, kBc>(), d, q, k, v, out, lse);
}

template <typename T, int kD>
void backward16(DeviceContext &ctx, const AttentionDesc &d, const T *q,
                const T *k, const T *v, const T *dout, const float *lseRows,
                const float *diRows, T *dq, T *dk, T *dv) {
  constexpr int kKeysQueries = Tiles16<kD>::kKeysQueries;
  constexpr int kQueriesKeys = Tiles16<kD>::kQueriesKeys;
  const int64_t heads = d.batch * d.heads;
  launch(ctx, keysKernel16<T, kD, kKeysQueries>, heads,
         ceilDiv(d.s, kBlockRows16), kThreads16,
         keys16Bytes<kD, kKeysQueries>(), d, q, k, v, dout, lseRows, diRows,
         dk, dv);
  launch(ctx, queriesKernel16<T, kD, kQueriesKeys>, heads,
         ceilDiv(d.t, kBlockRows16), kThreads16,
         queries16Bytes<kD, kQueriesKeys>(), d, q, k, v, dout, lseRows, diRows,
         dq);
}

template <typename T>
constexpr Attention16Type kAttention16Type =
    std::is_same_v<T, __nv_bfloat16> ? Attention16Type::Bf16
                                     : Attention16Type::Half;

template <typename T>
void attentionForward16(DeviceContext &ctx, const AttentionDesc &desc,
                        const T *q, const T *k, const T *v, T *out,
                        float *lse) {
  checkShape(ctx, desc, __FILE__, __LINE__, "cuda::attentionForward");
  if (cudnnAttentionForward(ctx, desc, kAttention16Type<T>, q, k, v, out, lse))
    return;
  requireTensorCores(ctx, __LINE__, "cuda::attentionForward");
  if (desc.d <= 64)
    forward16<T, 64>(ctx, desc, q, k, v, out, lse);
  else
    forward16<T, 128>(ctx, desc, q, k, v, out, lse);
}

template <typename T>
void attentionBackward16(DeviceContext &ctx, const AttentionDesc &desc,
                         const T *q, const T *k, const T *v, const T *out,
                         const float *lse, const T *dout, T *dq, T *dk,
                         T *dv) {
  checkShape(ctx, desc, __FILE__, __LINE__, "cuda::attentionBackward");
  if (cudnnAttentionBackward(ctx, desc, kAttention16Type<T>, q, k, v, out, lse,
                             dout, dq, dk, dv))
    return;
  requireTensorCores(ctx, __LINE__, "cuda::attentionBackward");
  float *lseRows = rowStats(ctx, desc, out, lse, dout);
  const float *diRows = lseRows ? lseRows + desc.batch * desc.heads * desc.t
                                : nullptr;
  if (desc.d <= 64)
    backward16<T, 64>(ctx, desc, q, k, v, dout, lseRows, diRows, dq, dk, dv);
  else
    backward16<T, 128>(ctx, desc, q, k, v, dout, lseRows, diRows, dq, dk, dv);
}

} // namespace

#define AUTOPAR_ATTENTION_16(T)                                                \
  void attentionForward(DeviceContext &ctx, const AttentionDesc &desc,         \
                        const T *q, const T *k, const T *v, T *out,            \
                        float *lse) {                                          \
    attentionForward16(ctx, desc, q, k, v, out, lse);                          \
  }                                                                            \
  void attentionBackward(DeviceContext &ctx, const AttentionDesc &desc,        \
                         const T *q, const T *k, const T *v, const T *out,     \
                         const float *lse, const T *dout, T *dq, T *dk,        \
                         T *dv) {                                              \
    attentionBackward16(ctx, desc, q, k, v, out, lse, dout, dq, dk, dv);       \
  }
AUTOPAR_CUDA_FOR_EACH_16BIT_TYPE(AUTOPAR_ATTENTION_16)
#undef AUTOPAR_ATTENTION_16

} // namespace autopar::rt::cuda
