//===- KernelsDataTest.cu - CUDA data movement, reductions, Device ------===//
//
// The second half of autopar-cuda-kernels-test (KernelsTest.cu has the
// first and main): dropout, gather, strided copies and scatters,
// reductions, and the CUDA Device's own methods (allocation, zeroing, the
// optimizer step, the gradient norm) against their CPU references.
//
//===----------------------------------------------------------------------===//

#include "test/cuda/KernelsTest.h"

#include "runtime/Float16.h"
#include "runtime/cpu/Math.h"
#include "runtime/support/Philox.h"
#include "runtime/support/Quantize.h"

#include <type_traits>

using namespace autopar::rt;
using namespace autopar::rt::kernels_test;

namespace {

//===----------------------------------------------------------------------===//
// Gather, strided copies, axis blocks
//===----------------------------------------------------------------------===//

void testGather(Tester &t, const std::string &name, int64_t outer,
                int64_t axisSize, int64_t innerBytes, int64_t numIndices,
                bool indices64, int64_t misalignBytes = 0) {
  std::vector<int64_t> idx(static_cast<size_t>(numIndices));
  for (int64_t &i : idx)
    i = t.randomInt(-axisSize, axisSize - 1);
  std::vector<unsigned char> idxBytes = t.indexBytes(idx, indices64);
  const size_t dataBytes = static_cast<size_t>(outer * axisSize * innerBytes);
  const size_t outBytes = static_cast<size_t>(outer * numIndices * innerBytes);
  std::vector<unsigned char> data = t.randomBytes(dataBytes + misalignBytes);
  std::vector<unsigned char> want(outBytes);
  cpu::gather(data.data() + misalignBytes, idxBytes.data(), indices64,
              want.data(), outer, axisSize, innerBytes, numIndices);
  DeviceBuffer dataD = t.upload(data), idxD = t.upload(idxBytes),
               outD = t.alloc(static_cast<int64_t>(outBytes + misalignBytes));
  gpu::gather(t.ctx, dataD.get() + misalignBytes, idxD.get(), indices64,
              outD.get() + misalignBytes, outer, axisSize, innerBytes,
              numIndices);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get() + misalignBytes, outBytes);
  t.check("gather " + name, compareBytes(got.data(), want.data(), outBytes));
}

void testGatherBackward(Tester &t, const std::string &name, int64_t outer,
                        int64_t axisSize, int64_t inner, int64_t numIndices,
                        bool indices64) {
  // Many duplicates: half the indices among three rows (one negative).
  std::vector<int64_t> idx(static_cast<size_t>(numIndices));
  std::bernoulli_distribution hot(0.5);
  for (int64_t &i : idx) {
    if (hot(t.rng)) {
      const int64_t pick = t.randomInt(0, 2);
      i = pick == 0 ? 0 : pick == 1 ? std::min<int64_t>(1, axisSize - 1) : -1;
    } else {
      i = t.randomInt(-axisSize, axisSize - 1);
    }
  }
  std::vector<unsigned char> idxBytes = t.indexBytes(idx, indices64);
  const size_t doutCount = static_cast<size_t>(outer * numIndices * inner);
  const size_t ddataCount = static_cast<size_t>(outer * axisSize * inner);
  std::vector<float> dout = t.uniform(doutCount);
  std::vector<float> want(ddataCount);
  cpu::gatherBackward(idxBytes.data(), indices64, dout.data(), want.data(),
                      outer, axisSize, inner, numIndices);
  DeviceBuffer idxD = t.upload(idxBytes), doutD = t.upload(dout);
  DeviceBuffer ddataD = t.upload(t.uniform(ddataCount)); // zeroed by the call
  gpu::gatherBackward(t.ctx, idxD.get(), indices64,
                      reinterpret_cast<const float *>(doutD.get()),
                      reinterpret_cast<float *>(ddataD.get()), outer, axisSize,
                      inner, numIndices);
  // The same additions in the same order: bit-identical.
  t.check("gatherBackward " + name,
          compareFloats(t.download<float>(ddataD.get(), ddataCount), want, 0));
}

/// Offsets [lo, hi] an index space `shape` with `strides` from `offset`
/// reaches.
void offsetRange(const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &strides, int64_t offset,
                 int64_t &lo, int64_t &hi) {
  lo = hi = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t span = (shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t p = 1;
  for (int64_t e : shape)
    p *= e;
  return p;
}

void testStridedCopy(Tester &t, const std::string &name,
                     const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &strides, int64_t offset,
                     int64_t elementBytes) {
  int64_t lo, hi;
  offsetRange(shape, strides, offset, lo, hi);
  if (lo < 0) {
    t.check("stridedCopy " + name, "bad test: negative offset");
    return;
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<unsigned char> in =
      t.randomBytes(static_cast<size_t>((hi + 1) * elementBytes));
  const size_t outBytes = static_cast<size_t>(product(shape) * elementBytes);
  std::vector<unsigned char> want(outBytes);
  cpu::stridedCopy(in.data(), want.data(), rank, shape.data(), strides.data(),
                   offset, elementBytes);
  DeviceBuffer inD = t.upload(in), outD = t.alloc(outBytes);
  gpu::stridedCopy(t.ctx, inD.get(), outD.get(), rank, shape.data(),
                   strides.data(), offset, elementBytes);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check("stridedCopy " + name,
          compareBytes(got.data(), want.data(), outBytes));
}

void testStridedScatter(Tester &t, const std::string &name, int64_t outElements,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides, int64_t offset,
                        int64_t elementBytes) {
  int64_t lo, hi;
  offsetRange(shape, strides, offset, lo, hi);
  if (lo < 0 || hi >= outElements) {
    t.check("stridedScatter " + name, "bad test: offsets out of range");
    return;
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<unsigned char> in =
      t.randomBytes(static_cast<size_t>(product(shape) * elementBytes));
  const size_t outBytes = static_cast<size_t>(outElements * elementBytes);
  // Garbage first on both sides: the scatter zeroes the rest.
  std::vector<unsigned char> want = t.randomBytes(outBytes);
  DeviceBuffer inD = t.upload(in), outD = t.upload(want);
  cpu::stridedScatter(in.data(), want.data(), outElements, rank, shape.data(),
                      strides.data(), offset, elementBytes);
  gpu::stridedScatter(t.ctx, inD.get(), outD.get(), outElements, rank,
                      shape.data(), strides.data(), offset, elementBytes);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check("stridedScatter " + name,
          compareBytes(got.data(), want.data(), outBytes));
}

void testCopyAxisBlock(Tester &t, const std::string &name, int64_t outer,
                       int64_t n, int64_t bigN, int64_t offset,
                       int64_t innerBytes, bool intoBig) {
  const size_t smallBytes = static_cast<size_t>(outer * n * innerBytes);
  const size_t bigBytes = static_cast<size_t>(outer * bigN * innerBytes);
  std::vector<unsigned char> in =
      t.randomBytes(intoBig ? smallBytes : bigBytes);
  const size_t outBytes = intoBig ? bigBytes : smallBytes;
  std::vector<unsigned char> want = t.randomBytes(outBytes);
  DeviceBuffer inD = t.upload(in), outD = t.upload(want);
  cpu::copyAxisBlock(in.data(), want.data(), outer, n, bigN, offset, innerBytes,
                     intoBig);
  gpu::copyAxisBlock(t.ctx, inD.get(), outD.get(), outer, n, bigN, offset,
                     innerBytes, intoBig);
  std::vector<unsigned char> got =
      t.download<unsigned char>(outD.get(), outBytes);
  t.check(std::string("copyAxisBlock ") + (intoBig ? "concat " : "split ") +
              name,
          compareBytes(got.data(), want.data(), outBytes));
}

} // namespace

/// dropout on a block of a logical tensor [4, 6, 40] (offsets in device
/// memory, the input read through the whole tensor's strides) and on the
/// whole tensor, against the CPU kernel: the same mask and values, exactly,
/// in float, bfloat16 and half.
template <typename T>
void testDropout(Tester &t, const std::string &type, double ratio) {
  const int64_t shape[3] = {4, 6, 40}, block[3] = {2, 3, 40};
  const int64_t offsets[3] = {2, 3, 0}, strides[3] = {240, 40, 1};
  const int64_t n = 4 * 6 * 40, m = 2 * 3 * 40;
  std::vector<T> x(n);
  std::vector<float> values = t.uniform(n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i)
    x[i] = T(values[i]);
  const RandomKey key{0x9e3779b97f4a7c15ull, 12345, 3};
  DeviceBuffer xD = t.upload(x), yD = t.alloc(n * sizeof(T));
  DeviceBuffer keyD = t.upload(std::vector<RandomKey>{key});
  DeviceBuffer offD = t.upload(std::vector<int64_t>(offsets, offsets + 3));
  const auto *keyPtr = reinterpret_cast<const RandomKey *>(keyD.get());
  for (bool whole : {true, false}) {
    DropoutBlock hostBlock{}, deviceBlock{};
    for (DropoutBlock *b : {&hostBlock, &deviceBlock}) {
      b->rank = 3;
      for (int d = 0; d < 3; ++d) {
        b->shape[d] = whole ? shape[d] : block[d];
        b->logicalShape[d] = shape[d];
        b->strides[d] = strides[d];
      }
    }
    const int64_t count = whole ? n : m;
    const int64_t first = whole ? 0 : 2 * 240 + 3 * 40;
    if (!whole)
      for (int d = 0; d < 3; ++d) {
        hostBlock.offsets[d] = &offsets[d];
        deviceBlock.offsets[d] = reinterpret_cast<const int64_t *>(offD.get()) + d;
      }
    std::vector<T> want(count);
    if constexpr (std::is_same_v<T, float>)
      cpu::dropout(x.data() + first, want.data(), hostBlock, &key, ratio, 9);
    else if constexpr (std::is_same_v<T, bf16>)
      cpu::dropout(x.data() + first, want.data(), hostBlock, &key, ratio, 9);
    else
      cpu::dropoutHalf(reinterpret_cast<const uint16_t *>(x.data()) + first,
                       reinterpret_cast<uint16_t *>(want.data()), hostBlock,
                       &key, ratio, 9);
    using Device = std::conditional_t<
        std::is_same_v<T, float>, float,
        std::conditional_t<std::is_same_v<T, bf16>, __nv_bfloat16, __half>>;
    gpu::dropout(t.ctx, reinterpret_cast<const Device *>(xD.get()) + first,
                 reinterpret_cast<Device *>(yD.get()), deviceBlock, keyPtr,
                 ratio, 9);
    std::vector<T> got = t.download<T>(yD.get(), static_cast<size_t>(count));
    t.check("dropout " + type + (whole ? " whole" : " block") + " ratio " +
                std::to_string(ratio),
            compareBytes(got.data(), want.data(), count * sizeof(T)));
  }
}

/// A quantized weight (plan quantize) dequantized on the device against
/// cpu::dequantize: NF4 (a last block shorter, an odd element count), NF4
/// with double quantization (three groups of 256 absmax, the last one
/// shorter) and INT8 per row and per column; exact.
void testDequantize(Tester &t) {
  struct Case {
    std::string name;
    int64_t rows, cols;
    std::vector<int8_t> codes;
    std::vector<uint8_t> absmax; // f32, or the double quantization's codes
    std::vector<float> state2;   // empty without double quantization
    int kind, axis;
  };
  const int64_t block = 64;
  std::vector<Case> cases;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 19}, {33, 1001}}) {
    const int64_t n = rows * cols, blocks = (n + block - 1) / block;
    std::vector<float> w = t.uniform(n, -3.0f, 3.0f);
    std::vector<uint8_t> nf4((n + 1) / 2);
    std::vector<float> absmax(blocks);
    nf4Quantize(w.data(), n, block, nf4.data(), absmax.data());
    std::vector<int8_t> codes(nf4.begin(), nf4.end());
    auto bytes = [](const std::vector<float> &v) {
      const auto *p = reinterpret_cast<const uint8_t *>(v.data());
      return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
    };
    if (rows == 7) {
      cases.push_back({"nf4", rows, cols, codes, bytes(absmax), {}, 0, 0});
      for (int axis : {0, 1}) {
        std::vector<int8_t> q(n);
        std::vector<float> scales(axis ? cols : rows);
        int8Quantize(w.data(), rows, cols, axis, q.data(), scales.data());
        cases.push_back({"int8 axis " + std::to_string(axis), rows, cols, q,
                         bytes(scales), {}, 1, axis});
      }
      continue;
    }
    std::vector<uint8_t> qabsmax(blocks);
    std::vector<float> state2(1 + (blocks + kDoubleQuantBlock - 1) /
                                      kDoubleQuantBlock);
    doubleQuantize(absmax.data(), blocks, qabsmax.data(), state2.data());
    cases.push_back({"nf4 double quant", rows, cols, codes, qabsmax, state2,
                     0, 0});
  }
  for (const Case &c : cases) {
    const int64_t n = c.rows * c.cols;
    const float *state2 = c.state2.empty() ? nullptr : c.state2.data();
    std::vector<float> want(n);
    cpu::dequantize(c.codes.data(), c.absmax.data(), state2, want.data(),
                    c.rows, c.cols, c.kind, block, c.axis);
    DeviceBuffer codesD = t.upload(c.codes), absmaxD = t.upload(c.absmax);
    DeviceBuffer state2D = t.upload(c.state2.empty() ? std::vector<float>{0}
                                                     : c.state2);
    DeviceBuffer outD = t.alloc(n * sizeof(float));
    gpu::dequantize(t.ctx, reinterpret_cast<const int8_t *>(codesD.get()),
                    absmaxD.get(),
                    state2 ? reinterpret_cast<const float *>(state2D.get())
                           : nullptr,
                    reinterpret_cast<float *>(outD.get()), c.rows, c.cols,
                    c.kind, block, c.axis);
    std::vector<float> got = t.download<float>(outD.get(), n);
    t.check("dequantize " + c.name,
            compareBytes(got.data(), want.data(), n * sizeof(float)));
  }
}

/// IEEE half held as its bits on the host (cpu::dropoutHalf).
struct HalfBits {
  uint16_t bits;
  HalfBits() = default;
  explicit HalfBits(float f) : bits(halfBits(f)) {}
};

void kernels_test::testDataMovement(Tester &t) {
  testDequantize(t);
  testDropout<float>(t, "f32", 0.1);
  testDropout<float>(t, "f32", 0.75);
  testDropout<bf16>(t, "bf16", 0.1);
  testDropout<HalfBits>(t, "f16", 0.3);
  testGather(t, "embedding int64 768 floats", 1, 1000, 768 * 4, 300, true);
  testGather(t, "embedding int32 768 floats", 1, 1000, 768 * 4, 300, false);
  testGather(t, "3-byte rows int32", 3, 17, 3, 11, false);
  testGather(t, "int64 elements x5", 2, 9, 40, 13, true);
  testGather(t, "2-byte rows", 4, 6, 2, 25, true);
  testGather(t, "misaligned 6-byte rows", 2, 8, 6, 9, false, 2);
  testGather(t, "16-byte words", 2, 50, 64, 100, false);

  testGatherBackward(t, "1x1000x64 int64 5000 indices", 1, 1000, 64, 5000,
                     true);
  testGatherBackward(t, "3x7x5 int32 40 indices", 3, 7, 5, 40, false);
  testGatherBackward(t, "1x50257x16 int32 2048 indices", 1, 50257, 16, 2048,
                     false);
  testGatherBackward(t, "2x9x1 int64 100 indices", 2, 9, 1, 100, true);
  testGatherBackward(t, "axis 1 int32", 2, 1, 3, 10, false);
  testGatherBackward(t, "no indices", 2, 5, 3, 0, true);

  testStridedCopy(t, "rank 0", {}, {}, 5, 4);
  testStridedCopy(t, "transpose 3x4x5 -> 5x3x4", {5, 3, 4}, {1, 20, 5}, 0, 4);
  testStridedCopy(t, "reverse 4x6 2-byte", {4, 6}, {-6, -1}, 23, 2);
  testStridedCopy(t, "step slice 8-byte", {3, 5}, {20, 3}, 2, 8);
  testStridedCopy(t, "broadcast 1-byte", {4, 3}, {0, 1}, 1, 1);
  testStridedCopy(t, "rank 8", {2, 1, 3, 2, 1, 2, 3, 2},
                  {1, 144, 2, 6, 144, 12, 24, 72}, 0, 4);
  testStridedCopy(t, "transpose 257x1031", {257, 1031}, {1, 257}, 0, 4);
  testStridedCopy(t, "contiguous rows 8-byte", {7, 33}, {40, 1}, 3, 8);

  testStridedScatter(t, "slice 3x4 into 5x10", 50, {3, 4}, {10, 1}, 12, 4);
  testStridedScatter(t, "negative step 2-byte", 50, {4, 3}, {-10, 3}, 31, 2);
  testStridedScatter(t, "stride 0 last wins 8-byte", 20, {3, 4}, {0, 2}, 1, 8);
  testStridedScatter(t, "rank 0 1-byte", 9, {}, {}, 7, 1);
  testStridedScatter(t, "64x129 step 2", 64 * 300, {64, 129}, {300, 2}, 5, 4);

  for (bool intoBig : {true, false}) {
    testCopyAxisBlock(t, "7x3 of 10 at 4, 20 bytes", 7, 3, 10, 4, 20, intoBig);
    testCopyAxisBlock(t, "5x2 of 5 at 3, 3 bytes", 5, 2, 5, 3, 3, intoBig);
    testCopyAxisBlock(t, "1x100 of 300 at 200, 64 bytes", 1, 100, 300, 200, 64,
                      intoBig);
    testCopyAxisBlock(t, "9x1 of 4 at 0, 8 bytes", 9, 1, 4, 0, 8, intoBig);
  }

  std::vector<unsigned char> bytes = t.randomBytes(1001);
  DeviceBuffer src = t.upload(bytes), dst = t.alloc(1001);
  gpu::copy(t.ctx, dst.get(), src.get(), 1001);
  std::vector<unsigned char> got = t.download<unsigned char>(dst.get(), 1001);
  t.check("copy 1001 bytes", compareBytes(got.data(), bytes.data(), 1001));
}

namespace {

//===----------------------------------------------------------------------===//
// Reductions and accumulation
//===----------------------------------------------------------------------===//

void testReduce(Tester &t, cpu::ReduceKind kind,
                const std::vector<int64_t> &shape,
                const std::vector<bool> &reducedFlags, bool withNaN = false) {
  const char *kindName = kind == cpu::ReduceKind::Sum    ? "sum"
                         : kind == cpu::ReduceKind::Mean ? "mean"
                                                         : "max";
  std::string name = std::string("reduce ") + kindName + " [";
  for (size_t d = 0; d < shape.size(); ++d)
    name += (d ? "," : "") + std::to_string(shape[d]) +
            (reducedFlags[d] ? "r" : "");
  name += "]";
  if (withNaN)
    name += " with NaN";
  const size_t count = static_cast<size_t>(product(shape));
  std::vector<float> in = t.uniform(count, -2.0f, 2.0f);
  if (withNaN)
    in[count / 3] = std::numeric_limits<float>::quiet_NaN();
  bool reduced[cpu::kMaxRank] = {};
  int64_t outCount = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    reduced[d] = reducedFlags[d];
    if (!reduced[d])
      outCount *= shape[d];
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<float> want(static_cast<size_t>(outCount));
  cpu::reduce(kind, in.data(), want.data(), rank, shape.data(), reduced);
  DeviceBuffer inD = t.upload(in), outD = t.alloc(outCount * 4);
  gpu::reduce(t.ctx, kind, reinterpret_cast<const float *>(inD.get()),
              reinterpret_cast<float *>(outD.get()), rank, shape.data(),
              reduced);
  // The max is exact; sums accumulate in double on both sides.
  t.check(name, compareFloats(t.download<float>(outD.get(), want.size()), want,
                              kind == cpu::ReduceKind::Max ? 0.0 : kTol));
}

/// A 16-bit reduction (bf16 or IEEE half in and out) against cpu::reduce
/// on the same 16-bit values in float, its result rounded to the type:
/// equal, or one rounding apart where the f32 reference rounded first.
template <typename T>
void testReduce16(Tester &t, Float16Kind kind, cpu::ReduceKind reduceKind,
                  const std::vector<int64_t> &shape,
                  const std::vector<bool> &reducedFlags) {
  const size_t count = static_cast<size_t>(product(shape));
  std::vector<uint16_t> bits;
  std::vector<float> in = rounded16(t, kind, count, -2.0f, 2.0f, bits);
  bool reduced[cpu::kMaxRank] = {};
  int64_t outCount = 1;
  std::string name =
      format("reduce %s %d [", kind == Float16Kind::BF16 ? "bf16" : "f16",
             static_cast<int>(reduceKind));
  for (size_t d = 0; d < shape.size(); ++d) {
    reduced[d] = reducedFlags[d];
    if (!reduced[d])
      outCount *= shape[d];
    name +=
        (d ? "," : "") + std::to_string(shape[d]) + (reduced[d] ? "r" : "");
  }
  const int rank = static_cast<int>(shape.size());
  std::vector<float> want(static_cast<size_t>(outCount));
  cpu::reduce(reduceKind, in.data(), want.data(), rank, shape.data(), reduced);
  for (float &w : want)
    w = float16Value(kind, float16Bits(kind, w));
  DeviceBuffer inD = t.upload(bits), outD = t.alloc(outCount * 2);
  gpu::reduce(t.ctx, reduceKind, reinterpret_cast<const T *>(inD.get()),
              reinterpret_cast<T *>(outD.get()), rank, shape.data(), reduced);
  const double ulp = kind == Float16Kind::BF16 ? 0x1p-8 : 0x1p-11;
  t.check(name + "]", compareFloats(download16(t, kind, outD, want.size()),
                                    want, ulp));
}

} // namespace

void kernels_test::testReductions(Tester &t) {
  using K = cpu::ReduceKind;
  for (K k : {K::Sum, K::Mean, K::Max}) {
    testReduce16<__nv_bfloat16>(t, Float16Kind::BF16, k, {4096, 768},
                                {true, false});
    testReduce16<__half>(t, Float16Kind::Half, k, {37, 53}, {false, true});
    testReduce16<__nv_bfloat16>(t, Float16Kind::BF16, k, {4, 5, 6},
                                {true, false, true});
  }
  testReduce(t, K::Sum, {37, 53}, {true, false});
  testReduce(t, K::Mean, {37, 53}, {false, true});
  testReduce(t, K::Max, {37, 53}, {true, false}, true);
  testReduce(t, K::Max, {37, 53}, {false, true}, true);
  for (K k : {K::Sum, K::Mean, K::Max})
    testReduce(t, k, {100000, 3}, {true, false});
  testReduce(t, K::Max, {100000, 3}, {true, false}, true);
  testReduce(t, K::Sum, {100000, 5}, {false, true});
  testReduce(t, K::Max, {100000, 5}, {false, true}, true);
  testReduce(t, K::Max, {3, 100000}, {false, true});
  testReduce(t, K::Mean, {3, 100000}, {false, true});
  testReduce(t, K::Sum, {4, 5, 6}, {true, false, true});
  testReduce(t, K::Mean, {4, 5, 6}, {false, true, false});
  testReduce(t, K::Max, {4, 5, 6}, {false, true, false});
  testReduce(t, K::Sum, {2, 1, 3, 1, 4}, {true, true, false, false, true});
  testReduce(t, K::Mean, {6, 7}, {true, true});
  testReduce(t, K::Sum, {1000003}, {true});
  testReduce(t, K::Sum, {1, 1}, {true, false});
  testReduce(t, K::Sum, {8, 4096}, {true, false});
  testReduce(t, K::Sum, {2, 3, 4, 5, 6, 7, 2, 3},
             {false, true, false, true, true, false, true, false});

  const int64_t n = 1000003;
  for (bool accumulate : {false, true}) {
    std::vector<float> dst = t.uniform(n), src = t.uniform(n);
    DeviceBuffer dstD = t.upload(dst), srcD = t.upload(src);
    cpu::accumulateInto(dst.data(), src.data(), n, 0.37f, accumulate);
    gpu::accumulateInto(t.ctx, reinterpret_cast<float *>(dstD.get()),
                        reinterpret_cast<const float *>(srcD.get()), n, 0.37f,
                        accumulate);
    t.check(std::string("accumulateInto ") +
                (accumulate ? "accumulate" : "overwrite"),
            compareFloats(t.download<float>(dstD.get(), n), dst, 1e-6));
  }
}

namespace {

//===----------------------------------------------------------------------===//
// Device: memory and optimizer
//===----------------------------------------------------------------------===//

/// Host and device copies of parameters, gradients and states.
struct OptimizerState {
  std::vector<int64_t> sizes;
  std::vector<std::vector<float>> hostParam, hostGrad, hostS0, hostS1;
  std::vector<DeviceBuffer> devParam, devGrad, devS0, devS1;
  std::vector<ParamSlice> hostSlices, devSlices;
};

OptimizerState makeOptimizerState(Tester &t, int numStates) {
  OptimizerState s;
  s.sizes = {1000, 70001, 5, 0, 131072};
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const size_t n = static_cast<size_t>(s.sizes[k]);
    s.hostParam.push_back(t.uniform(n));
    s.hostGrad.push_back(t.uniform(n));
    s.hostS0.push_back(t.uniform(n, 0.0f, 0.1f));
    s.hostS1.push_back(t.uniform(n, 0.0f, 0.01f));
  }
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    s.devParam.push_back(t.upload(s.hostParam[k]));
    s.devGrad.push_back(t.upload(s.hostGrad[k]));
    s.devS0.push_back(t.upload(s.hostS0[k]));
    s.devS1.push_back(t.upload(s.hostS1[k]));
  }
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const bool decay = k % 2 == 0;
    s.hostSlices.push_back({s.hostParam[k].data(), s.hostGrad[k].data(),
                            numStates > 0 ? s.hostS0[k].data() : nullptr,
                            numStates > 1 ? s.hostS1[k].data() : nullptr,
                            s.sizes[k], decay});
    auto f = [](DeviceBuffer &b) { return reinterpret_cast<float *>(b.get()); };
    s.devSlices.push_back({f(s.devParam[k]), f(s.devGrad[k]),
                           numStates > 0 ? f(s.devS0[k]) : nullptr,
                           numStates > 1 ? f(s.devS1[k]) : nullptr, s.sizes[k],
                           decay});
  }
  return s;
}

/// Empty when every device tensor equals its host copy bit for bit.
std::string compareOptimizerState(Tester &t, OptimizerState &s, int numStates) {
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const size_t n = static_cast<size_t>(s.sizes[k]);
    const size_t bytes = n * sizeof(float);
    std::string e =
        compareBytes(t.download<float>(s.devParam[k].get(), n).data(),
                     s.hostParam[k].data(), bytes);
    if (e.empty())
      e = compareBytes(t.download<float>(s.devGrad[k].get(), n).data(),
                       s.hostGrad[k].data(), bytes);
    if (e.empty() && numStates > 0)
      e = compareBytes(t.download<float>(s.devS0[k].get(), n).data(),
                       s.hostS0[k].data(), bytes);
    if (e.empty() && numStates > 1)
      e = compareBytes(t.download<float>(s.devS1[k].get(), n).data(),
                       s.hostS1[k].data(), bytes);
    if (!e.empty())
      return "tensor " + std::to_string(k) + ": " + e;
  }
  return "";
}

void testOptimizer(Tester &t, const std::string &name,
                   const OptimizerConfig &config) {
  const int numStates = numStateBuffers(config);
  OptimizerState s = makeOptimizerState(t, numStates);
  std::string error;
  for (int64_t step = 1; step <= 3 && error.empty(); ++step) {
    if (step > 1) {
      // Fresh gradients on both sides.
      for (size_t k = 0; k < s.sizes.size(); ++k) {
        s.hostGrad[k] = t.uniform(s.hostGrad[k].size());
        s.hostSlices[k].grad = s.hostGrad[k].data();
        t.dev.upload(s.devGrad[k].get(), s.hostGrad[k].data(),
                     static_cast<int64_t>(s.hostGrad[k].size() * 4));
      }
    }
    const double lr = 1e-3 * static_cast<double>(step);
    optimizerStep(config, s.hostSlices, step, lr);
    t.dev.optimizerStep(config, s.devSlices, step, lr);
    error = compareOptimizerState(t, s, numStates);
    if (!error.empty())
      error = "step " + std::to_string(step) + ": " + error;
  }
  t.check("optimizerStep " + name, error);
}

/// Mixed precision on the device: 16-bit gradients (gradLow), an f32
/// master, the rounded 16-bit parameter (paramLow) and a gradient
/// multiplier, against the host optimizer bit for bit; and the squared norm
/// of 16-bit gradients.
void testOptimizer16(Tester &t, Float16Kind kind,
                     const OptimizerConfig &config) {
  const int64_t n = 70001;
  const size_t count = static_cast<size_t>(n);
  std::vector<float> master = t.uniform(count), s0(count, 0.0f),
                     s1(count, 0.0f);
  std::vector<uint16_t> grad(count), param(count, 0);
  for (size_t i = 0; i < count; ++i)
    grad[i] = float16Bits(kind, 0.01f * t.uniform(1)[0]);
  DeviceBuffer dMaster = t.upload(master), dS0 = t.upload(s0),
               dS1 = t.upload(s1), dGrad = t.upload(grad),
               dParam = t.upload(param);
  auto slice = [&](float *m, uint16_t *g, uint16_t *p, float *a, float *b) {
    ParamSlice sl{m, nullptr, a, b, n, true};
    sl.gradLow = g;
    sl.paramLow = p;
    sl.lowKind = kind;
    return sl;
  };
  auto f = [](DeviceBuffer &b) { return reinterpret_cast<float *>(b.get()); };
  auto u = [](DeviceBuffer &b) { return reinterpret_cast<uint16_t *>(b.get()); };
  std::vector<ParamSlice> host = {
      slice(master.data(), grad.data(), param.data(), s0.data(), s1.data())};
  std::vector<ParamSlice> dev = {
      slice(f(dMaster), u(dGrad), u(dParam), f(dS0), f(dS1))};
  const char *name = kind == Float16Kind::BF16 ? "bf16" : "f16";
  std::string e;
  for (int64_t step = 1; step <= 3 && e.empty(); ++step) {
    optimizerStep(config, host, step, 1e-3, 0.375f);
    t.dev.optimizerStep(config, dev, step, 1e-3, 0.375f);
    e = compareBytes(t.download<float>(dMaster.get(), count).data(),
                     master.data(), count * 4);
    if (e.empty())
      e = compareBytes(t.download<uint16_t>(dParam.get(), count).data(),
                       param.data(), count * 2);
    if (e.empty())
      e = compareBytes(t.download<float>(dS0.get(), count).data(), s0.data(),
                       count * 4);
  }
  t.check(format("optimizerStep %s %s", name,
                 config.kind == OptimizerKind::AdamW ? "adamw" : "sgd"),
          e);
  const double want = gradSquaredSum(host), got = t.dev.gradSquaredSum(dev);
  t.check(format("gradSquaredSum %s", name),
          std::fabs(got - want) <= 1e-12 * std::fabs(want)
              ? ""
              : format("got %.17g, want %.17g", got, want));
}

} // namespace

void kernels_test::testDevice(Tester &t) {
  {
    DeviceBuffer b = t.alloc(4099);
    std::vector<unsigned char> got = t.download<unsigned char>(b.get(), 4099);
    std::vector<unsigned char> zeros(4099, 0);
    std::string e = compareBytes(got.data(), zeros.data(), 4099);
    std::vector<unsigned char> junk = t.randomBytes(4099);
    t.dev.upload(b.get(), junk.data(), 4099);
    t.dev.zero(b.get() + 100, 3000);
    std::memset(junk.data() + 100, 0, 3000);
    got = t.download<unsigned char>(b.get(), 4099);
    if (e.empty())
      e = compareBytes(got.data(), junk.data(), 4099);
    t.check("device allocate zeroes, upload, zero, download", e);
  }

  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::AdamW;
  adamw.weightDecay = 0.1;
  testOptimizer(t, "adamw", adamw);
  OptimizerConfig adamwNoDecay = adamw;
  adamwNoDecay.weightDecay = 0.0;
  adamwNoDecay.beta1 = 0.8;
  adamwNoDecay.eps = 1e-6;
  testOptimizer(t, "adamw no weight decay", adamwNoDecay);
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.weightDecay = 0.01;
  testOptimizer(t, "sgd", sgd);
  OptimizerConfig momentum = sgd;
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  testOptimizer(t, "sgd momentum dampening", momentum);
  OptimizerConfig nesterov = sgd;
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  testOptimizer(t, "sgd nesterov", nesterov);
  for (Float16Kind kind : {Float16Kind::BF16, Float16Kind::Half}) {
    testOptimizer16(t, kind, adamw);
    testOptimizer16(t, kind, momentum);
  }

  // Norm and clipping.
  OptimizerState s = makeOptimizerState(t, 0);
  const double hostSum = gradSquaredSum(s.hostSlices);
  const double devSum = t.dev.gradSquaredSum(s.devSlices);
  t.check("gradSquaredSum",
          std::fabs(devSum - hostSum) <= 1e-12 * std::fabs(hostSum)
              ? ""
              : format("got %.17g, want %.17g", devSum, hostSum));
  // A clipped step: the coefficient is the update's gradient multiplier.
  OptimizerConfig clip;
  clip.kind = OptimizerKind::Sgd;
  clip.maxGradNorm = 0.5;
  float coef = 0;
  std::string e;
  if (!clipCoefficient(clip, std::sqrt(hostSum), coef) || !(coef < 1.0f))
    e = "bad test: no clipping";
  optimizerStep(clip, s.hostSlices, 1, 1e-2, coef);
  t.dev.optimizerStep(clip, s.devSlices, 1, 1e-2, coef);
  if (e.empty())
    e = compareOptimizerState(t, s, 0);
  t.check("optimizerStep with the clipping coefficient", e);
}
