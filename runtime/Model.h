//===- Model.h - interface between generated code and the runtime -*- C++ -*-===//
//
// The generated model source defines autoparModelInfo() and the step
// functions it names; the runtime's main program drives them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MODEL_H
#define AUTOPAR_RUNTIME_MODEL_H

#include <cstdint>

namespace autopar::rt {

class Communicator;
struct DeviceContext;
struct RandomKey;

/// ZeRO-Infinity's parameter offload (ModelInfo::nvmeParams): where a
/// step's gather of a ZeRO-3 parameter shard reads the shard. The shard's
/// place in the parameter blob holds nothing then; fetch() returns its
/// bytes (read ahead from the swap file in the order of the last step's
/// fetches), valid until the matching release(), which the generated code
/// calls once the gather that read it is complete.
class ParamSource {
public:
  virtual const void *fetch(const void *shard) = 0;
  virtual void release(const void *shard) = 0;

protected:
  ~ParamSource() = default;
};

/// Buffers of one call of a generated step function.
struct StepIO {
  /// The parameter blob (ModelInfo::paramBytes bytes).
  char *params;
  /// Graph inputs, in ModelInfo::inputs order.
  const void *const *inputs;
  /// Scratch arena (the function's arenaBytes bytes, 64-byte aligned).
  char *arena;
  /// One pointer per function result.
  void *const *outputs;
  /// Gradient results: outputs[i] = (accumulate ? outputs[i] : 0) +
  /// gradScale * gradient.
  float gradScale;
  bool accumulate;
  /// The collectives of a program with a mesh (runtime/comm/Comm.h).
  Communicator *comm = nullptr;
  /// The target's stream, library handles and scratch (runtime/Device.h).
  /// Every pointer above is device memory of this device, aligned to 64
  /// bytes (Device::allocate); the generated code relies on it.
  DeviceContext *device = nullptr;
  /// The key of the dropout masks of this call: the seed, the step and the
  /// micro-batch (runtime/support/Philox.h), in device memory (read by the
  /// kernels). Null where the function has no dropout.
  const RandomKey *random = nullptr;
  /// ZeRO-Infinity's parameter offload (ModelInfo::nvmeParams): where the
  /// gathers read ZeRO-3's parameter shards; null: in `params`.
  ParamSource *paramSource = nullptr;
};

using StepFunction = void (*)(const StepIO &io);

/// A tensor of the parameter blob: a parameter (trainable or frozen) or a
/// buffer, with the initializer it starts from.
struct TensorInfo {
  const char *name;
  /// The ONNX initializer whose bytes initialize it (its own name, or the
  /// source of an Identity alias).
  const char *initFrom;
  /// TensorProto data type (1 float, 7 int64, 9 bool, ...).
  int32_t onnxType;
  int32_t elementBytes;
  int32_t rank;
  /// This rank's tensor: the logical tensor, or under tensor parallelism
  /// its block (dim d split over the mesh axes splitAxes[d]).
  int64_t shape[8];
  int64_t numElements;
  /// The whole tensor this rank's is a block of, in the same dims, and
  /// the axes (masks, 0: whole) splitting each of them.
  int64_t logicalShape[8];
  int64_t logicalElements;
  uint32_t splitAxes[8];
  /// The shape weights.bin, checkpoints and ONNX exports give the whole
  /// tensor (the model's): the same row-major elements, in other dims
  /// where the compiler views it otherwise (a fused QKV weight [h, 3h]
  /// viewed as [h, 3, h]), or, with fewer elements than the logical
  /// tensor, its leading block in the same dims: the logical tensor is the
  /// file's padded with zeros (a vocabulary padded to a multiple of tp).
  int32_t fileRank;
  int64_t fileShape[8];
  int64_t fileElements;
  /// Byte offset in the parameter blob.
  int64_t offset;
  bool trainable;
  bool decay;
  /// A constant of the model held as a tensor (nn.buffer), not a parameter.
  bool buffer;
  /// Index of its gradient among the train step's results (-1 if frozen).
  int32_t gradResult;
  /// Elements this rank stores at `offset`: numElements, or, with
  /// paramSharded, its flat shard over updateAxes (ceil(numElements / g),
  /// zero-padded).
  int64_t storedElements;
  /// Byte offset of the full tensor in weights.bin.
  int64_t fileOffset;
  /// Mixed precision: the stored tensor (onnxType, elementBytes: bfloat16)
  /// is the rounded copy of a float32 master that the optimizer keeps and
  /// updates (sharded as its state). weights.bin, checkpoints and the ONNX
  /// export hold the float32 master.
  bool master;
  /// The gradient's type (TensorProto data type) and element size: the
  /// stored tensor's, or float32 for a master's under grad_dtype fp32
  /// (accumulated, reduced and read by the optimizer in float32).
  int32_t gradOnnxType;
  int32_t gradElementBytes;
  /// What the runtime does with a trainable tensor once per step; the
  /// compiler reads it off the final IR (compiler/program/ProgramIR.h), the runtime
  /// only executes it. Masks are over the mesh axes (runtime/comm/Comm.h).
  /// updateAxes: the optimizer keeps state for, and updates, this rank's
  /// flat shard over these axes (ZeRO 1-3); 0: the whole tensor.
  uint32_t updateAxes;
  /// The step's gradient is still a sum pending over these axes after the
  /// last micro-batch (ZeRO-1, gradient accumulation at stage 0): the
  /// runtime reduce-scatters it into the update's shard when updateAxes is
  /// set, else all-reduces it; 0: reduced by the step itself.
  uint32_t gradReduceAxes;
  /// Of gradReduceAxes, those summed over after the reduce-scatter, on the
  /// shard (hybrid sharding's replicas, which hold the same shards).
  uint32_t shardReduceAxes;
  /// The step returns the gradient as this rank's flat shard over
  /// updateAxes (ZeRO-2/3), and the parameter is stored as that shard
  /// (ZeRO-3; otherwise the runtime all-gathers the updated shards).
  bool gradSharded;
  bool paramSharded;
  /// The squared norm of the gradient is spread over these axes (the
  /// update's flat shards, the tensor-parallel blocks): the runtime sums
  /// this rank's share over them (0: this rank holds all of it).
  uint32_t normAxes;
  /// Rows of dim 0 of the logical tensor that the optimizer leaves
  /// unchanged and the gradient norm leaves out (plan `frozen`
  /// "GLOB[ROWS]"): numFrozenRanges sorted [begin, end) pairs; null: none.
  const int64_t *frozenRows;
  int32_t numFrozenRanges;
  /// Where its initial value comes from: 0 weights.bin; 1 PEFT's
  /// initialization of a LoRA A (kaiming_uniform_(a = sqrt(5)): uniform in
  /// +-1 / sqrt(initFanIn)), drawn from the run's --seed with Philox stream
  /// initStream (runtime/support/Philox.h loraInitValue), whatever the
  /// plan.
  int32_t init;
  uint32_t initStream;
  int64_t initFanIn;
};

/// A LoRA adapter (plan `lora`): the frozen weight `base` (a tensor index)
/// and its trained A [r, in] and B [out, r]; the merged weight is base +
/// scale * B A ([out, in]; transposed where `inOut`, GPT-2's Conv1D).
/// `module` is PEFT's module name (the weight's name less ".weight" and the
/// plan's lora.module_prefix).
struct LoraAdapter {
  int32_t base, a, b;
  /// The weight's name (`base` is -1 where it is quantized, a
  /// QuantizedWeight).
  const char *baseName;
  double scale;
  bool inOut;
  const char *module;
};

/// A parameter of one of PEFT's modules_to_save (a module of which plan
/// lora.also_train trains a parameter): its tensor and its name in PEFT's
/// adapter_model.safetensors.
struct LoraSavedTensor {
  int32_t tensor;
  const char *key;
};

/// A frozen weight held quantized (plan `quantize`): the tensors of its
/// codes and absmax scales, as runtime/support/Quantize.h reads them (kind
/// 0 NF4 in blocks of blockSize, 1 INT8 per output feature along `axis`),
/// and its [rows, cols].
struct QuantizedWeight {
  const char *name;
  int32_t codes, absmax;
  int32_t state2; // double quantization's offset and scales, or -1
  int32_t kind;
  int64_t blockSize;
  int32_t axis;
  int64_t rows, cols;
};

/// One non-parameter argument or one result of a pipeline phase function.
struct PipelineSlot {
  /// Arguments (StepIO::inputs, in order): 0 graph input `index` (of
  /// ModelInfo::inputs), 1 the activation the stage received, 2 the
  /// gradient of its output (from the next stage), 3 the stage's saved
  /// value `index`. Results (StepIO::outputs): 0 the stage's output (the
  /// loss on the last stage), 1 the gradient of tensor `index` (of
  /// ModelInfo::tensors), 2 the gradient of the received activation (to
  /// the previous stage), 3 saved value `index`.
  int32_t kind;
  int32_t index;
};

/// A phase of a pipeline stage's training step (autopar-dist-pipeline-
/// phases): its function, arena, and what its arguments and results are.
struct PipelinePhase {
  StepFunction fn;
  int64_t arenaBytes;
  const PipelineSlot *args;
  int32_t numArgs;
  const PipelineSlot *results;
  int32_t numResults;
};

/// A pipeline stage: the pipeline rank that runs it, its phases (forward,
/// then backward, or input and weight gradients for zero-bubble
/// schedules: `fn` null where absent), the bytes of each value its forward
/// saves, and the bytes of the activation it receives and of the one it
/// sends (0 for none).
struct PipelineStage {
  int32_t rank;
  PipelinePhase forward, backward, input, weight;
  const int64_t *savedBytes;
  int32_t numSaved;
  int64_t inputBytes, outputBytes;
};

/// An action of a rank's schedule: 0 forward, 1 backward, 2 input
/// gradient, 3 weight gradients, of `stage` for micro-batch `micro`.
struct PipelineAction {
  int32_t op;
  int32_t stage;
  int32_t micro;
};

/// A point-to-point transfer between two stages' ranks: the activation
/// stage `stage` sends stage + 1 after its forward of micro-batch `micro`
/// (gradient 0), or the gradient of its input it sends stage - 1 (gradient
/// 1); `send`: this rank sends it, else receives it.
struct PipelineTransfer {
  int32_t gradient;
  int32_t stage;
  int32_t micro;
  int32_t send;
};

/// Transfers a rank starts together (one Communicator::exchange, an NCCL
/// group) and waits for before its action `before` (its index in the
/// rank's list; the list's length: after the last):
/// transfers[first] .. transfers[first + count - 1]. The compiler groups
/// them so that they cannot deadlock under NCCL's ordering
/// (passes/parallel/Schedule.h groupTransfers).
struct PipelineGroup {
  int32_t before;
  int32_t first;
  int32_t count;
};

/// Pipeline parallelism: the stages, and each pipeline rank's actions
/// (rank r runs actions[first[r]] .. actions[first[r + 1] - 1]) and
/// transfer groups (groups[firstGroup[r]] .. groups[firstGroup[r + 1] -
/// 1], in order).
struct PipelineInfo {
  int32_t numStages;
  const PipelineStage *stages;
  int32_t numRanks;
  const PipelineAction *actions;
  const int32_t *first;
  const PipelineGroup *groups;
  const int32_t *firstGroup;
  const PipelineTransfer *transfers;
  /// Index of the pp axis in the mesh.
  int32_t ppAxis;
  /// Per tensor (ModelInfo::tensors): the first pipeline rank whose stages
  /// read it, whose copy is the tensor's value (-1: no stage reads it).
  const int32_t *tensorOwner;
  /// Each pipeline rank's parameter blob holds only the tensors its stages
  /// read (one no stage reads: rank 0's), laid out like the whole blob:
  /// paramOffsets[r * numTensors + t] is tensor t's byte offset in rank
  /// r's blob (-1: not there) and paramBytes[r] the blob's size. The phase
  /// functions of rank r's stages read rank r's blob.
  const int64_t *paramOffsets;
  const int64_t *paramBytes;
};

/// A graph input of the model.
struct InputInfo {
  const char *name;
  int32_t onnxType;
  int32_t elementBytes;
  int32_t rank;
  int64_t shape[8];
  /// 0: token ids, 1: targets (next tokens).
  int32_t role;
};

struct ModelInfo {
  /// Identifies the model's parameters (names, shapes, types).
  const char *fingerprint;
  const TensorInfo *tensors;
  int32_t numTensors;
  const InputInfo *inputs;
  int32_t numInputs;
  int64_t paramBytes;
  /// The training step: results are the loss then the gradients.
  StepFunction trainStep;
  int64_t trainStepArenaBytes;
  int32_t trainStepResults;
  /// The forward function: its only result is the loss.
  StepFunction forward;
  int64_t forwardArenaBytes;
  /// Samples per micro-step, micro-steps per step, sequence length.
  int64_t microBatch;
  int64_t microBatches;
  int64_t seqLen;
  /// Token ids must be below inputVocab; targets below targetVocab.
  int64_t inputVocab;
  int64_t targetVocab;
  /// The targets input holds the input tokens themselves (plan
  /// data.targets_from "tokens"), not the next tokens.
  bool targetsFromTokens;
  /// The device mesh (plan key `mesh`): axis names and sizes; ranks are
  /// row-major over the axes. A one-device program has the mesh [dp = 1].
  const char *const *meshAxisNames;
  const int64_t *meshAxisSizes;
  int32_t numMeshAxes;
  /// The data-parallel axes of the mesh (a mask: dp, and hybrid
  /// sharding's replica axis dpr outside it): the batch is split over them.
  uint32_t dataAxes;
  /// Bytes of weights.bin: the full tensors at their fileOffset (equal to
  /// paramBytes, and the same layout, when no tensor is sharded).
  int64_t weightFileBytes;
  /// ZeRO-Offload (plan zero.offload = cpu): the optimizer state (and the
  /// f32 masters of mixed precision) lives in host memory and the update
  /// runs on the host, on each rank's shard of the reduced gradients.
  bool offload;
  /// ZeRO-Infinity (plan zero.offload = nvme): the folder whose swap file
  /// holds that state instead, streamed through buffers of
  /// nvmeChunkElements elements per array (runtime/offload/SwapFile.h);
  /// null otherwise.
  const char *nvmePath;
  int64_t nvmeChunkElements;
  /// ZeRO-Infinity's parameter offload (plan zero.offload_params = nvme):
  /// the ZeRO-3 parameter shards (TensorInfo::paramSharded) live in the
  /// swap file as well and a step reads each through StepIO::paramSource.
  bool nvmeParams;
  /// The watchdog's timeout (plan comm.timeout_s): a rank blocked on one
  /// collective or transfer this long ends the job.
  double commTimeoutSeconds;
  /// The buckets (bytes) in which the small gradient sums still pending
  /// after a step are all-reduced together (plan comm.bucket_mb;
  /// runtime/comm/CommBytes.h StepBuckets).
  int64_t stepBucketBytes;
  /// What runs the 16-bit attention (plan attention_backend): an
  /// rt::AttentionBackend (runtime/cpu/Attention.h).
  int32_t attentionBackend;
  /// Whether the step functions drop out (nn.dropout): they read the key
  /// at StepIO::random.
  bool dropout;
  /// Pipeline parallelism (mesh.pp > 1): the stages' phases run by the
  /// schedule instead of trainStep (null); null without a pipeline.
  const PipelineInfo *pipeline;
  /// The quantized frozen weights (plan `quantize`).
  const QuantizedWeight *quantized;
  int32_t numQuantized;
  /// LoRA (plan `lora`): the adapters, and the adapter_config.json of PEFT
  /// that `train --export-adapter` writes beside them.
  const LoraAdapter *lora;
  int32_t numLora;
  const char *loraConfig;
  /// The parameters of modules_to_save, exported with the adapters; and
  /// why --export-adapter cannot write them in PEFT's format (null: it
  /// can).
  const LoraSavedTensor *loraSaved;
  int32_t numLoraSaved;
  const char *loraExportProblem;
};

/// A graph input or output of a forward-only program.
struct GraphTensorInfo {
  const char *name;
  /// TensorProto data type.
  int32_t onnxType;
  int32_t elementBytes;
  int32_t rank;
  int64_t shape[8];
  int64_t numElements;
  /// Inputs: the index into StepIO::inputs, or -1 for an input fixed at
  /// compile time (`--input-value`), whose bytes are `value`. Outputs: -1.
  int32_t argument;
  const void *value;
};

/// A forward-only program (`autopar compile --forward-only`): the graph's
/// function, its parameters in the blob, its inputs and outputs in graph
/// order.
struct ForwardProgramInfo {
  int64_t paramBytes;
  const GraphTensorInfo *inputs;
  int32_t numInputs;
  const GraphTensorInfo *outputs;
  int32_t numOutputs;
  /// Writes output i to StepIO::outputs[i].
  StepFunction forward;
  int64_t arenaBytes;
};

} // namespace autopar::rt

/// Defined by the generated source of a training program.
const autopar::rt::ModelInfo &autoparModelInfo();
/// Defined by the generated source of a forward-only program.
const autopar::rt::ForwardProgramInfo &autoparForwardProgramInfo();

#endif // AUTOPAR_RUNTIME_MODEL_H
