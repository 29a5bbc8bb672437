//===- TensorStore.h - where a rank keeps its tensors -----------*- C++ -*-===//
//
// Where this rank keeps the model's tensors: its parameter blob (with
// pipeline parallelism, its stages' part of it), the gradients, the
// optimizer state and the float32 masters of mixed precision, each
// trainable tensor's ZeRO shard and the slices the optimizer updates.
// Whole tensors come in (initial weights, checkpoints) and go out
// (checkpoints, the ONNX export) through host memory as the model's
// logical tensors, whatever the plan: this rank keeps its part (a ZeRO
// shard, a tensor-parallel block, a padded vocabulary's rows) and gathers
// the whole from every rank's parts (collective).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAIN_TENSORSTORE_H
#define AUTOPAR_RUNTIME_TRAIN_TENSORSTORE_H

#include "runtime/Device.h"
#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/comm/Comm.h"
#include "runtime/offload/ParamSwap.h"
#include "runtime/offload/SwapFile.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/optim/Optimizer.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace autopar::rt::train {

/// How this rank stores one trainable tensor and its optimizer state.
struct Shard {
  const autopar::rt::TensorInfo *tensor;
  /// Elements of a ZeRO flat shard (numElements when not sharded).
  int64_t chunk;
  /// First element of this rank's shard and how many real (unpadded)
  /// elements it has.
  int64_t begin, count;
};

/// A buffer of device memory, or of host memory under ZeRO-Offload.
struct Storage {
  DeviceBuffer device;
  Buffer host;
  char *get() const { return host ? host.get() : device.get(); }
  bool onHost() const { return host != nullptr; }
  explicit operator bool() const { return get() != nullptr; }
};

/// This rank's tensors. The trainer and the pipeline executor read the
/// buffers (public below) directly: the step functions take them.
class TensorStore {
public:
  TensorStore(const autopar::rt::ModelInfo &info,
              autopar::rt::Communicator &comm, autopar::rt::Device &device,
              const autopar::rt::OptimizerConfig &config);
  /// Allocates this rank's parameters, gradients, optimizer state and
  /// masters, and loads the initial weights (weights.bin; a LoRA A drawn
  /// from `seed`, TensorInfo::init).
  Status setUp(uint64_t seed);

  /// Pipeline parallelism: whether tensor `t`'s gradient is another
  /// pipeline rank's alone (no stage of this rank reads it, and it is not
  /// summed over pp): this rank neither reduces nor updates it.
  bool othersTensor(int t) const;
  /// Where tensor `t` is stored: in the whole blob while one is held
  /// (wholeParameters), else in this rank's (null: not there).
  char *paramAt(int t) const;

  /// Host copies of every tensor a checkpoint holds, full (gathered from
  /// the shards where needed; with `gather` false, buffers to load into);
  /// `full` owns the buffers that are not the device memory itself.
  std::vector<autopar::rt::TensorRef>
  checkpointTensors(std::vector<Buffer> &full, bool gather);
  /// The tensors of checkpointTensors(full, false), filled by a load, into
  /// this rank's memory (each one's part of it).
  void storeCheckpointTensors(const std::vector<autopar::rt::TensorRef> &refs);
  /// Host copies of every parameter an ONNX export holds, frozen ones too
  /// (as checkpointTensors with `gather`).
  std::vector<autopar::rt::ExportTensor>
  exportTensors(std::vector<Buffer> &full);
  /// ZeRO-Offload: the update of slices[k] on the host (its gradient comes
  /// down, its parameter goes back up).
  void hostUpdate(size_t k, int64_t stepCount, double lr, float gradScale);
  /// ZeRO-Infinity (ModelInfo::nvmePath): every shard's update on the host,
  /// its state streamed from and back to the swap file in chunks (the next
  /// chunk read while one is updated), the same arithmetic as hostUpdate.
  Status swapUpdate(int64_t stepCount, double lr, float gradScale);
  /// ZeRO-Infinity: holds every shard's state in host memory (`read`: as
  /// the swap file has it) for what reads or writes all of it (a save, a
  /// load, an export); or writes it back (`write`) and frees it.
  Status swapIn(bool read);
  Status swapOut(bool write);
  /// ZeRO-Infinity: the swap file (null without NVMe offload).
  const autopar::rt::SwapFile *swapFile() const { return swap.get(); }
  /// ZeRO-Infinity's parameter offload (ModelInfo::nvmeParams): where the
  /// steps read the ZeRO-3 parameter shards (StepIO::paramSource); null
  /// when they are in the parameter blob.
  autopar::rt::ParamSwap *paramSource() const {
    return paramSwap && !paramSwap->empty() ? paramSwap.get() : nullptr;
  }
  /// Pipeline parallelism: allocates (`have`) or frees the optimizer state
  /// and masters of the tensors only other pipeline ranks' stages read
  /// (othersTensor), which a rank holds only while it saves, exports or
  /// loads weights.
  Status haveOthersState(bool have);
  /// Pipeline parallelism: every rank takes each trainable tensor (and,
  /// `withState`, its master and optimizer state) from its owner, the first
  /// pipeline rank whose stages read it (before a save, an export or an
  /// evaluation).
  Status syncPipelineTensors(bool withState = true);
  /// Pipeline parallelism: holds (`have`) a whole parameter blob, with
  /// this rank's tensors copied in, for what reads or writes every tensor
  /// (a load, a save, an export, an evaluation); or copies this rank's
  /// tensors back into its own blob and frees it.
  Status wholeParameters(bool have);

  /// This rank's parameter blob; with pipeline parallelism, the whole
  /// parameter blob while held.
  DeviceBuffer params, wholeParams;
  std::vector<DeviceBuffer> grads;
  /// Optimizer state: device memory, or host memory under ZeRO-Offload
  /// (ModelInfo::offload).
  std::vector<Storage> state0, state1;
  /// Mixed precision: the float32 master of each trainable tensor with
  /// TensorInfo::master (sharded like its state), else empty.
  std::vector<Storage> masters;
  /// Index among the trainable tensors (grads, shards, ...) of each tensor,
  /// -1 for frozen ones.
  std::vector<int> trainableIndex;
  std::vector<Shard> shards;
  /// What the optimizer updates: each trainable tensor's shard, or the
  /// pieces of it outside frozen rows, and the trainable tensor (index of
  /// shards) each is of.
  std::vector<autopar::rt::ParamSlice> slices;
  std::vector<size_t> sliceShard;
  /// The slices by the axes their gradients' squares are spread over.
  std::map<autopar::rt::AxisMask, std::vector<autopar::rt::ParamSlice>>
      normGroups;

private:
  /// Pipeline parallelism: tensor `t`'s offset in this rank's parameter
  /// blob (-1: not there); else its offset in the whole blob.
  int64_t rankOffset(int t) const;
  /// This rank's stored part of a tensor (device memory `to`, or host
  /// memory with `onHost`; `stored` elements of elementBytes) from the full
  /// tensor's host bytes.
  void storeFrom(char *to, int64_t stored, const autopar::rt::TensorInfo &ti,
                 const char *full, bool onHost = false);
  /// The full tensor into host memory from this rank's stored part
  /// (`stored` elements at device memory `from`, or host memory with
  /// `onHost`): a copy, or a gather of every rank's shard (collective).
  void gatherFull(const char *from, int64_t stored,
                  const autopar::rt::TensorInfo &ti, char *full,
                  bool onHost = false);
  /// Stores a tensor's full float32 values (host memory): into its master
  /// and, rounded, into the parameter blob when it has a master, else into
  /// the blob as they are.
  void storeTensor(int t, const char *full);
  /// A host pointer to the full tensor stored at `stored` (device
  /// memory): the memory itself where it is host memory and not sharded,
  /// else a buffer kept in `keep`, filled when `fill`.
  char *hostView(char *stored, int64_t storedElements,
                 const autopar::rt::TensorInfo &ti, std::vector<Buffer> &keep,
                 bool fill, bool onHost = false);
  /// Device or, under ZeRO-Offload, host memory for optimizer state.
  Storage stateStorage(int64_t bytes);
  /// gatherFull's part before tensor parallelism: this rank's block.
  void gatherBlock(const char *from, int64_t stored,
                   const autopar::rt::TensorInfo &ti, char *block, bool onHost);
  /// The logical tensor (host memory) from every rank's block (`block`,
  /// host memory): all-gathered dim by dim over the axes splitting it
  /// (collective over them).
  void gatherBlocks(const autopar::rt::TensorInfo &ti, const char *block,
                    char *logical);
  /// Copies `bytes` bytes of device memory.
  void copyOnDevice(void *dst, const void *src, int64_t bytes);

  const autopar::rt::ModelInfo &info;
  autopar::rt::Communicator &comm;
  autopar::rt::Device &device;
  const autopar::rt::OptimizerConfig &config;
  std::string dir = programDir();
  /// ZeRO-Offload: a gradient and a parameter staging buffer of the
  /// largest shard for the host update.
  Buffer stagingGrad, stagingParam;
  /// ZeRO-Infinity: the swap file, where each shard's master, state0 and
  /// state1 start in it (-1: none), two chunk buffers of each, and each
  /// slice's first element in its shard.
  std::unique_ptr<autopar::rt::SwapFile> swap;
  std::vector<std::array<int64_t, 3>> swapOffsets;
  /// ZeRO-Infinity's parameter offload: the swapped parameter shards and
  /// where each tensor's starts in the swap file (-1: in the blob).
  std::unique_ptr<autopar::rt::ParamSwap> paramSwap;
  std::vector<int64_t> paramSwapOffsets;
  Buffer chunkBuffers[2];
  std::vector<int64_t> sliceBegin;
  /// The first failed write of an initial master into the swap file.
  Status swapFailure = Status::ok();
  /// Reads (`write` false) or writes the regions of shard k between host
  /// memory `to[3]` and the swap file (queued; drain to finish).
  void swapShard(int k, char *const to[3], bool write);
  /// Lays the shards out in a new swap file and makes the chunk buffers.
  Status setUpSwap(int states);
};

} // namespace autopar::rt::train

#endif // AUTOPAR_RUNTIME_TRAIN_TENSORSTORE_H
