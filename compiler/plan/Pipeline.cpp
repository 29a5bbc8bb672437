//===- Pipeline.cpp - the compile pipelines -------------------------------===//

#include "compiler/plan/Pipeline.h"

#include "compiler/plan/PlanAttr.h"
#include "passes/autodiff/Passes.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace autopar;

namespace {

/// Whether the plan runs on a mesh: dp > 1 or a ZeRO stage.
bool isDistributed(const Plan &plan) {
  return plan.meshDp > 1 || plan.meshTp > 1 || plan.meshCp > 1 ||
         plan.zeroStage > 0;
}

/// Stage 0 under gradient accumulation over dp (or a pipeline, whose phases
/// each add to the gradients): each rank sums its micro-batches' gradients
/// and the runtime all-reduces them once per step (DDP's no_sync).
bool defersReduction(const Plan &plan) {
  return plan.meshDp > 1 && plan.zeroStage == 0 &&
         (plan.microBatches > 1 || plan.meshPp > 1);
}

/// The plan's mesh and parameter decisions, as autopar-apply-plan takes
/// them.
dist::ApplyPlanPassOptions applyPlanOptions(const Plan &plan) {
  dist::ApplyPlanPassOptions options;
  options.dp = plan.meshDp;
  options.tp = plan.meshTp;
  options.pp = plan.meshPp;
  options.cp = plan.meshCp;
  options.shardSize = plan.zeroShardSize;
  options.frozen.assign(plan.frozen.begin(), plan.frozen.end());
  options.noDecay.assign(plan.optimizer.noDecay.begin(),
                         plan.optimizer.noDecay.end());
  for (const auto &[glob, row] : plan.paddingIdx)
    options.paddingIdx.push_back(glob + "=" + std::to_string(row));
  return options;
}

void addAttentionFusion(OpPassManager &pm, StringRef target) {
  FuseAttentionPassOptions attention;
  if (target == "cuda")
    attention.maxHeadDim = 128; // runtime/cuda/Attention.h
  pm.addNestedPass<func::FuncOp>(createFuseAttentionPass(attention));
}

/// Pipeline parallelism: the forward cut into the plan's stages, one
/// function per stage, each differentiated on its own (the last stage's
/// loss seeds its backward, the others' the gradient the next stage sends;
/// fp16's loss scale seeds the last stage only).
void addPipelineStages(OpPassManager &pm, const Plan &plan, bool fp16) {
  dist::PipelineSplitPassOptions split;
  split.ranks = plan.meshPp;
  split.chunks = plan.pipelineChunks;
  split.split.assign(plan.pipelineSplit.begin(), plan.pipelineSplit.end());
  pm.addPass(dist::createPipelineSplitPass(split));
  pm.addPass(dist::createPipelineStagesPass());
  const int64_t stages = plan.pipelineStages();
  for (int64_t s = 0; s < stages; ++s) {
    AutodiffPassOptions autodiff;
    autodiff.forward = "forward_stage" + std::to_string(s);
    autodiff.trainStep = "train_step_stage" + std::to_string(s);
    if (s + 1 < stages)
      autodiff.loss = dist::kStageOutputName.str();
    else
      autodiff.lossScaleArgument = fp16;
    pm.addPass(createAutodiffPass(autodiff));
  }
}

void addLowering(OpPassManager &pm, StringRef target, bool quantized = false) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE, which would merge the copies again.
  if (quantized)
    pm.addPass(dist::createDequantizeAtUsePass());
  LegalizePrecisionPassOptions legalize;
  legalize.target = target.str();
  pm.addNestedPass<func::FuncOp>(createLegalizePrecisionPass(legalize));
  pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  PlanMemoryPassOptions memory;
  memory.target = target.str();
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass(memory));
}

} // namespace

void autopar::buildTrainPipeline(OpPassManager &pm, const Plan &plan,
                                 StringRef target) {
  pm.addPass(dist::createApplyPlanPass(applyPlanOptions(plan)));
  if (plan.dropoutRatio >= 0) {
    DropoutRatioPassOptions dropout;
    dropout.ratio = plan.dropoutRatio;
    pm.addPass(createDropoutRatioPass(dropout));
  }
  if (plan.lora.enabled()) {
    dist::LoraPassOptions lora;
    lora.targets.assign(plan.lora.targets.begin(), plan.lora.targets.end());
    lora.rank = plan.lora.r;
    lora.alpha = plan.lora.alpha;
    lora.dropout = plan.lora.dropout;
    lora.alsoTrain.assign(plan.lora.alsoTrain.begin(),
                          plan.lora.alsoTrain.end());
    pm.addPass(dist::createLoraPass(lora));
  }
  if (plan.quantize.enabled()) {
    dist::QuantizePassOptions quantize;
    quantize.weights.assign(plan.quantize.weights.begin(),
                            plan.quantize.weights.end());
    quantize.kind = plan.quantize.type;
    quantize.blockSize = plan.quantize.blockSize;
    quantize.doubleQuant = plan.quantize.doubleQuant;
    pm.addPass(dist::createQuantizePass(quantize));
  }
  pm.addPass(createCanonicalizerPass());
  // Before autodiff: for tensor parallelism, a fused QKV split per part;
  // a vocabulary pad_vocab_multiple x tp does not divide padded.
  if (plan.meshTp > 1)
    pm.addPass(dist::createSplitFusedProjectionsPass());
  const int64_t vocabMultiple = padVocabMultiple(plan, target);
  if (plan.meshTp > 1 || vocabMultiple > 1) {
    dist::PadVocabularyPassOptions pad;
    pad.multiple = vocabMultiple;
    pm.addPass(dist::createPadVocabularyPass(pad));
  }
  // Attention and GELU first: autodiff then derives nn.attention_grad and
  // nn.gelu_grad from them.
  if (plan.attention == "fused")
    addAttentionFusion(pm, target);
  pm.addNestedPass<func::FuncOp>(createFuseGeluPass());
  // Context parallelism: each causal attention told its queries' positions,
  // so that a rank's block of them can see every key (before autodiff,
  // which passes them to the gradient).
  // (Ulysses' and the ring's marks come after autodiff, for the gradients
  // too.)
  const bool marked =
      plan.meshCp > 1 && plan.contextParallelMode != "all_gather";
  const bool zigzag =
      plan.meshCp > 1 && plan.contextParallelLoadBalance == "zigzag";
  if (plan.meshCp > 1 && plan.contextParallelMode != "ulysses") {
    dist::ContextParallelPassOptions cp;
    cp.zigzag = zigzag;
    pm.addPass(dist::createContextParallelPass(cp));
  }
  bool fp16 = plan.precision == "fp16-mixed";
  bool mixed = plan.precision != "fp32";
  if (mixed) {
    MixedPrecisionPassOptions options;
    options.dtype = fp16 ? "f16" : "bf16";
    pm.addNestedPass<func::FuncOp>(createMixedPrecisionPass(options));
  }
  if (plan.meshPp > 1) {
    addPipelineStages(pm, plan, fp16);
  } else {
    // fp16: the backward is seeded with the dynamic loss scale (a last
    // argument of the step, nn.loss_scale).
    AutodiffPassOptions autodiff;
    autodiff.lossScaleArgument = fp16;
    pm.addPass(createAutodiffPass(autodiff));
  }
  pm.addPass(createLossOnlyForwardPass());
  if (mixed)
    pm.addPass(createRestoreUntrainedPrecisionPass());
  // grad_dtype fp32: 16-bit gradients returned, so reduced and
  // accumulated, in f32.
  if (plan.fp32Grads())
    pm.addPass(createGradPrecisionPass());
  if (plan.recompute != "none") {
    RecomputePassOptions recompute;
    recompute.mode = plan.recompute;
    pm.addPass(createRecomputePass(recompute));
  }
  if (marked) {
    dist::ContextParallelPassOptions cp;
    cp.mode = plan.contextParallelMode;
    cp.zigzag = zigzag;
    pm.addPass(dist::createContextParallelPass(cp));
  }
  if (isDistributed(plan)) {
    // Data parallelism and ZeRO: shardings over the mesh's dp axis; tensor
    // parallelism: column-parallel seeds over tp, the rest propagated. A
    // pipeline stage's whole training step is laid out as one (its forward
    // and backward together, as a step without a pipeline), its phases
    // then keep its layouts.
    dist::AnnotateShardingPassOptions annotate;
    annotate.zeroStage = plan.zeroStage;
    // NVMe offload is host offload whose state the runtime swaps.
    annotate.offload = plan.zeroOffload == "nvme" ? "cpu" : plan.zeroOffload;
    annotate.bucketMb = plan.bucketMb;
    annotate.deferReduction = defersReduction(plan);
    pm.addPass(dist::createAnnotateShardingPass(annotate));
    if (plan.meshTp > 1) {
      dist::TensorParallelPassOptions tp;
      tp.sequenceParallel = plan.sequenceParallel;
      pm.addPass(dist::createTensorParallelPass(tp));
    }
    pm.addPass(dist::createPropagateShardingPass());
  }
  // A pipeline stage's training step in the phases its schedule runs
  // apart (after recompute: what it recomputes, the forward need not save).
  if (plan.meshPp > 1) {
    dist::PipelinePhasesPassOptions phases;
    phases.splitWeights = plan.pipelineSchedule == "zb-h1";
    phases.eraseSteps = true;
    pm.addPass(dist::createPipelinePhasesPass(phases));
  }
  if (isDistributed(plan)) {
    pm.addPass(dist::createSpmdizePass());
    pm.addPass(dist::createHoistGathersPass());
    if (zigzag)
      pm.addPass(dist::createZigZagPass());
    pm.addPass(dist::createLowerCollectivesPass());
    pm.addPass(dist::createZeroPartitionPass());
    pm.addPass(dist::createScheduleCollectivesPass());
    pm.addPass(dist::createOffloadPass());
  }
  // The schedule simulated with each rank's phases as partitioned.
  if (plan.meshPp > 1) {
    pipeline::ScheduleOptions options = pipelineScheduleOptions(plan);
    dist::PipelineSchedulePassOptions schedule;
    schedule.schedule = options.kind;
    schedule.ranks = options.ranks;
    schedule.chunks = options.chunks;
    schedule.microBatches = options.microBatches;
    pm.addPass(dist::createPipelineSchedulePass(schedule));
  }
  addLowering(pm, target, plan.quantize.enabled());
}

void autopar::buildForwardPipeline(OpPassManager &pm, StringRef target) {
  pm.addPass(createCanonicalizerPass());
  addAttentionFusion(pm, target);
  pm.addNestedPass<func::FuncOp>(createFuseGeluPass());
  addLowering(pm, target);
}

namespace {

/// The pipelines as passes: each builds its pipeline for the module it runs
/// on and runs it as a dynamic pipeline.
template <typename Derived>
struct PipelinePass : public PassWrapper<Derived, OperationPass<ModuleOp>> {
  PipelinePass() = default;
  PipelinePass(const PipelinePass &other)
      : PassWrapper<Derived, OperationPass<ModuleOp>>(other) {}

  /// A dynamic pipeline's dialects must be loaded before it runs: those of
  /// the largest pipeline (every optional pass in).
  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    Plan plan;
    plan.precision = "fp16-mixed";
    plan.meshDp = 2;
    buildTrainPipeline(pm, plan, "cpu");
    pm.getDependentDialects(registry);
  }

  bool checkTarget() {
    if (target == "cpu" || target == "cuda")
      return true;
    this->getOperation().emitError()
        << "target must be cpu or cuda, got '" << target << "'";
    this->signalPassFailure();
    return false;
  }

  mlir::Pass::Option<std::string> target{
      *this, "target", llvm::cl::desc("Code generation target: cpu or cuda"),
      llvm::cl::init("cpu")};
};

struct TrainPipelinePass : public PipelinePass<TrainPipelinePass> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TrainPipelinePass)
  StringRef getArgument() const override { return "autopar-train-pipeline"; }
  StringRef getDescription() const override {
    return "The training pipeline of `autopar compile` for the module's "
           "autopar.plan";
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!checkTarget())
      return;
    Plan plan;
    std::string error;
    if (!readPlanAttr(module, plan, error)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    OpPassManager pm(ModuleOp::getOperationName());
    buildTrainPipeline(pm, plan, target);
    if (failed(runPipeline(pm, module)))
      signalPassFailure();
  }
};

struct ForwardPipelinePass : public PipelinePass<ForwardPipelinePass> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ForwardPipelinePass)
  StringRef getArgument() const override { return "autopar-forward-pipeline"; }
  StringRef getDescription() const override {
    return "The pipeline of `autopar compile --forward-only`";
  }
  void runOnOperation() override {
    if (!checkTarget())
      return;
    OpPassManager pm(ModuleOp::getOperationName());
    buildForwardPipeline(pm, target);
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }
};

} // namespace

void autopar::registerPipelines() {
  PassRegistration<TrainPipelinePass>();
  PassRegistration<ForwardPipelinePass>();
}
