//===- TensorLayout.h - where a tensor's elements lie -----------*- C++ -*-===//
//
// Functions of a tensor's TensorInfo (runtime/Model.h) alone: the types it
// is stored and communicated in (a float32 master and its 16-bit copy),
// the zero padding of a padded vocabulary, the block of the logical tensor
// that tensor parallelism leaves this rank, and the pieces of a shard
// outside frozen rows. The tensor store (runtime/train/TensorStore.h)
// moves tensors between their full and their stored forms with them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAIN_TENSORLAYOUT_H
#define AUTOPAR_RUNTIME_TRAIN_TENSORLAYOUT_H

#include "runtime/Float16.h"
#include "runtime/Model.h"
#include "runtime/comm/Comm.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace autopar::rt::train {

/// The float32 master of a mixed-precision tensor, described as a tensor.
autopar::rt::TensorInfo masterInfo(const autopar::rt::TensorInfo &ti);

/// How a tensor travels in collectives: as stored, and its gradient.
autopar::rt::CommType commType(const autopar::rt::TensorInfo &ti);
autopar::rt::CommType gradCommType(const autopar::rt::TensorInfo &ti);

/// The 16-bit format of a mixed-precision tensor.
autopar::rt::Float16Kind lowKind(const autopar::rt::TensorInfo &ti);

/// The 16-bit copies (rounded) of a master's `numElements` floats.
std::vector<uint16_t> toLow(const autopar::rt::TensorInfo &ti,
                            const char *floats, int64_t numElements);

/// Whether tensor parallelism splits `ti`: this rank stores a block of the
/// logical tensor.
bool isSplit(const autopar::rt::TensorInfo &ti);

/// Whether the logical tensor of `ti` is its file tensor padded with zeros
/// (a vocabulary padded to a multiple of tp).
bool isPadded(const autopar::rt::TensorInfo &ti);

/// Copies the file tensor (ti.fileShape) at `from` into the leading block
/// of the logical tensor (ti.logicalShape, its padding already zero) at
/// `to`, or, with `back`, that block of the logical tensor at `from` to
/// the file tensor at `to`.
void copyPadded(const autopar::rt::TensorInfo &ti, int64_t eb, const char *from,
                char *to, bool back);

/// This rank's block (`eb`-byte elements) of the logical tensor `logical`
/// (host memory) into `local`.
void takeBlock(const autopar::rt::TensorInfo &ti, int64_t eb,
               const char *logical, char *local,
               const autopar::rt::Communicator &comm);

/// The ranges (from `begin`, as [from, to) pairs) of this rank's elements
/// [begin, begin + count) of `ti` (its block) outside frozen rows: the
/// whole range when none are frozen, nothing when count is 0. Frozen rows
/// are rows of the file tensor's dim 0: runs of the logical tensor's
/// elements, or, when it is the file's padded, rows of its dim 0.
std::vector<std::pair<int64_t, int64_t>>
trainedRanges(const autopar::rt::TensorInfo &ti, int64_t begin, int64_t count,
              const autopar::rt::Communicator &comm);

} // namespace autopar::rt::train

#endif // AUTOPAR_RUNTIME_TRAIN_TENSORLAYOUT_H
