//===- TrainMain.cpp - main program of an emitted training binary ---------===//
//
//   train --data TOKENS.bin --steps N [--log LOG.jsonl]
//         [--save DIR [--save-every K] [--keep-last N]] [--resume DIR]
//         [--export-onnx OUT.onnx] [--seed S]
//         [--eval-data TOKENS.bin --eval-every K [--eval-steps M]]
//
// Drives the generated step function (runtime/Model.h): batches from the
// token file, gradient accumulation over micro-steps, clipping, the
// optimizer and LR schedule, the log, checkpoints and the ONNX export.
// Every error is one line naming the input at fault, and a non-zero exit.
//
// The same file serves every target: parameters, gradients, optimizer
// state, inputs and the loss live in the memory of the target's Device
// (runtime/Device.h: host memory on the CPU, GPU memory on CUDA), which
// also runs the optimizer; this file stages token batches, checkpoints and
// exports through host memory.
//
// On a mesh (mpirun -np N, N = mesh size) every rank runs this program on
// its share of each micro-batch; the generated step holds the collectives
// of data parallelism and ZeRO-2/3. This file adds what happens between
// steps: ZeRO-1's reduce-scatter of the accumulated gradients, the
// optimizer on this rank's flat shards (ZeRO 1-3), the all-gather of the
// updated parameters (ZeRO 1-2), the global gradient norm, and full
// tensors for checkpoints and the ONNX export (written by rank 0).
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/support/File.h"
#include "runtime/Float16.h"
#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/comm/Comm.h"
#include "runtime/data/TokenFile.h"
#include "runtime/log/Logger.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/optim/Optimizer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/// Defined by the generated model source: the plan's optimizer settings.
autopar::rt::OptimizerConfig autoparOptimizerConfig();
autopar::rt::LossScaleConfig autoparLossScaleConfig();

namespace {

using autopar::rt::allocate;
using autopar::rt::Buffer;
using autopar::rt::CollectiveKind;
using autopar::rt::Communicator;
using autopar::rt::Device;
using autopar::rt::DeviceBuffer;
using autopar::rt::programDir;
using autopar::rt::readFileExactly;
using autopar::rt::Status;

/// The SIGTERM or SIGINT that asked the run to stop (0: none): the step in
/// progress finishes, a checkpoint is saved (--save), and the run exits. A
/// second one ends the process at once.
std::atomic<int> stopSignal{0};

extern "C" void onStopSignal(int sig) {
  if (stopSignal.exchange(sig) != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

/// An error message as one line: control characters (a tensor name in a
/// checkpoint may hold a newline) as \xNN.
std::string oneLine(const std::string &text) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
    out += buf;
  }
  return out;
}

struct Options {
  std::string data, log, save, resume, exportOnnx, evalData, trace;
  int64_t steps = -1, saveEvery = 0, seed = 0, evalEvery = 0, evalSteps = 1;
  int64_t keepLast = 1;
  /// --comm-timeout S (seconds > 0): the watchdog's timeout instead of the
  /// plan's comm.timeout_s; 0: the plan's.
  double commTimeout = 0;
};

const char *kUsage =
    "usage: train --data TOKENS.bin --steps N [--log LOG.jsonl] "
    "[--save DIR [--save-every K] [--keep-last N]] [--resume DIR] "
    "[--export-onnx OUT.onnx] "
    "[--seed S] [--eval-data TOKENS.bin --eval-every K [--eval-steps M]] "
    "[--trace TRACE.json] [--comm-timeout S]\n";

bool parseInt(const char *text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  // Beyond int64: refused, not clamped.
  if (!*text || *end || errno == ERANGE)
    return false;
  out = v;
  return true;
}

/// Parses argv; on error prints one line and returns false.
bool parseOptions(int argc, char **argv, Options &o, int &exitCode) {
  exitCode = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      exitCode = 0;
      return false;
    }
    std::string *text = nullptr;
    int64_t *number = nullptr;
    if (arg == "--comm-timeout") {
      char *end = nullptr;
      const char *value = i + 1 < argc ? argv[++i] : "";
      o.commTimeout = std::strtod(value, &end);
      if (!*value || *end || !(o.commTimeout > 0) ||
          !std::isfinite(o.commTimeout)) {
        std::fprintf(stderr,
                     "train: --comm-timeout: expected seconds > 0, "
                     "got '%s'\n",
                     value);
        return false;
      }
      continue;
    }
    if (arg == "--data")
      text = &o.data;
    else if (arg == "--log")
      text = &o.log;
    else if (arg == "--save")
      text = &o.save;
    else if (arg == "--resume")
      text = &o.resume;
    else if (arg == "--export-onnx")
      text = &o.exportOnnx;
    else if (arg == "--eval-data")
      text = &o.evalData;
    else if (arg == "--trace")
      text = &o.trace;
    else if (arg == "--eval-every")
      number = &o.evalEvery;
    else if (arg == "--eval-steps")
      number = &o.evalSteps;
    else if (arg == "--steps")
      number = &o.steps;
    else if (arg == "--save-every")
      number = &o.saveEvery;
    else if (arg == "--keep-last")
      number = &o.keepLast;
    else if (arg == "--seed")
      number = &o.seed;
    else {
      std::fprintf(stderr, "train: unknown option '%s' (see train --help)\n",
                   arg.c_str());
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "train: %s needs a value\n", arg.c_str());
      return false;
    }
    const char *value = argv[++i];
    if (text) {
      *text = value;
    } else if (!parseInt(value, *number) || *number < 0) {
      std::fprintf(stderr, "train: %s: expected a non-negative integer, got "
                   "'%s'\n", arg.c_str(), value);
      return false;
    }
  }
  if (o.data.empty() || o.steps < 0) {
    std::fprintf(stderr,
                 "train: --data and --steps are required (see train --help)\n");
    return false;
  }
  if (!o.evalData.empty() != (o.evalEvery > 0)) {
    std::fprintf(stderr, "train: --eval-data and --eval-every K > 0 go "
                         "together\n");
    return false;
  }
  if (o.evalSteps < 1) {
    std::fprintf(stderr, "train: --eval-steps: expected a positive integer\n");
    return false;
  }
  if (o.saveEvery > 0 && o.save.empty()) {
    std::fprintf(stderr, "train: --save-every needs --save DIR\n");
    return false;
  }
  if (o.keepLast < 1) {
    std::fprintf(stderr, "train: --keep-last: expected a positive integer\n");
    return false;
  }
  if (o.keepLast > 1 && o.save.empty()) {
    std::fprintf(stderr, "train: --keep-last needs --save DIR\n");
    return false;
  }
  return true;
}

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

/// Checks before training that the file `path` (empty: none) can be
/// created or replaced: not a directory, in a writable directory.
Status checkWritable(const std::string &path) {
  if (path.empty())
    return Status::ok();
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory");
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0              ? "/"
                                              : path.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(path + ": cannot write: " + dir +
                         " is not a directory");
  // A probe next to it, made and removed (the file itself is written to a
  // temporary name and renamed into place).
  const std::string probe = path + ".probe-" + std::to_string(getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    return Status::error(path + ": cannot write: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::ok();
}

/// Copies token ids into a graph input of int64 or int32 elements.
void storeIds(const std::vector<int64_t> &ids, const autopar::rt::InputInfo &input,
              char *into) {
  if (input.elementBytes == 8) {
    std::memcpy(into, ids.data(), ids.size() * sizeof(int64_t));
    return;
  }
  int32_t *out = reinterpret_cast<int32_t *>(into);
  for (size_t i = 0; i < ids.size(); ++i)
    out[i] = static_cast<int32_t>(ids[i]);
}

/// The float32 master of a mixed-precision tensor, described as a tensor.
autopar::rt::TensorInfo masterInfo(const autopar::rt::TensorInfo &ti) {
  autopar::rt::TensorInfo m = ti;
  m.onnxType = 1;
  m.elementBytes = 4;
  return m;
}

/// The element type of a stored tensor for the communicator (TensorProto
/// types: 16 bfloat16, 10 float16).
autopar::rt::CommType commTypeOf(int32_t onnxType) {
  return onnxType == 16   ? autopar::rt::CommType::BF16
         : onnxType == 10 ? autopar::rt::CommType::F16
                          : autopar::rt::CommType::F32;
}

/// How a tensor travels in collectives: as stored, and its gradient.
autopar::rt::CommType commType(const autopar::rt::TensorInfo &ti) {
  return commTypeOf(ti.onnxType);
}
autopar::rt::CommType gradCommType(const autopar::rt::TensorInfo &ti) {
  return commTypeOf(ti.gradOnnxType);
}

/// The 16-bit format of a mixed-precision tensor.
autopar::rt::Float16Kind lowKind(const autopar::rt::TensorInfo &ti) {
  return ti.onnxType == 10 ? autopar::rt::Float16Kind::Half
                           : autopar::rt::Float16Kind::BF16;
}

/// The 16-bit copies (rounded) of a master's `numElements` floats.
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

const char *optimizerName(const autopar::rt::OptimizerConfig &config) {
  return config.kind == autopar::rt::OptimizerKind::AdamW ? "adamw" : "sgd";
}

/// Whether tensor parallelism splits `ti`: this rank stores a block of the
/// logical tensor.
bool isSplit(const autopar::rt::TensorInfo &ti) {
  for (int d = 0; d < ti.rank; ++d)
    if (ti.splitAxes[d])
      return true;
  return false;
}

/// Whether the logical tensor of `ti` is its file tensor padded with zeros
/// (a vocabulary padded to a multiple of tp).
bool isPadded(const autopar::rt::TensorInfo &ti) {
  return ti.fileElements != ti.logicalElements;
}

/// Copies the file tensor (ti.fileShape) at `from` into the leading block
/// of the logical tensor (ti.logicalShape, its padding already zero) at
/// `to`, or, with `back`, that block of the logical tensor at `from` to
/// the file tensor at `to`.
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

/// This rank's block (`eb`-byte elements) of the logical tensor `logical`
/// (host memory) into `local` (BlockRuns).
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

/// The ranges (from `begin`, as [from, to) pairs) of this rank's elements
/// [begin, begin + count) of `ti` (its block) outside frozen rows: the
/// whole range when none are frozen, nothing when count is 0. Frozen rows
/// are rows of the file tensor's dim 0: runs of the logical tensor's
/// elements, or, when it is the file's padded, rows of its dim 0.
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

class Trainer {
public:
  Trainer(const autopar::rt::ModelInfo &info, const Options &options,
          Communicator &comm, Device &device)
      : info(info), o(options), comm(comm), device(device),
        config(autoparOptimizerConfig()) {}
  Status setUp();
  Status run();
  /// The signal the run stopped on (0: it ran to --steps).
  int stoppedBy() const { return stopped; }

private:
  bool leader() const { return comm.rank() == 0; }
  /// Pipeline parallelism: whether tensor `t`'s gradient is another
  /// pipeline rank's alone (no stage of this rank reads it, and it is not
  /// summed over pp): this rank neither reduces nor updates it.
  bool othersTensor(int t) const {
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
  /// Pipeline parallelism: tensor `t`'s offset in this rank's parameter
  /// blob (-1: not there); else its offset in the whole blob.
  int64_t rankOffset(int t) const {
    if (!info.pipeline)
      return info.tensors[t].offset;
    const autopar::rt::PipelineInfo &pp = *info.pipeline;
    return pp.paramOffsets[comm.coord(pp.ppAxis) * info.numTensors + t];
  }
  /// Where tensor `t` is stored: in the whole blob while one is held
  /// (wholeParameters), else in this rank's (null: not there).
  char *paramAt(int t) const {
    if (wholeParams)
      return wholeParams.get() + info.tensors[t].offset;
    const int64_t offset = rankOffset(t);
    return offset < 0 ? nullptr : params.get() + offset;
  }
  int64_t dpSize() const { return info.meshAxisSizes[info.dpAxis]; }
  autopar::rt::AxisMask dpMask() const { return 1u << info.dpAxis; }
  /// Host copies of every tensor a checkpoint holds, full (gathered from
  /// the shards where needed; with `gather` false, buffers to load into);
  /// `full` owns the buffers that are not the device memory itself.
  std::vector<autopar::rt::TensorRef> checkpointTensors(std::vector<Buffer> &full,
                                                        bool gather);
  Status save(const std::string &dir, int64_t stepsDone);
  Status resume();
  /// The mean forward loss over the first --eval-steps batches of
  /// --eval-data, into `loss`.
  Status evaluate(double &loss);
  void fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                  int64_t micro);
  Status exportOnnx();
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
  /// gatherFull's part before tensor parallelism: this rank's block.
  void gatherBlock(const char *from, int64_t stored,
                   const autopar::rt::TensorInfo &ti, char *block, bool onHost);
  /// The logical tensor (host memory) from every rank's block (`block`,
  /// host memory): all-gathered dim by dim over the axes splitting it
  /// (collective over them).
  void gatherBlocks(const autopar::rt::TensorInfo &ti, const char *block,
                    char *logical);
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
  /// ZeRO-Offload: the update of slices[k] on the host (its gradient comes
  /// down, its parameter goes back up).
  void hostUpdate(size_t k, int64_t stepCount, double lr, float gradScale);
  /// Pipeline parallelism: runs this rank's actions of the schedule for
  /// `step` (every micro-batch) and returns the sum of the micro-batches'
  /// losses (over every pipeline rank).
  double pipelineStep(int64_t step);
  /// --trace: each action's start and end (microseconds of the monotonic
  /// clock) by its index in every rank's lists; the step traced.
  std::vector<double> traceTimes;
  int64_t tracedStep = -1;
  /// Pipeline parallelism: the buffers of transfers and saved values,
  /// by their bytes, kept from one use to the next (and step to step).
  std::multimap<int64_t, DeviceBuffer> pipelineBuffers;
  /// Writes the traced step of this rank's pipeline as a Chrome trace.
  Status writeTrace();
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
  /// Copies `bytes` bytes of device memory.
  void copyOnDevice(void *dst, const void *src, int64_t bytes);
  /// Runs the step function `fn` (with `numResults` results) on `io` and
  /// returns its loss (result 0).
  float runStep(autopar::rt::StepFunction fn, int numResults,
                autopar::rt::StepIO io);

  const autopar::rt::ModelInfo &info;
  const Options &o;
  Communicator &comm;
  Device &device;
  autopar::rt::OptimizerConfig config;
  int stopped = 0;
  std::string dir = programDir();
  DeviceBuffer params, arena, lossBuffer;
  /// Pipeline parallelism: the whole parameter blob, while held.
  DeviceBuffer wholeParams;
  std::vector<DeviceBuffer> grads;
  /// Optimizer state: device memory, or host memory under ZeRO-Offload
  /// (ModelInfo::offload), with a gradient and a parameter staging buffer
  /// of the largest shard for the host update.
  std::vector<Storage> state0, state1;
  Buffer stagingGrad, stagingParam;
  /// Mixed precision: the float32 master of each trainable tensor with
  /// TensorInfo::master (sharded like its state), else empty.
  std::vector<Storage> masters;
  /// Index among the trainable tensors (grads, shards, ...) of each tensor,
  /// -1 for frozen ones.
  std::vector<int> trainableIndex;
  std::vector<Shard> shards;
  /// Graph inputs: device buffers and their host staging.
  std::vector<DeviceBuffer> inputs;
  std::vector<Buffer> hostInputs;
  /// What the optimizer updates: each trainable tensor's shard, or the
  /// pieces of it outside frozen rows, and the trainable tensor (index of
  /// shards) each is of.
  std::vector<autopar::rt::ParamSlice> slices;
  std::vector<size_t> sliceShard;
  /// The slices by the axes their gradients' squares are spread over.
  std::map<autopar::rt::AxisMask, std::vector<autopar::rt::ParamSlice>>
      normGroups;
  autopar::rt::TokenFile tokens, evalTokens;
  std::vector<int64_t> sampleIds, sampleTargets;
  std::vector<const void *> inputPtrs;
  int tokensInput = -1, targetsInput = -1;
  /// fp16-mixed: the input that takes the loss scale (role 2), the scale
  /// (0: no loss scaling), the steps in a row without inf / NaN gradients,
  /// and the steps skipped for them (AdamW's step count leaves them out).
  int lossScaleInput = -1;
  autopar::rt::LossScaleConfig lossConfig = autoparLossScaleConfig();
  double lossScale = 0;
  int64_t goodSteps = 0, skippedSteps = 0;
  autopar::rt::Logger logger;
  int64_t startStep = 0;
};

void Trainer::storeFrom(char *to, int64_t stored,
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
  int64_t count = std::max<int64_t>(0, std::min(stored, ti.numElements - begin));
  Buffer piece = allocate(stored * eb);
  std::memcpy(piece.get(), full + begin * eb, count * eb);
  put(to, piece.get(), stored * eb);
}

void Trainer::gatherFull(const char *from, int64_t stored,
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

void Trainer::gatherBlocks(const autopar::rt::TensorInfo &ti, const char *block,
                           char *logical) {
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

void Trainer::gatherBlock(const char *from, int64_t stored,
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

void Trainer::storeTensor(int t, const char *full) {
  const autopar::rt::TensorInfo &ti = info.tensors[t];
  char *param = paramAt(t);
  if (!ti.master) {
    storeFrom(param, ti.storedElements, ti, full);
    return;
  }
  const int k = trainableIndex[t];
  storeFrom(masters[k].get(), shards[k].chunk, masterInfo(ti), full,
            masters[k].onHost());
  std::vector<uint16_t> low = toLow(ti, full, ti.fileElements);
  storeFrom(param, ti.storedElements, ti,
            reinterpret_cast<const char *>(low.data()));
}

char *Trainer::hostView(char *stored, int64_t storedElements,
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

Storage Trainer::stateStorage(int64_t bytes) {
  Storage s;
  if (info.offload)
    s.host = allocate(bytes);
  else
    s.device = device.allocate(bytes);
  return s;
}

void Trainer::hostUpdate(size_t k, int64_t stepCount, double lr,
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

Status Trainer::setUp() {
  auto outOfMemory = [&] {
    return Status::error("out of memory on " + device.name());
  };
  params = device.allocate(
      info.pipeline
          ? info.pipeline->paramBytes[comm.coord(info.pipeline->ppAxis)]
          : info.paramBytes);
  // The training step and the forward function never run at once.
  int64_t arenaBytes =
      std::max(info.trainStepArenaBytes, info.forwardArenaBytes);
  if (info.pipeline)
    for (int s = 0; s < info.pipeline->numStages; ++s) {
      const autopar::rt::PipelineStage &st = info.pipeline->stages[s];
      for (const autopar::rt::PipelinePhase *ph :
           {&st.forward, &st.backward, &st.input, &st.weight})
        if (ph->fn)
          arenaBytes = std::max(arenaBytes, ph->arenaBytes);
    }
  arena = device.allocate(arenaBytes);
  lossBuffer = device.allocate(sizeof(float));
  if (!params || !arena || !lossBuffer)
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
      sh.count = std::max<int64_t>(0, std::min(sh.chunk, ti.numElements - sh.begin));
    }
    // Gradients have the stored parameter's type, or float32 for a master's
    // under grad_dtype fp32. Pipeline parallelism: a
    // tensor only another pipeline rank's stages read has no gradient,
    // state or master here (haveOthersState brings the state in for a
    // save, an export or a load).
    const bool others = othersTensor(t);
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
        (!grads.back() || (states > 0 && !state0.back()) ||
         (states > 1 && !state1.back()) || (ti.master && !masters.back())))
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
      normGroups[ti.normAxes].push_back(piece);
    }
    shards.push_back(sh);
  }
  if (info.offload) {
    stagingGrad = allocate(largestShard * 4);
    stagingParam = allocate(largestShard * 4);
    if (!stagingGrad || !stagingParam)
      return outOfMemory();
  }
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
  } else {
    Buffer file = allocate(info.weightFileBytes);
    if (!file)
      return Status::error("out of memory");
    AUTOPAR_RT_RETURN_IF_ERROR(
        readFileExactly(dir + "/weights.bin", file.get(), info.weightFileBytes,
                        "initial weights"));
    AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(true));
    AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(true));
    for (int t = 0; t < info.numTensors; ++t)
      storeTensor(t, file.get() + info.tensors[t].fileOffset);
    AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(false));
    AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(false));
  }
  for (int i = 0; i < info.numInputs; ++i) {
    if (info.inputs[i].role == 2) {
      lossScaleInput = i;
      lossScale = lossConfig.initScale;
    }
    int64_t n = info.inputs[i].elementBytes;
    for (int d = 0; d < info.inputs[i].rank; ++d)
      n *= info.inputs[i].shape[d];
    inputs.push_back(device.allocate(n));
    hostInputs.push_back(allocate(n));
    if (!inputs.back() || !hostInputs.back())
      return outOfMemory();
  }
  const int64_t globalBatch = info.microBatch * info.microBatches * dpSize();
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadTokenFile(o.data, tokens));
  int64_t vocab = std::min(info.inputVocab, info.targetVocab);
  AUTOPAR_RT_RETURN_IF_ERROR(
      autopar::rt::checkTokenFile(tokens, globalBatch, info.seqLen, vocab));
  if (!o.evalData.empty()) {
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadTokenFile(o.evalData, evalTokens));
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkTokenFile(
        evalTokens, globalBatch, info.seqLen, vocab));
    // More batches than one pass over the file would evaluate the same ones
    // again (and a huge count would run without end).
    const int64_t batches =
        autopar::rt::stepsPerPass(evalTokens, globalBatch, info.seqLen);
    if (o.evalSteps > batches)
      return Status::error(
          "--eval-steps " + std::to_string(o.evalSteps) + ": " + o.evalData +
          " holds " + std::to_string(batches) + " batch" +
          (batches == 1 ? "" : "es") + " of " + std::to_string(globalBatch) +
          " x " + std::to_string(info.seqLen) + " tokens; at most " +
          std::to_string(batches));
  }
  if (!o.resume.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(resume());
  // Every output is checked before the run (a save into a folder it would
  // refuse, an export at a folder): no run lost to a late error.
  if (!o.save.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::checkSaveTarget(o.save));
  AUTOPAR_RT_RETURN_IF_ERROR(checkWritable(o.exportOnnx));
  if (leader())
    return logger.open(o.log, /*append=*/!o.resume.empty());
  return Status::ok();
}

std::vector<autopar::rt::TensorRef>
Trainer::checkpointTensors(std::vector<Buffer> &full, bool gather) {
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

Status Trainer::save(const std::string &path, int64_t stepsDone) {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(syncPipelineTensors());
  std::vector<Buffer> full;
  std::vector<autopar::rt::TensorRef> refs = checkpointTensors(full, true);
  Status status = Status::ok();
  if (leader()) {
    autopar::rt::CheckpointMeta meta;
    meta.step = stepsDone;
    meta.modelFingerprint = info.fingerprint;
    meta.optimizer = optimizerName(config);
    meta.lossScale = lossScale;
    meta.lossScaleGoodSteps = goodSteps;
    meta.skippedSteps = skippedSteps;
    status = autopar::rt::saveCheckpoint(path, refs, meta, o.keepLast);
  }
  AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(false));
  AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(false));
  return status;
}

Status Trainer::resume() {
  // Every rank reads the full tensors and keeps its part: a checkpoint
  // holds logical tensors, so it loads under any dp / ZeRO plan.
  std::vector<Buffer> full;
  AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(true));
  AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(true));
  std::vector<autopar::rt::TensorRef> refs = checkpointTensors(full, false);
  autopar::rt::CheckpointMeta meta;
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::loadCheckpoint(
      o.resume, refs, meta, info.fingerprint, optimizerName(config)));
  startStep = meta.step;
  skippedSteps = meta.skippedSteps;
  // A checkpoint of a run without loss scaling starts the scaler afresh.
  if (lossScaleInput >= 0 && meta.lossScale > 0) {
    lossScale = meta.lossScale;
    goodSteps = meta.lossScaleGoodSteps;
  }
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
  AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(false));
  return haveOthersState(false);
}

Status Trainer::exportOnnx() {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(syncPipelineTensors());
  std::vector<autopar::rt::ExportTensor> tensors;
  std::vector<Buffer> full;
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
  Status status = leader() ? autopar::rt::exportOnnxWeights(
                                 dir + "/model.onnx", o.exportOnnx, tensors)
                           : Status::ok();
  AUTOPAR_RT_RETURN_IF_ERROR(wholeParameters(false));
  AUTOPAR_RT_RETURN_IF_ERROR(haveOthersState(false));
  return status;
}

void Trainer::fillInputs(const autopar::rt::TokenFile &file, int64_t step,
                         int64_t micro) {
  // Micro-batch `micro` is samples [micro * B/m, (micro + 1) * B/m) of the
  // step's global batch B, whatever the plan; this rank takes its dp block.
  const int64_t dp = dpSize();
  const int64_t globalBatch = info.microBatch * info.microBatches * dp;
  const int64_t first = (micro * dp + comm.groupIndex(dpMask())) * info.microBatch;
  autopar::rt::fillSamples(file, step, globalBatch, info.seqLen, first,
                           info.microBatch, sampleIds.data(),
                           sampleTargets.data());
  if (info.targetsFromTokens)
    sampleTargets = sampleIds;
  for (int i : {tokensInput, targetsInput}) {
    storeIds(i == tokensInput ? sampleIds : sampleTargets, info.inputs[i],
             hostInputs[i].get());
    device.upload(inputs[i].get(), hostInputs[i].get(),
                  static_cast<int64_t>(sampleIds.size()) *
                      info.inputs[i].elementBytes);
  }
}

float Trainer::runStep(autopar::rt::StepFunction fn, int numResults,
                       autopar::rt::StepIO io) {
  io.comm = &comm;
  io.device = device.context();
  // A step with collectives in it runs without CUDA graphs for now.
  if (comm.worldSize() > 1)
    fn(io);
  else
    device.runStep(fn, io, info.numInputs, numResults);
  float loss = 0;
  device.download(&loss, lossBuffer.get(), sizeof(float));
  return loss;
}

double Trainer::pipelineStep(int64_t step) {
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  const autopar::rt::AxisMask ppMask = 1u << pp.ppAxis;
  const int rank = static_cast<int>(comm.coord(pp.ppAxis));
  const int64_t m = info.microBatches;
  // World ranks are row-major over the mesh axes: pipeline rank r of this
  // rank's pipeline.
  int64_t stride = 1;
  for (int a = pp.ppAxis + 1; a < info.numMeshAxes; ++a)
    stride *= info.meshAxisSizes[a];
  auto worldOf = [&](int stage) {
    return static_cast<int>(comm.rank() +
                            (pp.stages[stage].rank - rank) * stride);
  };
  // Gradients accumulate over the phases of the step.
  for (size_t k = 0; k < grads.size(); ++k)
    if (grads[k])
      device.zero(grads[k].get(), shards[k].tensor->numElements *
                                      shards[k].tensor->gradElementBytes);
  // Buffers come from the pool and go back to it after their last use (on
  // a device, uses are ordered on the compute stream, and the transfers
  // after what the compute stream issued before them).
  auto take = [&](int64_t bytes) {
    auto it = pipelineBuffers.find(bytes);
    if (it == pipelineBuffers.end()) {
      DeviceBuffer buffer = device.allocate(bytes);
      if (!buffer) {
        std::fprintf(stderr,
                     "train: rank %d: out of memory on %s for a pipeline "
                     "buffer of %lld bytes\n",
                     comm.rank(), device.name().c_str(),
                     static_cast<long long>(bytes));
        comm.abort(1);
      }
      return buffer;
    }
    DeviceBuffer buffer = std::move(it->second);
    pipelineBuffers.erase(it);
    return buffer;
  };
  auto give = [&](DeviceBuffer &buffer, int64_t bytes) {
    if (buffer)
      pipelineBuffers.emplace(bytes, std::move(buffer));
  };
  // What a micro-batch in flight on a stage keeps until its last phase,
  // and the requests of the groups that receive its input and its output's
  // gradient.
  struct InFlight {
    DeviceBuffer received, outputGrad;
    std::vector<DeviceBuffer> saved;
    autopar::rt::CommRequest receivedBy, outputGradBy;
  };
  std::map<std::pair<int, int>, InFlight> live;
  // What a stage made for micro-batch j, until its group sends it: the
  // activation (false) or its input's gradient (true).
  std::map<std::tuple<bool, int, int>, DeviceBuffer> outbox;
  auto bytesOf = [&](const autopar::rt::PipelineTransfer &t) {
    const autopar::rt::PipelineStage &from = pp.stages[t.stage];
    return t.gradient ? from.inputBytes : from.outputBytes;
  };
  // The rank's transfer groups before its action `before`, each started
  // as one exchange. An action waits only for the transfers that bring what
  // it reads (NCCL: for their group; on a device, the compute stream
  // waits): the groups complete in order on NCCL's stream, the transfers in
  // any order under MPI (which the compiler's replay of the stricter order
  // covers). Sent buffers go back to the pool after the step.
  int group = pp.firstGroup[rank];
  std::vector<autopar::rt::PointToPoint> ops;
  std::vector<autopar::rt::CommRequest> requests;
  std::vector<std::pair<DeviceBuffer, int64_t>> sent;
  auto transfers = [&](int before) {
    for (; group < pp.firstGroup[rank + 1] && pp.groups[group].before == before;
         ++group) {
      const autopar::rt::PipelineGroup &g = pp.groups[group];
      ops.clear();
      for (int i = g.first; i < g.first + g.count; ++i) {
        const autopar::rt::PipelineTransfer &t = pp.transfers[i];
        const int to = t.gradient ? t.stage - 1 : t.stage + 1;
        const int64_t bytes = bytesOf(t);
        // One tag per transfer (the MPI backend matches by tag; NCCL by
        // order, which the compiler made the same on both sides).
        const int tag = t.gradient
                            ? static_cast<int>((to * m + t.micro) * 2 + 1)
                            : static_cast<int>((t.stage * m + t.micro) * 2);
        if (t.send) {
          auto it = outbox.find({t.gradient != 0, t.stage, t.micro});
          sent.emplace_back(std::move(it->second), bytes);
          outbox.erase(it);
          ops.push_back(
              {true, sent.back().first.get(), bytes, worldOf(to), tag});
        } else {
          InFlight &f = live[{to, t.micro}];
          DeviceBuffer &into = t.gradient ? f.outputGrad : f.received;
          into = take(bytes);
          ops.push_back({false, into.get(), bytes, worldOf(t.stage), tag});
        }
      }
      requests.resize(ops.size());
      comm.exchange(ops.data(), static_cast<int>(ops.size()), requests.data());
      for (int i = 0; i < g.count; ++i) {
        const autopar::rt::PipelineTransfer &t = pp.transfers[g.first + i];
        if (t.send)
          continue;
        InFlight &f = live[{t.gradient ? t.stage - 1 : t.stage + 1, t.micro}];
        (t.gradient ? f.outputGradBy : f.receivedBy) = requests[i];
      }
    }
  };
  double lossSum = 0;
  // --trace: microseconds of the monotonic clock (one clock for the ranks
  // of a host), each action from after what it receives has arrived to the
  // end of its computation (before what it sends).
  const bool tracing = step == tracedStep;
  auto since = [] {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  if (tracing)
    traceTimes.assign(2 * pp.first[pp.numRanks], 0.0);
  for (int a = pp.first[rank]; a < pp.first[rank + 1]; ++a) {
    const autopar::rt::PipelineAction &act = pp.actions[a];
    const autopar::rt::PipelineStage &st = pp.stages[act.stage];
    const bool last = act.stage + 1 == pp.numStages;
    const autopar::rt::PipelinePhase &ph = act.op == 0   ? st.forward
                                           : act.op == 1 ? st.backward
                                           : act.op == 2 ? st.input
                                                         : st.weight;
    fillInputs(tokens, step, act.micro);
    // The activation from the previous stage and the gradient from the
    // next arrive in the groups before the action (or earlier).
    transfers(a - pp.first[rank]);
    InFlight &f = live[{act.stage, act.micro}];
    if (act.op == 0 && act.stage > 0)
      comm.wait(f.receivedBy);
    if ((act.op == 1 || act.op == 2) && !last)
      comm.wait(f.outputGradBy);
    if (tracing) {
      device.synchronize();
      traceTimes[2 * a] = since();
    }
    if (act.op == 0)
      f.saved.resize(st.numSaved);
    std::vector<const void *> in;
    for (int i = 0; i < ph.numArgs; ++i) {
      const autopar::rt::PipelineSlot &slot = ph.args[i];
      in.push_back(slot.kind == 0   ? inputPtrs[slot.index]
                   : slot.kind == 1 ? f.received.get()
                   : slot.kind == 2 ? f.outputGrad.get()
                                    : f.saved[slot.index].get());
    }
    std::vector<void *> out;
    DeviceBuffer output, inputGrad;
    for (int r = 0; r < ph.numResults; ++r) {
      const autopar::rt::PipelineSlot &slot = ph.results[r];
      if (slot.kind == 0) {
        if (!last)
          output = take(st.outputBytes);
        out.push_back(last ? lossBuffer.get() : output.get());
      } else if (slot.kind == 1) {
        out.push_back(grads[trainableIndex[slot.index]].get());
      } else if (slot.kind == 2) {
        inputGrad = take(st.inputBytes);
        out.push_back(inputGrad.get());
      } else {
        f.saved[slot.index] = take(st.savedBytes[slot.index]);
        out.push_back(f.saved[slot.index].get());
      }
    }
    autopar::rt::StepIO io{params.get(),
                           in.data(),
                           arena.get(),
                           out.data(),
                           1.0f / static_cast<float>(m),
                           true};
    io.comm = &comm;
    io.device = device.context();
    ph.fn(io);
    if (tracing) {
      device.synchronize();
      traceTimes[2 * a + 1] = since();
    }
    if (act.op == 0 && last) {
      float loss = 0;
      device.download(&loss, lossBuffer.get(), sizeof(float));
      lossSum += loss;
    } else if (act.op == 0) {
      outbox[{false, act.stage, act.micro}] = std::move(output);
    }
    if (inputGrad && act.stage > 0)
      outbox[{true, act.stage, act.micro}] = std::move(inputGrad);
    else
      give(inputGrad, st.inputBytes);
    // The micro-batch leaves the stage after its last phase.
    if (act.op == 1 || act.op == 3) {
      give(f.received, st.inputBytes);
      give(f.outputGrad, st.outputBytes);
      for (int i = 0; i < st.numSaved; ++i)
        give(f.saved[i], st.savedBytes[i]);
      live.erase({act.stage, act.micro});
    }
  }
  transfers(pp.first[rank + 1] - pp.first[rank]);
  comm.waitAll();
  for (auto &[buffer, bytes] : sent)
    give(buffer, bytes);
  if (tracing)
    comm.allReduceSumDouble(traceTimes.data(),
                            static_cast<int64_t>(traceTimes.size()), ppMask);
  comm.allReduceSumDouble(&lossSum, 1, ppMask);
  return lossSum;
}

Status Trainer::haveOthersState(bool have) {
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

void Trainer::copyOnDevice(void *dst, const void *src, int64_t bytes) {
  if (device.hostMemory()) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  std::vector<char> staging(static_cast<size_t>(bytes));
  device.download(staging.data(), src, bytes);
  device.upload(dst, staging.data(), bytes);
}

Status Trainer::wholeParameters(bool have) {
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

Status Trainer::syncPipelineTensors(bool withState) {
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

Status Trainer::writeTrace() {
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  static const char *const kOps[] = {"F", "B", "I", "W"};
  // Times from the step's first action.
  double t0 = traceTimes.empty() ? 0 : traceTimes[0];
  for (size_t i = 0; i < traceTimes.size(); i += 2)
    t0 = std::min(t0, traceTimes[i]);
  std::string out = "{\"traceEvents\": [\n";
  char buf[256];
  for (int r = 0; r < pp.numRanks; ++r) {
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                  "\"tid\": %d, \"args\": {\"name\": \"pp rank %d\"}},\n",
                  r, r);
    out += buf;
  }
  for (int r = 0; r < pp.numRanks; ++r)
    for (int a = pp.first[r]; a < pp.first[r + 1]; ++a) {
      const autopar::rt::PipelineAction &act = pp.actions[a];
      std::snprintf(buf, sizeof(buf),
                    "{\"name\": \"%s%d s%d\", \"cat\": \"%s\", \"ph\": \"X\", "
                    "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                    "\"args\": {\"stage\": %d, \"micro_batch\": %d}}%s\n",
                    kOps[act.op], static_cast<int>(act.micro),
                    static_cast<int>(act.stage), kOps[act.op], r,
                    traceTimes[2 * a] - t0,
                    traceTimes[2 * a + 1] - traceTimes[2 * a],
                    static_cast<int>(act.stage), static_cast<int>(act.micro),
                    a + 1 < pp.first[pp.numRanks] ? "," : "");
      out += buf;
    }
  out += "],\n\"displayTimeUnit\": \"ms\"}\n";
  return autopar::rt::writeFileAtomically(o.trace, out.data(), out.size());
}

Status Trainer::evaluate(double &loss) {
  if (info.pipeline)
    AUTOPAR_RT_RETURN_IF_ERROR(syncPipelineTensors(/*withState=*/false));
  void *outputs[] = {lossBuffer.get()};
  double sum = 0;
  for (int64_t step = 0; step < o.evalSteps; ++step)
    for (int64_t micro = 0; micro < info.microBatches; ++micro) {
      fillInputs(evalTokens, step, micro);
      sum += runStep(info.forward, 1,
                     {info.pipeline ? wholeParams.get() : params.get(),
                      inputPtrs.data(), arena.get(), outputs, 1.0f, false});
    }
  loss = sum / static_cast<double>(o.evalSteps * info.microBatches);
  return info.pipeline ? wholeParameters(false) : Status::ok();
}

/// JSON of the bytes the collectives moved since the last reset.
/// The step's comm bytes keyed by group (its mesh axes joined by ',', mesh
/// order; every axis of size > 1 listed, zeros included), then kind (a
/// point-to-point send under the axes the two ranks differ on), as
/// report.json's comm_bytes_per_step.
std::string commBytesJson(const Communicator &comm,
                          const autopar::rt::ModelInfo &info) {
  using autopar::rt::jsonExactNumber;
  std::vector<autopar::rt::AxisMask> groups;
  for (int a = 0; a < info.numMeshAxes; ++a)
    if (info.meshAxisSizes[a] > 1)
      groups.push_back(1u << a);
  for (autopar::rt::AxisMask g : comm.groupsWithBytes())
    if (std::find(groups.begin(), groups.end(), g) == groups.end())
      groups.push_back(g);
  std::sort(groups.begin(), groups.end());
  std::string json = "{";
  for (autopar::rt::AxisMask g : groups) {
    std::string name;
    for (int a = 0; a < info.numMeshAxes; ++a)
      if ((g >> a) & 1)
        name += (name.empty() ? "" : ",") + std::string(info.meshAxisNames[a]);
    json +=
        (json.size() > 1 ? ",\"" : "\"") + name + "\":{\"all_reduce\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::AllReduce, g)) +
        ",\"reduce_scatter\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::ReduceScatter, g)) +
        ",\"all_gather\":" +
        jsonExactNumber(comm.bytes(CollectiveKind::AllGather, g)) +
        ",\"send\":" + jsonExactNumber(comm.bytes(CollectiveKind::Send, g)) +
        "}";
  }
  return json + "}";
}

Status Trainer::run() {
  if (!o.trace.empty()) {
    if (!info.pipeline)
      return Status::error("--trace: this program has no pipeline "
                           "(mesh.pp = 1); only pipeline-parallel programs "
                           "trace their steps");
    // The last step: the pipeline in its steady state.
    tracedStep = o.steps - 1;
  }
  const int64_t dp = dpSize();
  const int64_t globalBatch = info.microBatch * info.microBatches * dp;
  std::vector<void *> outputs(std::max(info.trainStepResults, 1));
  outputs[0] = lossBuffer.get();
  if (!info.pipeline) {
    size_t k = 0;
    for (int t = 0; t < info.numTensors; ++t)
      if (info.tensors[t].trainable)
        outputs[info.tensors[t].gradResult] = grads[k++].get();
  }
  for (DeviceBuffer &b : inputs)
    inputPtrs.push_back(b.get());
  for (int i = 0; i < info.numInputs; ++i) {
    if (info.inputs[i].role == 0)
      tokensInput = i;
    else if (info.inputs[i].role == 1)
      targetsInput = i;
  }
  sampleIds.resize(info.microBatch * info.seqLen);
  sampleTargets.resize(sampleIds.size());

  // What computes, once the run is set up: the device and its kernels, and
  // a warning where the environment makes them slower than they can be.
  if (leader()) {
    std::printf("train: %s, %d rank%s\n", device.describe().c_str(),
                comm.worldSize(), comm.worldSize() == 1 ? "" : "s");
    std::fflush(stdout);
    if (std::string warning = device.performanceWarning(); !warning.empty())
      std::fprintf(stderr, "train: warning: %s\n", warning.c_str());
  }
  // From here SIGTERM and SIGINT end the run after the step in progress.
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  int64_t stepsDone = std::max(o.steps, startStep);
  for (int64_t step = startStep; step < o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    // The NCCL build's collectives block the host only at the step's waits
    // for its GPU work: the watchdog (comm.timeout_s) spans the step.
    const std::string stepWork =
        "step " + std::to_string(step) + "'s GPU work and NCCL collectives";
    std::optional<autopar::rt::Communicator::DeviceWork> watched;
    watched.emplace(comm, stepWork.c_str());
    comm.resetBytes();
    const double stepScale = lossScale;
    if (lossScaleInput >= 0) {
      float scale = static_cast<float>(lossScale);
      device.upload(inputs[lossScaleInput].get(), &scale, sizeof(scale));
    }
    double lossSum = 0;
    if (info.pipeline)
      lossSum = pipelineStep(step);
    for (int64_t micro = 0; micro < info.microBatches && !info.pipeline;
         ++micro) {
      fillInputs(tokens, step, micro);
      lossSum += runStep(info.trainStep, info.trainStepResults,
                         {params.get(), inputPtrs.data(), arena.get(),
                          outputs.data(),
                          1.0f / static_cast<float>(info.microBatches),
                          micro > 0});
    }
    // Gradients whose sum is still pending (ZeRO-1; gradient accumulation
    // at stage 0): reduce-scattered into the update's shard, or
    // all-reduced, once per step.
    bool reducing = false;
    for (size_t k = 0; k < shards.size(); ++k) {
      const autopar::rt::TensorInfo &ti = *shards[k].tensor;
      if (!ti.gradReduceAxes ||
          othersTensor(static_cast<int>(shards[k].tensor - info.tensors)))
        continue;
      reducing = true;
      char *full = grads[k].get();
      // Pending over more axes than the update is sharded over (a tied
      // embedding's sum over pp): summed over those first.
      const autopar::rt::AxisMask first = ti.gradReduceAxes & ~ti.updateAxes;
      if (ti.updateAxes && first)
        comm.wait(
            comm.allReduceSum(full, ti.numElements, gradCommType(ti), first));
      if (ti.updateAxes)
        comm.reduceScatterFlat(full, ti.numElements,
                               full + shards[k].begin * ti.gradElementBytes,
                               gradCommType(ti), ti.updateAxes);
      else
        comm.allReduceSum(full, ti.numElements, gradCommType(ti),
                          ti.gradReduceAxes);
    }
    if (reducing)
      comm.waitAll();
    // Each group's squares are summed over the ranks holding its shards.
    double squares = 0;
    for (const auto &[axes, group] : normGroups) {
      double part = device.gradSquaredSum(group);
      if (axes)
        comm.allReduceSumDouble(&part, 1, axes);
      squares += part;
    }
    double norm = std::sqrt(squares);
    double lr = autopar::rt::scheduledLr(config, step, o.steps);
    // fp16-mixed: gradients of the scaled loss. An inf or NaN among them
    // (the same on every rank: the squares are summed over dp) skips the
    // update; otherwise they are unscaled, with the clipping coefficient,
    // inside the update (in float, as torch's GradScaler unscales before
    // clip_grad_norm_).
    const bool skipped = lossScale > 0 && !std::isfinite(squares);
    if (lossScale > 0)
      norm /= lossScale;
    if (skipped) {
      ++skippedSteps;
    } else {
      // The update multiplies each gradient by the inverse loss scale and
      // the clipping coefficient, in float: the value torch's
      // grad.mul_(coef) stores.
      float gradScale =
          lossScale > 0 ? static_cast<float>(1.0 / lossScale) : 1.0f;
      float coef;
      if (autopar::rt::clipCoefficient(config, norm, coef))
        gradScale *= coef;
      const int64_t stepCount = step + 1 - skippedSteps;
      if (info.offload) {
        // ZeRO-Offload: the optimizer state and its update on the host.
        for (size_t k = 0; k < slices.size(); ++k)
          hostUpdate(k, stepCount, lr, gradScale);
      } else {
        device.optimizerStep(config, slices, stepCount, lr, gradScale);
      }
    }
    if (lossScale > 0) {
      if (skipped) {
        lossScale *= lossConfig.backoffFactor;
        goodSteps = 0;
      } else if (++goodSteps == lossConfig.growthInterval) {
        lossScale *= lossConfig.growthFactor;
        goodSteps = 0;
      }
    }
    if (!skipped) {
      // Every rank updated its shard of a whole parameter (ZeRO-1/2):
      // all-gather.
      bool gathering = false;
      for (const Shard &sh : shards) {
        const autopar::rt::TensorInfo &ti = *sh.tensor;
        if (!ti.updateAxes || ti.paramSharded ||
            othersTensor(static_cast<int>(&ti - info.tensors)))
          continue;
        gathering = true;
        char *full = paramAt(static_cast<int>(&ti - info.tensors));
        comm.allGatherFlat(full + sh.begin * ti.elementBytes, ti.numElements,
                           full, commType(ti), ti.updateAxes);
      }
      if (gathering)
        comm.waitAll();
    }
    device.synchronize();
    watched.reset();
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double stepTokens = static_cast<double>(globalBatch * info.seqLen);
    if (leader()) {
      autopar::rt::StepRecord record{step, lossSum / info.microBatches, lr,
                                     norm, ms, stepTokens / (ms / 1000.0)};
      if (comm.worldSize() > 1)
        record.extra = "\"comm_bytes\":" + commBytesJson(comm, info);
      if (stepScale > 0)
        record.extra += (record.extra.empty() ? "" : ",") +
                        std::string("\"loss_scale\":") +
                        autopar::rt::jsonNumber(stepScale) +
                        (skipped ? ",\"skipped\":true" : "");
      logger.logStep(record, o.steps);
      AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
    }
    // Evaluation with the weights after step + 1 updates (those the
    // forward of step + 1 uses), every --eval-every steps and at the end.
    if (o.evalEvery > 0 &&
        ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps)) {
      double evalLoss = 0;
      AUTOPAR_RT_RETURN_IF_ERROR(evaluate(evalLoss));
      if (leader()) {
        char line[128];
        std::snprintf(line, sizeof(line), "{\"step\":%lld,\"eval_loss\":%s}",
                      static_cast<long long>(step + 1),
                      autopar::rt::jsonNumber(evalLoss).c_str());
        logger.logEvent(line);
        AUTOPAR_RT_RETURN_IF_ERROR(logger.writeStatus());
      }
    }
    // SIGTERM / SIGINT on any rank: every rank stops after this step (they
    // agree through the sum), saves and exits.
    double stop = stopSignal.load() != 0 ? 1 : 0;
    if (comm.worldSize() > 1)
      comm.allReduceSumDouble(&stop, 1, (1u << info.numMeshAxes) - 1);
    if (stop > 0 && step + 1 < o.steps) {
      stopped = stopSignal.load() != 0 ? stopSignal.load() : SIGTERM;
      stepsDone = step + 1;
      break;
    }
    if (o.saveEvery > 0 && (step + 1) % o.saveEvery == 0 && step + 1 < o.steps)
      AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, step + 1));
  }
  if (leader())
    logger.finish();
  if (leader() && tracedStep >= startStep && !stopped)
    AUTOPAR_RT_RETURN_IF_ERROR(writeTrace());
  if (!o.save.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(save(o.save, stepsDone));
  if (stopped) {
    if (leader()) {
      std::fflush(stdout);
      std::fprintf(stderr, "train: %s: stopped after step %lld of %lld; %s\n",
                   stopped == SIGINT ? "SIGINT" : "SIGTERM",
                   static_cast<long long>(stepsDone),
                   static_cast<long long>(o.steps),
                   o.save.empty() ? "nothing saved (no --save)"
                                  : ("checkpoint saved to " + o.save).c_str());
    }
    return Status::ok();
  }
  if (!o.exportOnnx.empty())
    AUTOPAR_RT_RETURN_IF_ERROR(exportOnnx());
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  Device::prepareProcess(argv);
  const autopar::rt::ModelInfo &info = autoparModelInfo();
  Options options;
  int exitCode = 0;
  if (!parseOptions(argc, argv, options, exitCode))
    return exitCode;
  // The device first: the communicator's GPU streams and NCCL communicators
  // live on it. Under mpirun the launcher's variables say which rank this
  // is before MPI starts.
  auto envRank = [](const char *name) {
    const char *value = std::getenv(name);
    return value ? std::atoi(value) : 0;
  };
  std::unique_ptr<Device> device;
  Status status =
      Device::create(envRank("OMPI_COMM_WORLD_LOCAL_RANK"),
                     envRank("OMPI_COMM_WORLD_RANK"), device);
  if (!status.isOk()) {
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    return 1;
  }
  std::vector<autopar::rt::MeshAxisInfo> axes;
  for (int a = 0; a < info.numMeshAxes; ++a)
    axes.push_back({info.meshAxisNames[a], info.meshAxisSizes[a]});
  std::unique_ptr<Communicator> comm;
  status = Communicator::create(&argc, &argv, axes.data(),
                                static_cast<int>(axes.size()), comm);
  if (!status.isOk()) {
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    return 1;
  }
  comm->setComputeStream(device->queue());
  comm->setTimeout(options.commTimeout > 0 ? options.commTimeout
                                           : info.commTimeoutSeconds,
                   "train");
  // Set-up errors (inputs, checkpoints) are the same on every rank: each
  // prints its line and all exit together. Later ones (rank 0's writes) end
  // every rank at once so that none waits in a collective.
  auto trainer = std::make_unique<Trainer>(info, options, *comm, *device);
  status = trainer->setUp();
  double failed = status.isOk() ? 0 : 1;
  comm->allReduceSumDouble(&failed, 1, (1u << info.numMeshAxes) - 1);
  if (status.isOk() && failed == 0) {
    status = trainer->run();
    // Stopped by SIGTERM / SIGINT: 128 + the signal, as a shell reports it.
    if (status.isOk() && trainer->stoppedBy())
      return 128 + trainer->stoppedBy();
  }
  if (!status.isOk()) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: %s\n", oneLine(status.message()).c_str());
    if (failed == 0 && comm->worldSize() > 1)
      comm->abort(1);
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
