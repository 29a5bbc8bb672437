//===- TensorStore.cpp - where a rank keeps its tensors -------------------===//
//
// The moves between a full tensor in host memory and this rank's part of
// it: padding, the tensor-parallel block, the ZeRO shard (storeFrom), and
// back by all-gathers (gatherFull); with pipeline parallelism, the whole
// parameter blob and the state of other ranks' tensors, held while every
// tensor is read or written.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TensorStore.h"

#include "runtime/support/Philox.h"
#include "runtime/train/TensorLayout.h"

#include <algorithm>
#include <cstring>

namespace autopar::rt::train {

namespace {

std::string dtypeName(int32_t onnxType) {
  switch (onnxType) {
  case 1: return "f32";
  case 11: return "f64";
  case 7: return "i64";
  case 6: return "i32";
  case 5: return "i16";
  case 3: return "i8";
  case 2: return "u8";
  case 9: return "bool";
  case 10: return "f16";
  case 16: return "bf16";
  default: return "t" + std::to_string(onnxType);
  }
}

} // namespace

TensorStore::TensorStore(const autopar::rt::ModelInfo &info,
                         autopar::rt::Communicator &comm,
                         autopar::rt::Device &device,
                         const autopar::rt::OptimizerConfig &config)
    : info(info), comm(comm), device(device), config(config) {}

namespace {

/// The tensors drawn at the start (TensorInfo::init 1, a LoRA A: float32
/// in weights.bin's layout) written over their zeros at `file` + their
/// offset there.
void drawInitialValues(const autopar::rt::ModelInfo &info, char *file,
                       bool fileLayout, uint64_t seed) {
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (ti.init != 1)
      continue;
    float *to = reinterpret_cast<float *>(
        file + (fileLayout ? ti.fileOffset : ti.offset));
    for (int64_t e = 0; e < ti.fileElements; ++e)
      to[e] = autopar::rt::loraInitValue(seed, ti.initStream, e, ti.initFanIn);
  }
}

} // namespace

Status TensorStore::setUp(uint64_t seed) {
  auto outOfMemory = [&] {
    return Status::error("out of memory on " + device.name());
  };
  params = device.allocate(
      info.pipeline
          ? info.pipeline->paramBytes[comm.coord(info.pipeline->ppAxis)]
          : info.paramBytes);
  if (!params)
    return outOfMemory();
  const int states = autopar::rt::numStateBuffers(config);
  int64_t largestShard = 0;
  trainableIndex.assign(info.numTensors, -1);
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (!ti.trainable)
      continue;
    trainableIndex[t] = static_cast<int>(grads.size());
    // ZeRO 1-3 (updateAxes): this rank updates (and keeps optimizer state
    // for) its flat shard only; otherwise every rank updates the whole
    // tensor.
    autopar::rt::ZeroLayout zero =
        autopar::rt::zeroLayout(ti.numElements, comm.groupSize(ti.updateAxes),
                                ti.gradSharded, ti.gradReduceAxes != 0);
    Shard sh{&ti, zero.stateElements, 0, ti.numElements};
    if (ti.updateAxes) {
      sh.begin = comm.groupIndex(ti.updateAxes) * sh.chunk;
      sh.count =
          std::max<int64_t>(0, std::min(sh.chunk, ti.numElements - sh.begin));
    }
    // Gradients have the stored parameter's type, or float32 for a master's
    // under grad_dtype fp32. Pipeline parallelism: a
    // tensor only another pipeline rank's stages read has no gradient,
    // state or master here (haveOthersState brings the state in for a
    // save, an export or a load).
    const bool others = othersTensor(t);
    // ZeRO-Infinity: the state is the swap file's (set up below).
    const bool swapped = info.nvmePath != nullptr;
    grads.push_back(
        others ? DeviceBuffer()
               : device.allocate(zero.gradElements * ti.gradElementBytes));
    state0.push_back(states > 0 && !others ? stateStorage(sh.chunk * 4)
                                           : Storage());
    state1.push_back(states > 1 && !others ? stateStorage(sh.chunk * 4)
                                           : Storage());
    masters.push_back(ti.master && !others ? stateStorage(sh.chunk * 4)
                                           : Storage());
    largestShard = std::max(largestShard, sh.count);
    if (!others &&
        (!grads.back() || (!swapped && ((states > 0 && !state0.back()) ||
                                        (states > 1 && !state1.back()) ||
                                        (ti.master && !masters.back())))))
      return outOfMemory();
    // Element offsets of this rank's shard in the gradient (ZeRO-1: full
    // gradients, reduce-scattered in place) and in the stored parameter
    // (ZeRO-1/2: full parameters, all-gathered after the update).
    const int64_t gradBegin = ti.updateAxes && !ti.gradSharded ? sh.begin : 0;
    const int64_t paramBegin = ti.updateAxes && !ti.paramSharded ? sh.begin : 0;
    char *grad =
        others ? nullptr : grads.back().get() + gradBegin * ti.gradElementBytes;
    char *param = others ? nullptr : paramAt(t) + paramBegin * ti.elementBytes;
    autopar::rt::ParamSlice slice{
        reinterpret_cast<float *>(param), reinterpret_cast<float *>(grad),
        reinterpret_cast<float *>(state0.back().get()),
        reinterpret_cast<float *>(state1.back().get()), sh.count, ti.decay};
    if (ti.master) {
      // The optimizer updates the float32 master (this rank's shard, like
      // its state) and rounds it into the bfloat16 parameter.
      slice.param = reinterpret_cast<float *>(masters.back().get());
      if (ti.gradElementBytes != 4) {
        slice.grad = nullptr;
        slice.gradLow = reinterpret_cast<uint16_t *>(grad);
      }
      slice.paramLow = reinterpret_cast<uint16_t *>(param);
      slice.lowKind = lowKind(ti);
    }
    if (others)
      slice = autopar::rt::ParamSlice{};
    for (auto [begin, end] :
         trainedRanges(ti, sh.begin, others ? 0 : sh.count, comm)) {
      autopar::rt::ParamSlice piece = slice;
      auto shift = [&](auto *&p) { p = p ? p + begin : nullptr; };
      shift(piece.param), shift(piece.grad), shift(piece.state0);
      shift(piece.state1), shift(piece.gradLow), shift(piece.paramLow);
      piece.numElements = end - begin;
      slices.push_back(piece);
      sliceShard.push_back(shards.size());
      sliceBegin.push_back(begin);
      normGroups[ti.normAxes].push_back(piece);
    }
    shards.push_back(sh);
  }
  if (info.offload) {
    stagingGrad = allocate(largestShard * 4);
    // Parameter shards on NVMe: read into and written from staging with
    // direct IO (aligned, whole blocks of the largest stored shard).
    int64_t swappedBytes = 0;
    for (int t = 0; t < info.numTensors && info.nvmeParams; ++t)
      if (info.tensors[t].paramSharded)
        swappedBytes = std::max(swappedBytes, info.tensors[t].storedElements *
                                                  info.tensors[t].elementBytes);
    stagingParam =
        info.nvmeParams
            ? autopar::rt::swapBuffer(std::max(largestShard * 4, swappedBytes))
            : allocate(largestShard * 4);
    if (!stagingGrad || !stagingParam)
      return outOfMemory();
  }
  if (info.nvmePath)
    AUTOPAR_RT_RETURN_IF_ERROR(setUpSwap(states));
  // Initial weights: weights.bin holds the full float32 tensors (masters
  // included) at their fileOffset.
  bool direct = device.hostMemory() && !info.pipeline;
  for (int t = 0; t < info.numTensors; ++t)
    direct &= info.tensors[t].storedElements == info.tensors[t].numElements &&
              !info.tensors[t].master && !isSplit(info.tensors[t]) &&
              !isPadded(info.tensors[t]);
  if (direct) {
    // weights.bin has the parameter blob's layout.
    AUTOPAR_RT_RETURN_IF_ERROR(readFileExactly(dir + "/weights.bin",
                                               params.get(), info.paramBytes,
                                               "initial weights"));
    drawInitialValues(info, params.get(), /*fileLayout=*/false, seed);
  } else {
    Buffer file = allocate(info.weightFileBytes);
    if (!file)
      return Status::error("out of memory");
    AUTOPAR_RT_RETURN_IF_ERROR(
        readFileExactly(dir + "/weights.bin", file.get(), info.weightFileBytes,
                        "initial weights"));
    drawInitialValues(info, file.get(), /*fileLayout=*/true, seed);
    AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(true));
    AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(true));
    for (int t = 0; t < info.numTensors; ++t) {
      storeTensor(t, file.get() + info.tensors[t].fileOffset);
      // ZeRO-Infinity's parameter offload: each initial shard into the
      // swap file, its place's memory given back at once.
      if (paramSwap)
        AUTOPAR_RT_RETURN_IF_ERROR(paramSwap->storeOne(paramAt(t)));
    }
    AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(false));
    AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(false));
  }
  // (A blob read whole, `direct`, has no shard: nothing to swap.)
  return swapFailure;
}

bool TensorStore::othersTensor(int t) const {
  if (!info.pipeline)
    return false;
  if (rankOffset(t) < 0)
    return true;
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  if (pp.tensorOwner[t] < 0)
    return false;
  return !((info.tensors[t].gradReduceAxes >> pp.ppAxis) & 1) &&
         pp.tensorOwner[t] != comm.coord(pp.ppAxis);
}

int64_t TensorStore::rankOffset(int t) const {
  if (!info.pipeline)
    return info.tensors[t].offset;
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  return pp.paramOffsets[comm.coord(pp.ppAxis) * info.numTensors + t];
}

char *TensorStore::paramAt(int t) const {
  if (wholeParams)
    return wholeParams.get() + info.tensors[t].offset;
  const int64_t offset = rankOffset(t);
  return offset < 0 ? nullptr : params.get() + offset;
}

void TensorStore::storeFrom(char *to, int64_t stored,
                            const autopar::rt::TensorInfo &ti, const char *full,
                            bool onHost) {
  const int64_t eb = ti.elementBytes;
  // A padded tensor: `full` is the model's, the logical tensor has zeros
  // around it.
  Buffer logical;
  if (isPadded(ti)) {
    logical = allocate(ti.logicalElements * eb);
    std::memset(logical.get(), 0, ti.logicalElements * eb);
    copyPadded(ti, eb, full, logical.get(), /*back=*/false);
    full = logical.get();
  }
  // Tensor parallelism: `full` is the logical tensor; keep this rank's
  // block of it.
  Buffer block;
  if (isSplit(ti)) {
    block = allocate(ti.numElements * eb);
    takeBlock(ti, eb, full, block.get(), comm);
    full = block.get();
  }
  auto put = [&](char *dst, const char *src, int64_t bytes) {
    if (onHost)
      std::memcpy(dst, src, bytes);
    else
      device.upload(dst, src, bytes);
  };
  if (stored == ti.numElements) {
    put(to, full, ti.numElements * eb);
    return;
  }
  // A ZeRO flat shard: this rank's piece, zero-padded.
  int64_t begin = comm.groupIndex(ti.updateAxes) * stored;
  int64_t count =
      std::max<int64_t>(0, std::min(stored, ti.numElements - begin));
  Buffer piece = allocate(stored * eb);
  std::memcpy(piece.get(), full + begin * eb, count * eb);
  put(to, piece.get(), stored * eb);
}

void TensorStore::gatherFull(const char *from, int64_t stored,
                             const autopar::rt::TensorInfo &ti, char *full,
                             bool onHost) {
  if (!isSplit(ti) && !isPadded(ti)) {
    gatherBlock(from, stored, ti, full, onHost);
    return;
  }
  Buffer logical;
  char *into = full;
  if (isPadded(ti)) {
    logical = allocate(ti.logicalElements * ti.elementBytes);
    into = logical.get();
  }
  if (!isSplit(ti)) {
    gatherBlock(from, stored, ti, into, onHost);
  } else {
    Buffer block = allocate(ti.numElements * ti.elementBytes);
    gatherBlock(from, stored, ti, block.get(), onHost);
    gatherBlocks(ti, block.get(), into);
  }
  if (isPadded(ti))
    copyPadded(ti, ti.elementBytes, into, full, /*back=*/true);
}

void TensorStore::gatherBlocks(const autopar::rt::TensorInfo &ti,
                               const char *block, char *logical) {
  const int64_t eb = ti.elementBytes;
  std::vector<int64_t> shape(ti.shape, ti.shape + ti.rank);
  std::vector<char> cur(block, block + ti.numElements * eb);
  for (int d = 0; d < ti.rank; ++d) {
    if (!ti.splitAxes[d])
      continue;
    const int64_t g = comm.groupSize(ti.splitAxes[d]);
    const int64_t bytes = static_cast<int64_t>(cur.size());
    // Moved as raw words: the gather only copies.
    const bool words = bytes % 4 == 0;
    const int64_t unit = words ? 4 : 2;
    DeviceBuffer piece = device.allocate(bytes),
                 all = device.allocate(g * bytes);
    device.upload(piece.get(), cur.data(), bytes);
    comm.wait(comm.allGatherFlat(piece.get(), g * bytes / unit, all.get(),
                                 words ? autopar::rt::CommType::F32
                                       : autopar::rt::CommType::BF16,
                                 ti.splitAxes[d]));
    std::vector<char> gathered(g * bytes);
    device.download(gathered.data(), all.get(), g * bytes);
    // gathered is [g][outer][shape[d] * inner]: concatenate along d.
    int64_t outer = 1, inner = eb;
    for (int e = 0; e < d; ++e)
      outer *= shape[e];
    for (int e = d + 1; e < ti.rank; ++e)
      inner *= shape[e];
    const int64_t run = shape[d] * inner;
    cur.assign(g * bytes, 0);
    for (int64_t k = 0; k < g; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(cur.data() + (o * g + k) * run,
                    gathered.data() + k * bytes + o * run, run);
    shape[d] *= g;
  }
  std::memcpy(logical, cur.data(), cur.size());
}

void TensorStore::gatherBlock(const char *from, int64_t stored,
                              const autopar::rt::TensorInfo &ti, char *full,
                              bool onHost) {
  const int64_t bytes = ti.numElements * ti.elementBytes;
  if (stored == ti.numElements) {
    if (onHost)
      std::memcpy(full, from, bytes);
    else
      device.download(full, from, bytes);
    return;
  }
  // The communicator works in device memory: gather there, then copy.
  DeviceBuffer gathered, piece;
  char *into = full;
  if (!device.hostMemory()) {
    gathered = device.allocate(bytes);
    into = gathered.get();
    if (onHost) {
      piece = device.allocate(stored * ti.elementBytes);
      device.upload(piece.get(), from, stored * ti.elementBytes);
      from = piece.get();
    }
  }
  comm.wait(comm.allGatherFlat(from, ti.numElements, into, commType(ti),
                               ti.updateAxes));
  device.download(full, into, bytes);
}

void TensorStore::storeTensor(int t, const char *full) {
  const autopar::rt::TensorInfo &ti = info.tensors[t];
  char *param = paramAt(t);
  if (!ti.master) {
    storeFrom(param, ti.storedElements, ti, full);
    return;
  }
  const int k = trainableIndex[t];
  if (swap && !masters[k]) {
    // ZeRO-Infinity: the master straight into the swap file.
    Buffer master = autopar::rt::swapBuffer(shards[k].chunk * 4);
    storeFrom(master.get(), shards[k].chunk, masterInfo(ti), full, true);
    char *regions[3] = {master.get(), nullptr, nullptr};
    swapShard(k, regions, /*write=*/true);
    Status status = swap->drain();
    if (!status.isOk() && swapFailure.isOk())
      swapFailure = status; // setUp returns it
  } else {
    storeFrom(masters[k].get(), shards[k].chunk, masterInfo(ti), full,
              masters[k].onHost());
  }
  std::vector<uint16_t> low = toLow(ti, full, ti.fileElements);
  storeFrom(param, ti.storedElements, ti,
            reinterpret_cast<const char *>(low.data()));
}

char *TensorStore::hostView(char *stored, int64_t storedElements,
                            const autopar::rt::TensorInfo &ti,
                            std::vector<Buffer> &keep, bool fill, bool onHost) {
  if ((device.hostMemory() || onHost) && storedElements == ti.numElements &&
      !isSplit(ti) && !isPadded(ti))
    return stored;
  keep.push_back(allocate(ti.fileElements * ti.elementBytes));
  if (fill)
    gatherFull(stored, storedElements, ti, keep.back().get(), onHost);
  return keep.back().get();
}

Storage TensorStore::stateStorage(int64_t bytes) {
  Storage s;
  if (info.nvmePath)
    return s; // the swap file's (swapIn brings it into host memory)
  if (info.offload)
    s.host = allocate(bytes);
  else
    s.device = device.allocate(bytes);
  return s;
}

void TensorStore::hostUpdate(size_t k, int64_t stepCount, double lr,
                             float gradScale) {
  const autopar::rt::TensorInfo &ti = *shards[sliceShard[k]].tensor;
  const autopar::rt::ParamSlice &d = slices[k];
  const int64_t n = d.numElements, eb = ti.elementBytes;
  if (n <= 0)
    return;
  // The reduced gradient shard comes down; the state is host memory.
  autopar::rt::ParamSlice h = d;
  if (d.gradLow) {
    device.download(stagingGrad.get(), d.gradLow, n * eb);
    h.gradLow = reinterpret_cast<uint16_t *>(stagingGrad.get());
  } else {
    device.download(stagingGrad.get(), d.grad, n * ti.gradElementBytes);
    h.grad = reinterpret_cast<float *>(stagingGrad.get());
  }
  // Mixed precision updates the host master and rounds it into staging;
  // fp32 updates a copy of the parameter shard.
  char *result = stagingParam.get();
  if (d.paramLow) {
    h.paramLow = reinterpret_cast<uint16_t *>(result);
  } else {
    device.download(result, d.param, n * 4);
    h.param = reinterpret_cast<float *>(result);
  }
  autopar::rt::optimizerStep(config, {h}, stepCount, lr, gradScale);
  device.upload(d.paramLow ? static_cast<void *>(d.paramLow) : d.param, result,
                n * eb);
}

Status TensorStore::setUpSwap(int states) {
  // Each shard's master, state0 and state1 in regions of whole blocks; a
  // fresh file reads as zeros (the moments' initial value).
  int64_t bytes = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    const autopar::rt::TensorInfo &ti = *shards[k].tensor;
    const int t = static_cast<int>(shards[k].tensor - info.tensors);
    std::array<int64_t, 3> at = {-1, -1, -1};
    const bool wanted[3] = {ti.master, states > 0, states > 1};
    for (int a = 0; a < 3; ++a)
      if (wanted[a] && !othersTensor(t)) {
        at[a] = bytes;
        bytes += autopar::rt::swapAligned(shards[k].chunk * 4);
      }
    swapOffsets.push_back(at);
  }
  // Parameter offload: each ZeRO-3 parameter shard as stored (its type).
  paramSwapOffsets.assign(info.numTensors, -1);
  for (int t = 0; t < info.numTensors && info.nvmeParams; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (!ti.paramSharded || othersTensor(t))
      continue;
    paramSwapOffsets[t] = bytes;
    bytes += autopar::rt::swapAligned(ti.storedElements * ti.elementBytes);
  }
  swap = std::make_unique<autopar::rt::SwapFile>();
  AUTOPAR_RT_RETURN_IF_ERROR(swap->open(info.nvmePath, bytes, comm.rank()));
  if (info.nvmeParams) {
    paramSwap = std::make_unique<autopar::rt::ParamSwap>(*swap);
    for (int t = 0; t < info.numTensors; ++t)
      if (paramSwapOffsets[t] >= 0)
        paramSwap->add(paramAt(t),
                       info.tensors[t].storedElements *
                           info.tensors[t].elementBytes,
                       paramSwapOffsets[t]);
  }
  for (Buffer &b : chunkBuffers) {
    b = autopar::rt::swapBuffer(
        3 * autopar::rt::swapAligned(info.nvmeChunkElements * 4));
    if (!b)
      return Status::error("out of memory for the swap buffers");
  }
  return Status::ok();
}

void TensorStore::swapShard(int k, char *const to[3], bool write) {
  const int64_t bytes = autopar::rt::swapAligned(shards[k].chunk * 4);
  for (int a = 0; a < 3; ++a)
    if (swapOffsets[k][a] >= 0 && to[a]) {
      if (write)
        swap->write(swapOffsets[k][a], to[a], bytes);
      else
        swap->read(swapOffsets[k][a], to[a], bytes);
    }
}

Status TensorStore::swapIn(bool read) {
  if (!swap)
    return Status::ok();
  for (size_t k = 0; k < shards.size(); ++k) {
    Storage *held[3] = {&masters[k], &state0[k], &state1[k]};
    char *to[3] = {nullptr, nullptr, nullptr};
    for (int a = 0; a < 3; ++a) {
      if (swapOffsets[k][a] < 0)
        continue;
      if (!*held[a]) {
        held[a]->host = autopar::rt::swapBuffer(shards[k].chunk * 4);
        if (!*held[a])
          return Status::error("out of memory for the optimizer state of '" +
                               std::string(shards[k].tensor->name) +
                               "' (swapped in for a save or a load)");
      }
      to[a] = held[a]->get();
    }
    if (read)
      swapShard(static_cast<int>(k), to, /*write=*/false);
  }
  AUTOPAR_RT_RETURN_IF_ERROR(swap->drain());
  // The parameter shards too (a load may not replace every one).
  return paramSwap ? paramSwap->load() : Status::ok();
}

Status TensorStore::swapOut(bool write) {
  if (!swap)
    return Status::ok();
  for (size_t k = 0; k < shards.size(); ++k) {
    char *from[3] = {masters[k].get(), state0[k].get(), state1[k].get()};
    if (write)
      swapShard(static_cast<int>(k), from, /*write=*/true);
  }
  Status status = swap->drain();
  for (size_t k = 0; k < shards.size(); ++k)
    for (Storage *held : {&masters[k], &state0[k], &state1[k]})
      *held = Storage();
  if (status.isOk() && paramSwap)
    status = paramSwap->store(write);
  return status;
}

Status TensorStore::swapUpdate(int64_t stepCount, double lr, float gradScale) {
  // The (shard, chunk) pieces in order; chunks are whole blocks of a
  // shard's regions, so no two requests in flight overlap.
  struct Piece {
    size_t k;
    int64_t begin, end;
  };
  const int64_t c = info.nvmeChunkElements;
  std::vector<Piece> pieces;
  for (size_t k = 0; k < shards.size(); ++k)
    for (int64_t b = 0; b < shards[k].count; b += c)
      pieces.push_back({k, b, std::min(b + c, shards[k].count)});
  const int64_t arrayBytes = autopar::rt::swapAligned(c * 4);
  auto buffer = [&](int b, int a) {
    return chunkBuffers[b].get() + a * arrayBytes;
  };
  auto queue = [&](size_t p, int b, bool write) {
    const Piece &q = pieces[p];
    for (int a = 0; a < 3; ++a) {
      const int64_t at = swapOffsets[q.k][a];
      if (at < 0)
        continue;
      const int64_t bytes = autopar::rt::swapAligned((q.end - q.begin) * 4);
      if (write)
        swap->write(at + q.begin * 4, buffer(b, a), bytes);
      else
        swap->read(at + q.begin * 4, buffer(b, a), bytes);
    }
  };
  // The slices of each shard (sliceShard is sorted).
  std::vector<size_t> firstSlice(shards.size() + 1, slices.size());
  for (size_t s = slices.size(); s-- > 0;)
    firstSlice[sliceShard[s]] = s;
  for (size_t k = shards.size(); k-- > 0;)
    firstSlice[k] = std::min(firstSlice[k], firstSlice[k + 1]);
  auto swappedParam = [&](size_t k) {
    return paramSwap ? paramSwapOffsets[shards[k].tensor - info.tensors]
                     : int64_t{-1};
  };
  if (!pieces.empty())
    queue(0, 0, false);
  for (size_t p = 0; p < pieces.size(); ++p) {
    // This piece's reads and the last piece's writes done: the other
    // buffer is free for the next piece's reads, which run while this
    // one is updated (and this one's writes while the next is).
    AUTOPAR_RT_RETURN_IF_ERROR(swap->drain());
    const int b = static_cast<int>(p % 2);
    if (p + 1 < pieces.size())
      queue(p + 1, 1 - b, false);
    swap->submit();
    const Piece &q = pieces[p];
    const autopar::rt::TensorInfo &ti = *shards[q.k].tensor;
    const int64_t eb = ti.elementBytes, geb = ti.gradElementBytes;
    const size_t s0 = firstSlice[q.k], s1 = firstSlice[q.k + 1];
    // A shard's first piece: its reduced gradient (and fp32 parameter)
    // come down into staging at the shard's element offsets.
    // With the parameter shard in the swap file, the stored shard comes
    // into staging whole (the rows no slice updates included).
    const int64_t paramAtFile = swappedParam(q.k);
    const int64_t storedBytes = ti.storedElements * eb;
    if (q.begin == 0 && paramAtFile >= 0)
      AUTOPAR_RT_RETURN_IF_ERROR(
          swap->waitFor(swap->read(paramAtFile, stagingParam.get(),
                                   autopar::rt::swapAligned(storedBytes))));
    if (q.begin == 0)
      for (size_t s = s0; s < s1; ++s) {
        const autopar::rt::ParamSlice &d = slices[s];
        const int64_t n = d.numElements, at = sliceBegin[s];
        if (d.gradLow)
          device.download(stagingGrad.get() + at * eb, d.gradLow, n * eb);
        else
          device.download(stagingGrad.get() + at * geb, d.grad, n * geb);
        if (!d.paramLow && paramAtFile < 0)
          device.download(stagingParam.get() + at * 4, d.param, n * 4);
      }
    for (size_t s = s0; s < s1; ++s) {
      const autopar::rt::ParamSlice &d = slices[s];
      const int64_t from = std::max(sliceBegin[s], q.begin),
                    to = std::min(sliceBegin[s] + d.numElements, q.end);
      if (from >= to)
        continue;
      const int64_t in = from - q.begin;
      autopar::rt::ParamSlice h = d;
      h.numElements = to - from;
      auto chunk = [&](int a) {
        return swapOffsets[q.k][a] < 0
                   ? nullptr
                   : reinterpret_cast<float *>(buffer(b, a)) + in;
      };
      h.state0 = chunk(1);
      h.state1 = chunk(2);
      if (d.gradLow)
        h.gradLow = reinterpret_cast<uint16_t *>(stagingGrad.get()) + from;
      else
        h.grad = reinterpret_cast<float *>(stagingGrad.get()) + from;
      if (d.paramLow) {
        h.param = chunk(0);
        h.paramLow = reinterpret_cast<uint16_t *>(stagingParam.get()) + from;
      } else {
        h.param = reinterpret_cast<float *>(stagingParam.get()) + from;
      }
      autopar::rt::optimizerStep(config, {h}, stepCount, lr, gradScale);
    }
    queue(p, b, true);
    swap->submit();
    // A shard's last piece: its parameter goes back up (or into the swap
    // file, written before the next piece's first reads staging again).
    if (q.end == shards[q.k].count && paramAtFile >= 0) {
      // A read ahead of the shard (the next step's first gathers) takes
      // the new values too.
      paramSwap->updated(paramAt(static_cast<int>(&ti - info.tensors)),
                         stagingParam.get());
      swap->write(paramAtFile, stagingParam.get(),
                  autopar::rt::swapAligned(storedBytes));
      swap->submit();
    } else if (q.end == shards[q.k].count)
      for (size_t s = s0; s < s1; ++s) {
        const autopar::rt::ParamSlice &d = slices[s];
        device.upload(d.paramLow ? static_cast<void *>(d.paramLow) : d.param,
                      stagingParam.get() + sliceBegin[s] * eb,
                      d.numElements * eb);
      }
  }
  return swap->drain();
}

std::vector<autopar::rt::TensorRef>
TensorStore::checkpointTensors(std::vector<Buffer> &full, bool gather) {
  std::vector<autopar::rt::TensorRef> refs;
  bool adamw = config.kind == autopar::rt::OptimizerKind::AdamW;
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    // Checkpoints hold logical tensors: they resume under any plan.
    std::vector<int64_t> shape(ti.fileShape, ti.fileShape + ti.fileRank);
    const int k = trainableIndex[t];
    // A mixed-precision parameter is saved as its float32 master.
    const autopar::rt::TensorInfo saved = ti.master ? masterInfo(ti) : ti;
    int64_t bytes = ti.fileElements * saved.elementBytes;
    char *data =
        ti.master ? hostView(masters[k].get(), shards[k].chunk, saved, full,
                             gather, masters[k].onHost())
                  : hostView(paramAt(t), ti.storedElements, ti, full, gather);
    refs.push_back({ti.name, dtypeName(saved.onnxType), shape, data, bytes});
    if (!ti.trainable)
      continue;
    const Shard &sh = shards[k];
    Storage *states[] = {&state0[k], &state1[k]};
    const char *suffixes[] = {adamw ? ".exp_avg" : ".momentum_buffer",
                              ".exp_avg_sq"};
    for (int s = 0; s < 2; ++s) {
      if (!*states[s])
        continue;
      // Optimizer state is f32, like the tensors (or masters) it belongs to.
      char *state = hostView(states[s]->get(), sh.chunk, saved, full, gather,
                             states[s]->onHost());
      refs.push_back({std::string(ti.name) + suffixes[s], "f32", shape, state,
                      bytes});
    }
  }
  return refs;
}

void TensorStore::storeCheckpointTensors(
    const std::vector<autopar::rt::TensorRef> &refs) {
  // Tensors loaded into host buffers go to their device memory.
  size_t r = 0;
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    const int k = trainableIndex[t];
    const char *data = static_cast<const char *>(refs[r].data);
    if (ti.master) {
      // The master (maybe loaded in place) and its rounded copy.
      std::vector<uint16_t> low = toLow(ti, data, ti.fileElements);
      storeFrom(paramAt(t), ti.storedElements, ti,
                reinterpret_cast<const char *>(low.data()));
      if (data != masters[k].get())
        storeFrom(masters[k].get(), shards[k].chunk, masterInfo(ti), data,
                  masters[k].onHost());
    } else if (data != paramAt(t)) {
      storeFrom(paramAt(t), ti.storedElements, ti, data);
    }
    ++r;
    if (!ti.trainable)
      continue;
    const Shard &sh = shards[k];
    const autopar::rt::TensorInfo saved = ti.master ? masterInfo(ti) : ti;
    for (Storage *state : {&state0[k], &state1[k]}) {
      if (!*state)
        continue;
      if (refs[r].data != state->get())
        storeFrom(state->get(), sh.chunk, saved,
                  static_cast<const char *>(refs[r].data), state->onHost());
      ++r;
    }
  }
}

std::vector<autopar::rt::ExportTensor>
TensorStore::exportTensors(std::vector<Buffer> &full) {
  std::vector<autopar::rt::ExportTensor> tensors;
  for (int t = 0; t < info.numTensors; ++t) {
    // Every parameter, frozen ones too: a frozen Identity alias of a
    // trained tensor must become an initializer of its own.
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    if (ti.buffer)
      continue;
    // A mixed-precision parameter is exported as its float32 master.
    const autopar::rt::TensorInfo saved = ti.master ? masterInfo(ti) : ti;
    const int k = trainableIndex[t];
    const char *data =
        ti.master ? hostView(masters[k].get(), shards[k].chunk, saved, full,
                             /*fill=*/true, masters[k].onHost())
                  : hostView(paramAt(t), ti.storedElements, ti, full,
                             /*fill=*/true);
    tensors.push_back(
        {ti.name, saved.onnxType,
         std::vector<int64_t>(ti.fileShape, ti.fileShape + ti.fileRank), data,
         ti.fileElements * saved.elementBytes});
  }
  return tensors;
}

Status TensorStore::haveOthersState(bool have) {
  if (!info.pipeline)
    return Status::ok();
  const int states = autopar::rt::numStateBuffers(config);
  for (int t = 0; t < info.numTensors; ++t) {
    const int k = trainableIndex[t];
    if (k < 0 || !othersTensor(t))
      continue;
    const int64_t bytes = shards[k].chunk * 4;
    for (auto [storage, wanted] :
         {std::pair<Storage *, bool>{&state0[k], states > 0},
          {&state1[k], states > 1},
          {&masters[k], info.tensors[t].master}}) {
      if (!have) {
        *storage = Storage();
      } else if (wanted && !*storage) {
        *storage = stateStorage(bytes);
        if (!*storage)
          return Status::error("out of memory for the optimizer state of '" +
                               std::string(info.tensors[t].name) + "'");
      }
    }
  }
  return Status::ok();
}

void TensorStore::copyOnDevice(void *dst, const void *src, int64_t bytes) {
  if (device.hostMemory()) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  std::vector<char> staging(static_cast<size_t>(bytes));
  device.download(staging.data(), src, bytes);
  device.upload(dst, staging.data(), bytes);
}

Status TensorStore::wholeParameters(bool have) {
  if (!info.pipeline || have == static_cast<bool>(wholeParams))
    return Status::ok();
  DeviceBuffer whole;
  if (have) {
    whole = device.allocate(info.paramBytes);
    if (!whole)
      return Status::error("out of memory on " + device.name() +
                           " for the whole parameter blob (" +
                           std::to_string(info.paramBytes) + " bytes)");
  } else {
    whole = std::move(wholeParams);
  }
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    const int64_t offset = rankOffset(t);
    if (offset < 0)
      continue;
    char *mine = params.get() + offset, *there = whole.get() + ti.offset;
    const int64_t bytes = ti.storedElements * ti.elementBytes;
    have ? copyOnDevice(there, mine, bytes) : copyOnDevice(mine, there, bytes);
  }
  if (have)
    wholeParams = std::move(whole);
  return Status::ok();
}

Status TensorStore::syncPipelineTensors(bool withState) {
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  // Tensors other ranks own: their state comes in until the save or
  // export is done; every parameter into the whole blob.
  if (withState)
    AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(true));
  AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(true));
  const int rank = static_cast<int>(comm.coord(pp.ppAxis));
  const autopar::rt::AxisMask ppMask = 1u << pp.ppAxis;
  Buffer file;
  for (int t = 0; t < info.numTensors; ++t) {
    const autopar::rt::TensorInfo &ti = info.tensors[t];
    // A tensor the collectives do not carry (not a float) is never
    // trained: the one of weights.bin.
    if (ti.onnxType != 1 && ti.onnxType != 10 && ti.onnxType != 16) {
      if (rankOffset(t) >= 0)
        continue;
      if (!file) {
        file = allocate(info.weightFileBytes);
        if (!file)
          return Status::error("out of memory");
        AUTOPAR_RT_RETURN_IF_ERROR(
            readFileExactly(dir + "/weights.bin", file.get(),
                            info.weightFileBytes, "initial weights"));
      }
      storeTensor(t, file.get() + ti.fileOffset);
      continue;
    }
    // The parameter as stored, from the first rank that holds it.
    int owner = 0;
    while (pp.paramOffsets[owner * info.numTensors + t] < 0)
      ++owner;
    if (rank != owner)
      device.zero(paramAt(t), ti.storedElements * ti.elementBytes);
    comm.allReduceSum(paramAt(t), ti.storedElements, commType(ti), ppMask);
    // The float32 optimizer state and master of the rank's update shard
    // (the same shard on every pipeline rank of a dp coordinate).
    const int k = trainableIndex[t];
    if (!withState || k < 0 || pp.tensorOwner[t] < 0)
      continue;
    for (Storage *state : {&state0[k], &state1[k], &masters[k]}) {
      if (!*state)
        continue;
      if (rank != pp.tensorOwner[t])
        device.zero(state->get(), shards[k].chunk * 4);
      comm.allReduceSum(reinterpret_cast<float *>(state->get()),
                        shards[k].chunk, ppMask);
    }
  }
  comm.waitAll();
  return Status::ok();
}

} // namespace autopar::rt::train
