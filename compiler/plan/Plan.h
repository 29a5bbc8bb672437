//===- Plan.h - the parallelization plan file -------------------*- C++ -*-===//
//
// The plan is the JSON file that says how to train a model: the device mesh,
// micro-batching, ZeRO, precision, recompute, the pipeline schedule, the
// optimizer and its LR schedule, which parameters are frozen and which graph
// inputs are data. docs/plan.md is the user reference of every key.
//
// Plan.cpp spells each key once, in its table of keys (planKeys()): parsing,
// the "unknown key" messages and toJson() all read that table, and a rule
// between keys sits beside the later key (or, across objects, in one check
// after every key is read).
//
// Plan.cpp is the only file that uses nlohmann::json exceptions (it is built
// with -fexceptions); none escapes from it. This header includes only
// <nlohmann/json_fwd.hpp>: callers of toJson() or parsePlan() that build or
// read a JSON value include <nlohmann/json.hpp> themselves.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_PLAN_H
#define AUTOPAR_COMPILER_PLAN_PLAN_H

#include <nlohmann/json_fwd.hpp>

#include "passes/parallel/Globs.h"
#include "passes/parallel/Schedule.h"

#include <cstdint>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autopar {

/// `optimizer`: PyTorch 1.13's torch.optim.AdamW or torch.optim.SGD, with
/// torch.nn.utils.clip_grad_norm_ when maxGradNorm > 0.
struct OptimizerPlan {
  std::string type = "adamw"; // "adamw" | "sgd"
  double lr = 1e-3;
  // AdamW only.
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  // Both; the default is 0.01 for AdamW and 0 for SGD (parsePlan sets it).
  double weightDecay = 0.01;
  // SGD only.
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  // Both.
  double maxGradNorm = 0;           // 0 = no clipping
  std::vector<std::string> noDecay; // globs over initializer names
};

/// `lr_schedule`: "warmup_decay" (linear warmup, then constant, cosine or
/// linear decay), or one of DeepSpeed's schedulers as its engine runs them
/// ("deepspeed_warmup_lr", "deepspeed_warmup_decay_lr",
/// "deepspeed_warmup_cosine_lr": WarmupLR, WarmupDecayLR, WarmupCosineLR).
struct LrSchedulePlan {
  std::string type = "warmup_decay";
  int64_t warmupSteps = 0; // DeepSpeed's: warmup_num_steps
  // warmup_decay only.
  std::string decay = "constant"; // "constant" | "cosine" | "linear"
  double minLr = 0;
  // warmup_decay, and DeepSpeed's decaying ones (total_num_steps).
  int64_t decaySteps = 0; // 0 = the run's total --steps
  // DeepSpeed's only.
  std::string warmupType = "log"; // "log" | "linear"
  double warmupMinLr = 0;         // WarmupLR, WarmupDecayLR
  double warmupMinRatio = 0;      // WarmupCosineLR
  double cosMinRatio = 1e-4;      // WarmupCosineLR
};

/// fp16-mixed's dynamic loss scaling (torch.cuda.amp.GradScaler's
/// parameters and defaults; hysteresis and min_scale DeepSpeed's).
struct LossScalePlan {
  double initScale = 65536;
  double growthFactor = 2;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  int64_t hysteresis = 1;
  double minScale = 0;
};

/// `lora`: low-rank adapters beside the matching projections, with PEFT's
/// LoraConfig meaning (docs/fine-tuning.md). No targets: no LoRA.
struct LoraPlan {
  std::vector<std::string> targets; // globs over weight initializers
  int64_t r = 8;
  double alpha = 8;
  double dropout = 0;
  /// A PEFT adapter folder (adapter_config.json,
  /// adapter_model.safetensors) the adapters start from; "" = PEFT's
  /// initialization from the program's --seed.
  std::string initAdapter;
  /// Globs of further parameters to train (PEFT's modules_to_save).
  std::vector<std::string> alsoTrain;
  /// The prefix of the initializer names that PEFT's module names lack (a
  /// wrapper module's attribute, "model." for LossOnly(model)).
  std::string modulePrefix;
  bool enabled() const { return !targets.empty(); }
  /// The update's scale, PEFT's lora_alpha / r.
  double scale() const { return alpha / static_cast<double>(r); }
};

/// `quantize`: frozen weights held quantized (QLoRA's NF4, or INT8) and
/// dequantized at each use (docs/fine-tuning.md). No weights: none.
struct QuantizePlan {
  std::vector<std::string> weights; // globs over weight initializers
  std::string type = "nf4";         // "nf4" | "int8"
  int64_t blockSize = 64;           // NF4's absmax block
  bool doubleQuant = false;
  bool enabled() const { return !weights.empty(); }
};

struct Plan {
  int64_t meshDp = 1, meshTp = 1, meshPp = 1;
  /// mesh.cp: context parallelism, each rank a block of every sequence.
  int64_t meshCp = 1;
  /// context_parallel.mode: how attention reaches the other blocks' keys
  /// and values: "all_gather" (Llama 3's), "ulysses" (DeepSpeed-Ulysses'
  /// all-to-all to heads) or "ring" (Megatron-Core's point-to-point).
  std::string contextParallelMode = "all_gather";
  /// context_parallel.load_balance: how a sequence's tokens are dealt to
  /// the cp ranks. "zigzag": in 2 x cp chunks, rank r the r-th and the
  /// (2 cp - 1 - r)-th, so every rank does the same causal attention work
  /// (Megatron-Core's and Llama 3's); "none": contiguous blocks (and
  /// Ulysses' default).
  std::string contextParallelLoadBalance = "zigzag";
  int64_t microBatches = 1;
  /// "batch.global_batch": the global batch the plan was made for (a
  /// DeepSpeed config's train_batch_size); 0 = the model's, whatever it
  /// is. Compiling a model of another batch is refused.
  int64_t globalBatch = 0;
  int64_t zeroStage = 0;            // 0..3
  std::string zeroOffload = "none"; // "none" | "cpu" | "nvme"
  /// zero.offload "nvme" (ZeRO-Infinity): the folder of the swap files, and
  /// the MiB per state array of each of the two chunk buffers.
  std::string zeroNvmePath;
  double zeroNvmeChunkMb = 4;
  /// ZeRO-Infinity's parameter offload (DeepSpeed's offload_param): "nvme"
  /// keeps each ZeRO-3 parameter shard in the swap file too, read ahead of
  /// the gather that needs it; "none" keeps it in memory.
  std::string zeroOffloadParams = "none";
  /// Hybrid sharding (FSDP's HYBRID_SHARD, ZeRO++'s hpZ for every state):
  /// ZeRO shards over groups of this many data-parallel ranks and
  /// replicates across the mesh.dp / shard_size groups. 0 = mesh.dp (flat).
  int64_t zeroShardSize = 0;
  /// The ranks ZeRO shards over: zero.shard_size, or all of mesh.dp.
  int64_t zeroShards() const { return zeroShardSize ? zeroShardSize : meshDp; }
  double bucketMb = 25;
  /// A rank that waits on one collective or transfer longer than this ends
  /// the job (the runtime's watchdog).
  double commTimeoutS = 600;
  std::string precision = "fp32";        // "fp32" | "bf16-mixed" | "fp16-mixed"
  /// The type gradients are accumulated over micro-batches and reduced
  /// over dp in: "fp32", or the precision's parameter type ("bf16",
  /// "fp16"); "" = the parameters' (lowGradDtype()).
  std::string gradDtype;
  LossScalePlan lossScale;               // used by fp16-mixed
  std::string recompute = "none";        // "none" | "selective" | "full"
  /// "fused": attention chains become nn.attention (flash-attention
  /// kernels); "unfused": they stay matmul, softmax, matmul (the T x S
  /// scores stored, as Hugging Face's "eager" attention and Megatron-LM
  /// before FlashAttention run them).
  std::string attention = "fused";
  /// "attention_backend": what runs nn.attention on 16-bit tensors on the
  /// CUDA target: "auto" (cuDNN's fused attention where it takes the
  /// shape, else the own kernels), "cudnn" (cuDNN or the program fails),
  /// "own" (the own kernels).
  std::string attentionBackend = "auto";
  /// "dropout.ratio": the ratio of every training-mode Dropout of the model
  /// (0: none drops), or -1 ("model", the default): each its own.
  double dropoutRatio = -1;
  /// "pad_vocab_multiple": each vocabulary (embedding rows, LM head
  /// classes, the loss's classes) padded to a multiple of this times
  /// mesh.tp, as Megatron-LM's --make-vocab-size-divisible-by; 0 ("auto")
  /// = the target's (padVocabMultiple()).
  int64_t padVocabMultiple = 0;
  // "gpipe" | "1f1b" | "interleaved" | "zb-h1"
  std::string pipelineSchedule = "1f1b";
  int64_t pipelineChunks = 1; // model chunks per rank (interleaved: >= 2)
  std::vector<int64_t> pipelineSplit;    // layer boundaries; empty = "auto"
  /// Pipeline stages: mesh.pp ranks x pipeline.chunks.
  int64_t pipelineStages() const { return meshPp * pipelineChunks; }
  /// The parameters' type under `precision`: "fp32", "bf16" or "fp16".
  std::string paramDtype() const {
    return precision == "bf16-mixed"   ? "bf16"
           : precision == "fp16-mixed" ? "fp16"
                                       : "fp32";
  }
  /// grad_dtype as it applies: the parameters' type unless set.
  std::string effectiveGradDtype() const {
    return gradDtype.empty() ? paramDtype() : gradDtype;
  }
  /// Mixed precision with gradients in fp32 (Megatron-LM's
  /// accumulate_allreduce_grads_in_fp32).
  bool fp32Grads() const {
    return precision != "fp32" && effectiveGradDtype() == "fp32";
  }
  std::string tpRules = "auto";          // only "auto"
  bool sequenceParallel = true;          // with mesh.tp > 1
  OptimizerPlan optimizer;
  std::vector<std::string> frozen; // globs over initializer names
  LoraPlan lora;
  QuantizePlan quantize;
  /// "padding_idx": {glob: row}: the lookups of that row of the matching
  /// embedding tables give it no gradient (nn.Embedding(padding_idx=row)).
  std::vector<std::pair<std::string, int64_t>> paddingIdx;
  LrSchedulePlan lrSchedule;
  std::string dataInputs, dataTargets; // "" = decided by the compiler
  /// data.feeds: graph inputs that take a generated value instead of data
  /// ("ones", "zeros", or "arange": 0..T-1 along the last dim), fixed at
  /// compile time. Integer inputs named attention_mask, position_ids and
  /// token_type_ids default to ones, arange and zeros.
  std::map<std::string, std::string> dataFeeds;
  /// data.targets_from: what the targets input holds, "next_tokens" (the
  /// inputs shifted by one token) or "tokens" (the inputs themselves, for
  /// models that shift their labels inside, as Hugging Face's causal LMs).
  std::string targetsFrom = "next_tokens";
};

/// What the plan says beyond its parallel decisions (those reach code
/// generation through the IR alone, as the dist.* attributes the passes
/// write): the optimizer and its learning-rate schedule, fp16's loss
/// scaling, micro-batching, the data inputs and the watchdog. The program
/// writer puts it in the program's tables; the report prints it.
struct TrainingConfig {
  OptimizerPlan optimizer;
  LrSchedulePlan lrSchedule;
  LossScalePlan lossScale;
  std::string precision = "fp32";
  int64_t microBatches = 1;
  std::string dataInputs, dataTargets;
  std::string targetsFrom = "next_tokens";
  double commTimeoutS = 600;
  /// comm.bucket_mb: also the runtime's buckets of small gradients summed
  /// once per step (runtime/comm/CommBytes.h StepBuckets).
  double bucketMb = 25;
  std::string attentionBackend = "auto";
  LoraPlan lora;
  QuantizePlan quantize;
  /// zero.offload "nvme": zero.nvme_path and zero.nvme_chunk_mb ("" when
  /// the state is not on NVMe).
  std::string nvmePath;
  double nvmeChunkMb = 4;
  /// zero.offload_params "nvme": the ZeRO-3 parameter shards in the swap
  /// file as well.
  bool nvmeParams = false;
};

/// pad_vocab_multiple as it applies on `target` ("cpu", "cuda"): the plan's,
/// or where it says "auto", 64 on CUDA (a GEMM's rows 128-byte aligned in
/// 16-bit types, what cuBLASLt's fast kernels want) and 1 on the CPU.
int64_t padVocabMultiple(const Plan &plan, std::string_view target);

/// The training configuration of `plan`.
TrainingConfig trainingConfig(const Plan &plan);

/// The token id of a data.feeds value "shift_right:ID" (ID an integer in
/// [0, 2^31)), or nothing for any other value.
std::optional<int64_t> shiftRightStart(const std::string &feed);

/// Validates `json` against the schema of docs/plan.md and fills `plan` (every
/// key is optional; missing keys take their defaults). On failure returns
/// false, leaves `plan` unchanged and sets `error` to one line
/// "<key path>: <what is wrong>", e.g.
/// "optimizer.betas[1]: expected a number in [0, 1), got 1.5".
bool parsePlan(const nlohmann::json &json, Plan &plan, std::string &error);

/// Reads and parses the plan file at `path`. Errors are prefixed with the
/// path: "plan.json: optimizer.lr: ...", "plan.json: cannot open: No such
/// file or directory", "plan.json:3:7: invalid JSON: <reason>" (the line and
/// byte column of a syntax error, both 1-based). A key given twice in one
/// object is an error ("plan.json: optimizer.lr: duplicate key").
bool loadPlanFile(const std::string &path, Plan &plan, std::string &error);

/// One --plan file of `autopar compile`: an autopar plan, or a DeepSpeed
/// config (`deepspeed`: --deepspeed FILE, else recognized by its keys,
/// compiler/plan/DeepSpeedConfig.h).
struct PlanLayer {
  std::string path;
  bool deepspeed = false;
};

/// Reads the plan files in order, each translated into autopar's format if
/// it is a DeepSpeed config, later files overriding the keys of earlier
/// ones (objects merged key by key, arrays and values replaced), and
/// parses the result. Each file must be a valid plan alone;
/// errors name the file ("ds.json: zero_optimization.stage: ..."), or
/// every file when only their combination is wrong. `worldSize` (0:
/// unknown) is the number of ranks a DeepSpeed config's batch triple is
/// resolved over. `noEffect` gets one line per DeepSpeed config that has
/// keys changing nothing here: "FILE: accepted with no effect here: K, ...".
bool loadPlanFiles(const std::vector<PlanLayer> &layers, int64_t worldSize,
                   Plan &plan, std::vector<std::string> &noEffect,
                   std::string &error);

/// The resolved plan: every key of the schema with its value (defaults filled
/// in), and only the options of the chosen optimizer type.
/// parsePlan(toJson(p)) gives back p (up to the fields of the optimizer type
/// not chosen, which keep their defaults).
nlohmann::json toJson(const Plan &plan);

/// The pipeline schedule `plan` asks for: pipeline.schedule over mesh.pp
/// ranks, pipeline.chunks and batch.micro_batches.
pipeline::ScheduleOptions pipelineScheduleOptions(const Plan &plan);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLAN_PLAN_H
