//===- TensorLayout.cpp - where a tensor's elements lie -------------------===//
//
// A tensor-parallel block is walked as runs of its innermost dim, which are
// contiguous in the block and in the logical tensor alike (BlockRuns).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TensorLayout.h"

#include <algorithm>
#include <cstring>

namespace autopar::rt::train {

namespace {

/// The element type of a stored tensor for the communicator (TensorProto
/// types: 16 bfloat16, 10 float16).
autopar::rt::CommType commTypeOf(int32_t onnxType) {
  return onnxType == 16   ? autopar::rt::CommType::BF16
         : onnxType == 10 ? autopar::rt::CommType::F16
                          : autopar::rt::CommType::F32;
}

/// Where this rank's block of `ti` (ti.shape) lies in the logical tensor
/// (ti.logicalShape): dim d starts at the rank's position in the group of
/// splitAxes[d] times the block's size. Runs of the innermost dim are
/// contiguous on both sides.
class BlockRuns {
public:
  BlockRuns(const autopar::rt::TensorInfo &ti,
            const autopar::rt::Communicator &comm)
      : ti(ti), run(ti.rank ? ti.shape[ti.rank - 1] : 1) {
    for (int d = ti.rank - 1; d >= 0; --d) {
      offset[d] =
          ti.splitAxes[d] ? comm.groupIndex(ti.splitAxes[d]) * ti.shape[d] : 0;
      stride[d] = d == ti.rank - 1 ? 1 : stride[d + 1] * ti.logicalShape[d + 1];
    }
  }
  /// Elements per run.
  int64_t runLength() const { return run; }
  /// The logical index of the first element of run `q` of the block.
  int64_t logicalStart(int64_t q) const {
    const int r = ti.rank;
    int64_t at = r ? offset[r - 1] : 0;
    for (int d = r - 2; d >= 0; --d) {
      at += (q % ti.shape[d] + offset[d]) * stride[d];
      q /= ti.shape[d];
    }
    return at;
  }

private:
  const autopar::rt::TensorInfo &ti;
  int64_t run;
  int64_t offset[8] = {}, stride[8] = {};
};

} // namespace

autopar::rt::TensorInfo masterInfo(const autopar::rt::TensorInfo &ti) {
  autopar::rt::TensorInfo m = ti;
  m.onnxType = 1;
  m.elementBytes = 4;
  return m;
}

autopar::rt::CommType commType(const autopar::rt::TensorInfo &ti) {
  return commTypeOf(ti.onnxType);
}
autopar::rt::CommType gradCommType(const autopar::rt::TensorInfo &ti) {
  return commTypeOf(ti.gradOnnxType);
}

autopar::rt::Float16Kind lowKind(const autopar::rt::TensorInfo &ti) {
  return ti.onnxType == 10 ? autopar::rt::Float16Kind::Half
                           : autopar::rt::Float16Kind::BF16;
}

std::vector<uint16_t> toLow(const autopar::rt::TensorInfo &ti,
                            const char *floats, int64_t numElements) {
  std::vector<uint16_t> out(static_cast<size_t>(numElements));
  for (int64_t i = 0; i < numElements; ++i) {
    float f;
    std::memcpy(&f, floats + 4 * i, 4);
    out[i] = autopar::rt::float16Bits(lowKind(ti), f);
  }
  return out;
}

bool isSplit(const autopar::rt::TensorInfo &ti) {
  for (int d = 0; d < ti.rank; ++d)
    if (ti.splitAxes[d])
      return true;
  return false;
}

bool isPadded(const autopar::rt::TensorInfo &ti) {
  return ti.fileElements != ti.logicalElements;
}

void copyPadded(const autopar::rt::TensorInfo &ti, int64_t eb, const char *from,
                char *to, bool back) {
  const int r = ti.fileRank;
  const int64_t run = ti.fileShape[r - 1] * eb;
  const int64_t rows = run ? ti.fileElements * eb / run : 0;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rest = row, at = 0, stride = ti.logicalShape[r - 1];
    for (int d = r - 2; d >= 0; --d) {
      at += rest % ti.fileShape[d] * stride;
      rest /= ti.fileShape[d];
      stride *= ti.logicalShape[d];
    }
    if (back)
      std::memcpy(to + row * run, from + at * eb, run);
    else
      std::memcpy(to + at * eb, from + row * run, run);
  }
}

void takeBlock(const autopar::rt::TensorInfo &ti, int64_t eb,
               const char *logical, char *local,
               const autopar::rt::Communicator &comm) {
  const BlockRuns runs(ti, comm);
  const int64_t run = runs.runLength();
  const int64_t rows = run ? ti.numElements / run : 0;
  for (int64_t row = 0; row < rows; ++row)
    std::memcpy(local + row * run * eb, logical + runs.logicalStart(row) * eb,
                run * eb);
}

std::vector<std::pair<int64_t, int64_t>>
trainedRanges(const autopar::rt::TensorInfo &ti, int64_t begin, int64_t count,
              const autopar::rt::Communicator &comm) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  auto add = [&](int64_t from, int64_t to) {
    if (!ranges.empty() && ranges.back().second == from)
      ranges.back().second = to;
    else
      ranges.emplace_back(from, to);
  };
  if (count <= 0)
    return ranges;
  if (!ti.numFrozenRanges || ti.fileElements == 0) {
    add(0, count);
    return ranges;
  }
  const BlockRuns runs(ti, comm);
  const int64_t rowElements = isPadded(ti)
                                  ? ti.logicalElements / ti.logicalShape[0]
                                  : ti.fileElements / ti.fileShape[0];
  const int64_t *frozen = ti.frozenRows,
                *frozenEnd = ti.frozenRows + 2 * ti.numFrozenRanges;
  // Each run of the block is cut where a row of the file tensor ends.
  const int64_t run = runs.runLength();
  for (int64_t at = begin, end = begin + count; at < end;) {
    const int64_t q = at / run;
    const int64_t logical = runs.logicalStart(q) + at % run;
    const int64_t next = std::min(
        {end, (q + 1) * run, at + rowElements - logical % rowElements});
    // Frozen when the first bound above the row is a range's end.
    if ((std::upper_bound(frozen, frozenEnd, logical / rowElements) - frozen) %
            2 ==
        0)
      add(at - begin, next - begin);
    at = next;
  }
  return ranges;
}

} // namespace autopar::rt::train
