//===- Passes.td - dist passes -----------------------------*- tablegen -*-===//
//
// Plan -> mesh and shardings -> propagation -> per-rank program with
// explicit collectives -> ZeRO partitioning -> collective scheduling ->
// offload. DP and ZeRO are shardings over the mesh's `dp` axis.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL
#define AUTOPAR_PASSES_PARALLEL

include "mlir/Pass/PassBase.td"

def ApplyPlanPass : Pass<"autopar-apply-plan", "mlir::ModuleOp"> {
  let summary = "Put the module's plan on the program: mesh and parameter marks";
  let description = [{
    The first pass of `autopar-train-pipeline`. It takes the plan's mesh
    and per-parameter decisions as options (compiler/plan/Pipeline.cpp
    builds them from the resolved plan.json; `padding-idx` entries are
    `GLOB=ROW`) and writes what the later passes, the program writer and
    the runtime tables read:

    - `dist.mesh @mesh axes = [dp = D, pp = P, tp = T]`, the plan's mesh
      with every axis (size-1 axes included: a plan without that
      parallelism), dp-major and tp-minor; with `cp` above 1 a `cp` axis
      between pp and tp (`[dp = D, pp = P, cp = C, tp = T]`: a rank's
      context-parallel peers are neighbours, inside a node, as
      Megatron-Core orders them);
    - `nn.frozen` on every parameter a `frozen` glob matches and
      `nn.no_decay` on every parameter an `optimizer.no_decay` glob
      matches (globs over the `nn.param` names);
    - `nn.frozen_rows` on every trained parameter a `frozen` entry
      "GLOB[ROWS]" names rows of (an entry that matches nothing as a glob),
      the ranges of every such entry merged;
    - `nn.logical_type` on every parameter: its type as imported, the full
      tensor in its master precision that weights.bin and checkpoints hold,
      whatever mixed precision and ZeRO later make of the argument.

    ```mlir
    // autopar-apply-plan{dp=2 frozen=wpe}
    module {
      func.func @forward(%w: tensor<4x4xf32> {nn.param = "wpe"}, ...)
    ```
    becomes
    ```mlir
    module {
      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
      func.func @forward(%w: tensor<4x4xf32> {nn.frozen, nn.logical_type = tensor<4x4xf32>, nn.param = "wpe"}, ...)
    ```
    Errors, naming the plan key: a mesh axis below 1, a malformed glob or
    `padding-idx` entry, a `frozen` glob that matches no parameter, every
    parameter frozen, a `padding_idx` glob that matches no embedding table
    or a row outside it, a module that already has a mesh.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", "1", "mesh.dp: data-parallel ranks">,
    Option<"tp", "tp", "int64_t", "1", "mesh.tp: tensor-parallel ranks">,
    Option<"pp", "pp", "int64_t", "1", "mesh.pp: pipeline ranks">,
    Option<"cp", "cp", "int64_t", "1",
           "mesh.cp: context-parallel ranks (a `cp` axis between pp and "
           "tp when above 1)">,
    Option<"shardSize", "shard-size", "int64_t", "0",
           "zero.shard_size: hybrid sharding's groups of dp ranks (0: all "
           "of dp); the mesh then has a dpr axis of dp / shard-size "
           "replicas outside dp = shard-size">,
    ListOption<"frozen", "frozen", "std::string",
               "`frozen`: globs (or GLOB[ROWS]) of the parameters not "
               "trained">,
    ListOption<"noDecay", "no-decay", "std::string",
               "`optimizer.no_decay`: globs of the parameters without "
               "weight decay">,
    ListOption<"paddingIdx", "padding-idx", "std::string",
               "`padding_idx`: GLOB=ROW, the row of the embedding tables "
               "GLOB matches that gets no gradient">,
  ];
  let dependentDialects = ["autopar::dist::DistDialect",
                           "autopar::nn::NNDialect"];
}

def LoraPass : Pass<"autopar-lora", "mlir::ModuleOp"> {
  let summary = "Low-rank adapters beside the matching projections (plan lora)";
  let description = [{
    Run after autopar-apply-plan (and autopar-dropout-ratio), before
    autopar-autodiff. Each weight parameter a glob of `targets` matches
    (by its nn.param name) must be used only as the weight of projections:
    the right operand of nn.matmul, directly ([in, out], GPT-2's Conv1D)
    or through nn.transpose [1, 0] ([out, in], PyTorch's Linear), or the
    `b` of nn.gemm. Every such use y = x W gets PEFT's LoRA update,

      y + dropout(x) A^T B^T * (alpha / r),

    with two new parameters after the weight, A [r, in] ("M.lora_A.weight",
    M the weight's name less ".weight") and B [out, r] ("M.lora_B.weight"),
    each with nn.logical_type and nn.lora_a / nn.lora_b naming the weight
    (nn.lora_in_out on A when the weight is [in, out]). The update's ops
    carry nn.lora (tensor parallelism seeds no split at them: A and B
    follow their weight's split). `dropout` > 0 adds an nn.dropout on x per
    use, its site 2^31 + k for the k-th in op order (the model's sites
    count from 0). As PEFT's default, every other
    parameter is frozen but those a glob of `also-train` matches; the
    module of such a parameter (its name less the last component) is one
    of PEFT's `modules_to_save`, and every parameter in it (trained or
    not) gets nn.lora_save naming the module, for the adapter's export.

    ```mlir
    %t = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
    %y = nn.matmul %x, %t : (tensor<2x4xf32>, tensor<4x6xf32>) -> tensor<2x6xf32>
    ```
    with `targets=w rank=2 alpha=4` also computes
    ```mlir
    %at = nn.transpose %a {nn.lora, perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %h = nn.matmul %x, %at {nn.lora} : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    %bt = nn.transpose %b {nn.lora, perm = array<i64: 1, 0>} : tensor<6x2xf32> -> tensor<2x6xf32>
    %d = nn.matmul %h, %bt {nn.lora} : (tensor<2x2xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
    %s = nn.mul %d, %two {nn.lora} : (tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xf32>
    %y2 = nn.add %y, %s {nn.lora} : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
    ```
    Fails (one line) on a glob that matches no parameter, a matched tensor
    that is not only a projection weight, and an `also-train` glob that
    matches nothing.
  }];
  let options = [
    ListOption<"targets", "targets", "std::string",
               "Globs of the weights to adapt">,
    Option<"rank", "rank", "int64_t", "8", "The adapters' rank r">,
    Option<"alpha", "alpha", "double", "8.0",
           "PEFT's lora_alpha: the update is scaled by alpha / r">,
    Option<"dropout", "dropout", "double", "0.0",
           "The dropout ratio of the adapters' input (PEFT's lora_dropout)">,
    ListOption<"alsoTrain", "also-train", "std::string",
               "Globs of further parameters to train (modules_to_save)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

def QuantizePass : Pass<"autopar-quantize", "mlir::ModuleOp"> {
  let summary = "Frozen weights held quantized, dequantized at each use (plan quantize)";
  let description = [{
    Run after autopar-lora, before autopar-autodiff. Each weight parameter
    a glob of `weights` matches must be a frozen f32 matrix (plan `frozen`,
    or a LoRA base). It is replaced by two frozen parameters, its codes
    ("W.quant_codes", i8) and scales ("W.quant_absmax", f32), both marked
    nn.quantized = "W" (nn.quant_axis1 on the scales where INT8's output
    features are the weight's columns), and each of its uses reads an
    nn.dequantize of them placed right before it (runtime/support/Quantize.h; the program writer
    quantizes the initializer into them). `kind` "nf4": blocks of
    `block-size` elements; "int8": one scale per output feature (the rows
    of a Linear weight read through its transpose, the columns of a
    Conv1D weight).

    ```mlir
    %y = nn.matmul %x, %w : (tensor<2x64xf32>, tensor<64x64xf32>) -> tensor<2x64xf32>
    ```
    with `weights=w kind=nf4 block-size=64`, %w replaced by %codes
    (tensor<2048xi8>) and %absmax (tensor<64xf32>):
    ```mlir
    %w = nn.dequantize %codes, %absmax {axis = 1 : i64, block_size = 64 : i64, kind = "nf4"}
        : (tensor<2048xi8>, tensor<64xf32>) -> tensor<64x64xf32>
    %y = nn.matmul %x, %w : (tensor<2x64xf32>, tensor<64x64xf32>) -> tensor<2x64xf32>
    ```
    With `double-quant` (NF4 only) the scales are "W.quant_absmax" as i8
    codes of bitsandbytes' dynamic map, one per block, and a third frozen
    parameter "W.quant_state2" (f32: the absmax values' mean, then one
    scale per 256 of them) is the dequantize's third operand.
    Fails (one line) on a glob that matches no parameter and on a matched
    tensor that is trained or not an f32 matrix.
  }];
  let options = [
    ListOption<"weights", "weights", "std::string",
               "Globs of the frozen weights to quantize">,
    Option<"kind", "kind", "std::string", "\"nf4\"", "nf4 or int8">,
    Option<"blockSize", "block-size", "int64_t", "64",
           "NF4: elements per absmax block">,
    Option<"doubleQuant", "double-quant", "bool", "false",
           "NF4: the absmax quantized too (bitsandbytes' compress_statistics)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

def DequantizeAtUsePass
    : Pass<"autopar-dequantize-at-use", "mlir::ModuleOp"> {
  let summary = "Each use of a quantized weight dequantizes it again";
  let description = [{
    After autodiff and CSE (which would merge the copies): an nn.dequantize with
    several uses (the forward's projection and the backward's input
    gradient) is cloned before each one, so that no dequantized weight
    lives from the forward to the backward: each copy is a temporary of
    the arena, freed after its use, or on the CPU target no buffer at all
    where GEMMs alone read it (autopar-plan-memory; plan `quantize` keeps
    only the codes).
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def AnnotateShardingPass : Pass<"autopar-annotate-sharding", "mlir::ModuleOp"> {
  let summary = "Turn the mesh's dp axis and the ZeRO stage into shardings";
  let description = [{
    Over the module's `dist.mesh` (from autopar-apply-plan; axes other than
    `dp` must have size 1 for now), annotates the arguments and results of
    every function with `dist.sharding`: graph inputs
    (`nn.input`) split their batch dim (dim 0) over `dp`; parameters are
    replicated; results are wanted replicated (the loss, and the gradients
    at ZeRO stage 0). ZeRO: at stage 1 the gradients stay partial sums (the
    runtime reduce-scatters them once per step, after the last
    micro-batch), and so at stage 0 with `defer-reduction` (DDP's no_sync
    under gradient accumulation: each rank sums its micro-batches' gradients
    and the runtime all-reduces them once per step instead of once per
    micro-batch); at stages 2 and 3 they are wanted as flat shards
    (`dist.zero` on the result); at stage 3 trainable parameters are stored
    as flat shards (`dist.zero` on the argument). The module records the
    stage (`dist.zero_stage`), the offload target (`dist.offload`) and the
    bucket size (`dist.bucket_bytes`) for the later passes and the program
    writer, which reads from these and from the gradients' shardings what
    the runtime does once per step (compiler/program/ProgramIR.h).

    ```mlir
    func.func @train_step(%w: tensor<4x4xf32> {nn.param = "w"},
                          %x: tensor<8x4xf32> {nn.input = "x"})
        -> (tensor<f32> {nn.output = "loss"}, tensor<4x4xf32> {nn.grad = "w"})
    ```
    with `zero-stage=2` over `dist.mesh @mesh axes = [dp = 2]` becomes
    ```mlir
    module attributes {dist.zero_stage = 2 : i64, ...} {
      dist.mesh @mesh axes = [dp = 2]
      func.func @train_step(
          %w: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.param = "w"},
          %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "x"})
          -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"},
              tensor<4x4xf32> {dist.zero, nn.grad = "w"})
    ```
    A batch dim that `dp` does not divide is an error naming the input; so
    is a module without a mesh or with a `dp` axis missing.
  }];
  let options = [
    Option<"zeroStage", "zero-stage", "int64_t", "0", "ZeRO stage (0 to 3)">,
    Option<"offload", "offload", "std::string", "\"none\"",
           "Where the optimizer state and its update live: none or cpu">,
    Option<"bucketMb", "bucket-mb", "double", "25.0",
           "Gradient bucket size in MiB (collectives issued per bucket)">,
    Option<"deferReduction", "defer-reduction", "bool", "false",
           "Stage 0: leave the gradients partial over dp, for the runtime "
           "to all-reduce once per step (gradient accumulation)">,
  ];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

def ContextParallelPass
    : Pass<"autopar-dist-context-parallel", "mlir::ModuleOp"> {
  let summary = "Causal attentions told their queries' positions (mesh.cp)";
  let description = [{
    Context parallelism splits every sequence over the mesh's `cp` axis
    (autopar-annotate-sharding seeds the inputs' dim 1 over it); each rank
    then holds a block of the queries and, through sharding propagation,
    sees every key and value (all-gathered over `cp`; their gradients are
    reduce-scattered back), as Llama 3's context parallelism does. A causal
    nn.attention masks by where its query rows are, so this pass gives each
    one `positions`: the key position of each query row, arange(S - T, S),
    which spmdization splits with the queries (each rank its block's
    positions). Runs before autodiff, which passes them to the gradient.

    ```mlir
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 0.5 : f64}
        : (tensor<1x2x8x4xf32>, ...) -> ...
    ```
    becomes
    ```mlir
    %p = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
    %o, %l = nn.attention %q, %k, %v positions %p {causal = true, ...}
    ```
    Errors: a module without a mesh, or a `cp` axis that does not divide
    an attention's query rows (2 x cp with `zigzag`: autopar-dist-zigzag
    deals them in 2 x cp chunks).

    With `mode=ulysses` (DeepSpeed-Ulysses), run after autodiff: each
    nn.attention and nn.attention_grad is marked
    `dist.context_parallel = "ulysses"` instead (no positions), and
    spmdization exchanges its operands' sequence block for a block of
    the heads (`dist.all_to_all`, split the heads, concatenate the
    sequence), runs it on the whole sequence of cp-th of the heads, and
    exchanges the results back; the keys' and values' gradients are no
    longer sums over cp. Each such op needs as many keys as queries, `cp` dividing both its query rows and its heads
    (spmdization checks the heads a rank holds under tensor parallelism
    too), and a mask that is one for all heads; an op that has not is
    refused.

    With `mode=ring` (Megatron-Core's point-to-point context parallelism),
    run after autodiff: the positions as in all_gather mode (already
    there when the pass ran before autodiff), then each attention and
    gradient marked `dist.context_parallel = "ring"`: spmdization keeps the
    keys and values split with the queries and passes the blocks around
    the cp ring (`dist.shift`), one attention per block under the mask of
    their positions, the partial outputs merged by their log-sum-exps; the
    backward passes the blocks again and the key and value gradients'
    partial sums with them, home in the end. Each such op needs as many
    keys as queries and no mask, and a causal one its positions.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"all_gather\"",
           "How attention reaches the other blocks: all_gather (positions "
           "for the causal masks), ulysses or ring (dist.context_parallel "
           "marks; ring with the positions)">,
    Option<"zigzag", "zigzag", "bool", "false",
           "The blocks are zig-zag chunks (query rows in 2 x cp chunks)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect",
                           "autopar::dist::DistDialect"];
}

def SplitFusedProjectionsPass
    : Pass<"autopar-dist-split-fused-projections", "mlir::ModuleOp"> {
  let summary = "Fused projections split into equal parts as one per part";
  let description = [{
    For tensor parallelism, before autodiff: a projection whose output is
    split into equal parts along its last dim (GPT-2's `c_attn`, q, k and v
    from one `[h, 3h]` weight), its weight (and bias) parameters used only
    there, becomes one projection per part. The weight is viewed as
    `[h, parts, h / parts]` (the bias as `[parts, h / parts]`): the same
    row-major bytes, its `nn.logical_type` (weights.bin, checkpoints,
    exports) unchanged, and each part's weight is its slice. Then each
    part's output features can be split over tp, so every rank stores and
    computes its heads of q, k and v, as Megatron splits a fused QKV. A
    weight stored as `nn.Linear`'s `[3h, h]` and transposed at its use (an
    export without constant folding) is viewed as `[parts, h / parts, h]`,
    each part's slice transposed. A LoRA update beside the projection
    (autopar-lora: `y + (h B^T) s`, `h = x' A^T`) is split with it: B
    `[3h, r]` viewed as `[parts, h / parts, r]`, each part adding its
    slice's update to its projection, `h` computed once.

    ```mlir
    %y = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x12xf32>) -> tensor<8x12xf32>
    %p:3 = nn.split %y {axis = 1 : i64} : (tensor<8x12xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
    ```
    becomes, `%w` now `tensor<4x3x4xf32>`,
    ```mlir
    %w:3 = nn.split %w {axis = 1 : i64} : (tensor<4x3x4xf32>) -> (tensor<4x1x4xf32>, ...)
    %w0 = nn.reshape %w#0 : tensor<4x1x4xf32> -> tensor<4x4xf32>
    %p0 = nn.matmul %x, %w0 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    ...
    ```
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def PadVocabularyPass
    : Pass<"autopar-dist-pad-vocabulary", "mlir::ModuleOp"> {
  let summary = "Pad a vocabulary to a multiple of `multiple` x tp, left out of the loss";
  let description = [{
    Before autodiff, as Megatron-LM pads its vocabulary to a multiple of
    `--make-vocab-size-divisible-by` x tp: so that the embedding and the
    LM head split over tp (vocab-parallel), and so that each rank's part
    of the logits has rows a GEMM reads aligned (an odd vocabulary such as
    GPT-2's 50257 keeps cuBLASLt off its fast kernels). Each vocabulary
    that `multiple` x the size of the axis `axis` does not divide is
    padded to the next multiple of it (nothing to do when that is 1). A
    vocabulary is the class dim of an `nn.softmax_cross_entropy`, or the
    rows of a parameter table looked up at token ids, and every dim the
    ops' sharding rules tie to it: the logits, the LM head's weight and
    bias, a tied embedding's rows. Those parameters become padded
    arguments (their `nn.logical_type`, which weights.bin, checkpoints and
    exports hold, stays the model's: the runtime adds zero rows), the ops
    on the way take the padded types, and each loss leaves the padded
    classes out, so the losses and the real classes' gradients are the
    unpadded model's and the padded rows' gradients are zero (they stay
    zero): when `axis` has one rank, the loss's `classes` attribute holds
    the real class count (its kernels skip the padding); over several
    (vocab-parallel), its scores get -inf on the padded classes (a mask
    added before the loss). A use that cannot take the
    padded tensor (a graph output, a softmax) reads its unpadded slice.
    Nothing changes where the vocabulary reaches an op the pass cannot
    pad through (the vocabulary then stays whole on every rank).

    ```mlir
    %y = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x5xf32>) -> tensor<8x5xf32>
    %l = nn.softmax_cross_entropy %y, %t reduction(mean) : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
    ```
    becomes on one rank, `%w` now `tensor<4x8xf32>` (multiple=8),
    ```mlir
    %y = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %l = nn.softmax_cross_entropy %y, %t reduction(mean) {classes = 5 : i64} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    ```
    and over tp = 2, `%w` now `tensor<4x6xf32>`,
    ```mlir
    %y = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %m = nn.concat %zeros, %minus_inf {axis = 0 : i64} : (tensor<5xf32>, tensor<1xf32>) -> tensor<6xf32>
    %s = nn.add %y, %m : (tensor<8x6xf32>, tensor<6xf32>) -> tensor<8x6xf32>
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) : (tensor<8x6xf32>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"tp\"",
           "The tensor-parallel mesh axis">,
    Option<"multiple", "multiple", "int64_t", "1",
           "Each rank's part of a vocabulary a multiple of this (the plan's "
           "pad_vocab_multiple)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def PipelineSplitPass
    : Pass<"autopar-dist-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cut the forward into balanced pipeline stages at its layers";
  let description = [{
    Pipeline parallelism, before autodiff: the plan's `mesh.pp` (`ranks`)
    x `pipeline.chunks` (`chunks`) stages, each a contiguous run of the
    model's layers (nothing to do for one stage).

    Activations are the values computed from a parameter that is not a
    buffer; what only depends on graph inputs, constants and buffers (the
    attention mask, position ids, rotary tables) each stage can compute
    itself. A cut is a point of the forward where exactly one float
    activation is live (the residual stream), and a layer begins at each
    cut followed by an attention (`nn.attention` or `nn.softmax`) before
    the next cut; a model without attention has a layer at every cut. The
    ops before the first layer (the embeddings) belong to the first stage,
    those after the last layer's last cut (final norm, head, loss) to the
    last one.

    Stages begin at the layers `pipeline.split` (`split`) lists, or, when
    it is empty (`"auto"`),
    where the most expensive stage is cheapest (a DP over the layers'
    predicted cost: each op's model FLOPs or, if more, the bytes it moves
    times `flops-per-byte`; the embeddings and the head counted with their
    stages). Every stage holds at least one layer: more stages than layers
    is an error, as is a split at a layer the model does not have.

    Each activation op gets `dist.stage = s`; the function gets
    `dist.pipeline = {layers = L, stage_first_layer = array<i64: ...>,
    stage_cost = array<i64: ...>, uniform_layers = true|false, layer_cost
    = array<f64: ...>, embedding_cost = e, head_cost = h}`: the stages'
    predicted costs (rounded), whether the layers are alike (costs within
    1%, the last may cost more), and what the split balanced (the planner
    repeats the split for other stage counts with `balanceStages`).
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function to split">,
    Option<"flopsPerByte", "flops-per-byte", "double", "16.0",
           "The machine's balance: the FLOPs that cost as much as one byte "
           "moved">,
    Option<"ranks", "ranks", "int64_t", "1", "mesh.pp: pipeline ranks">,
    Option<"chunks", "chunks", "int64_t", "1",
           "pipeline.chunks: model chunks per rank">,
    ListOption<"split", "split", "int64_t",
               "pipeline.split: the first layer of stages 1, 2, ...; "
               "empty: balanced">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def PipelineStagesPass
    : Pass<"autopar-dist-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "One function per pipeline stage of the split forward";
  let description = [{
    After autopar-dist-pipeline-split: for each stage `s` of `@forward`,
    a function `@forward_stage<s>` (`dist.stage = s`) holding the stage's
    ops and the unstaged ones they read (what only depends on inputs,
    constants and buffers: each stage computes it itself). Its arguments
    are the parameters and graph inputs it reads, in the forward's order
    and with their attributes, then, after the first stage, the activation
    the previous stage sends (`nn.stage_input`). Every stage but the last
    returns the one activation the next stage reads (`nn.output =
    "stage_output"`); the last returns what the forward returns (the
    loss). `@forward` stays as it is.

    autopar-autodiff then gives each stage its training step: the
    gradient of `stage_output` seeded by an `nn.output_grad` argument (the
    gradient the next stage sends back), and the gradient of the
    `nn.stage_input` (`nn.input_grad`, what it sends to the previous
    stage). A stage boundary crossed by more than one activation is an
    error.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function whose ops carry dist.stage">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

def PipelinePhasesPass
    : Pass<"autopar-dist-pipeline-phases", "mlir::ModuleOp"> {
  let summary = "A pipeline stage's training step as forward and backward";
  let description = [{
    After autopar-autodiff of the stages: each stage's training step (a
    function with `dist.stage` returning gradients) is split into the
    functions a pipeline schedule runs at different times, each tagged
    `dist.phase`:

    - `<step>_f` (`forward`): what the stage's output (or loss) depends
      on; it returns the output, then every value the backward reads
      (`nn.saved = "f<n>"`): the activations the runtime stashes per
      micro-batch in flight.
    - `<step>_b` (`backward`): the rest, reading those values as
      arguments with the same `nn.saved` keys, and the gradient of the
      output (`nn.output_grad`); it returns the parameters' gradients and
      the received activation's (`nn.input_grad`).
    - With `split-weight-gradients` (zero-bubble schedules), instead of
      `_b`: `<step>_i` (`input`), the ops the input's gradient depends on,
      returning it and saving what the rest reads (`nn.saved = "i<n>"`),
      and `<step>_w` (`weight`), the parameters' gradients.

    What only depends on graph inputs, constants and buffers (masks), or
    only on parameters, constants and buffers (a weight's transpose or
    cast), is recomputed by the phases that read it rather than saved (a
    copy per micro-batch in flight; a later phase then reads the parameter
    itself, laid out as the blob holds it). A step laid out over the mesh
    (dp, tp: its ops carry `dist.shardings`) hands its layouts on: the
    phases' arguments and results keep their `dist.sharding`, and a saved
    value crosses as the step holds it, its pending sums reduced. The step
    itself stays, unless `erase-steps` (the training pipeline: the later
    passes then lower only what runs), which also erases the stage's
    forward (`dist.stage`, no `dist.phase`: the function autodiff
    differentiated). Running F then B (or F, I, W) computes exactly what
    the step computes.
  }];
  let options = [
    Option<"splitWeights", "split-weight-gradients", "bool", "false",
           "Split the backward into the input's and the weights' gradients">,
    Option<"eraseSteps", "erase-steps", "bool", "false",
           "Erase each stage's training step and its forward once split "
           "(nothing after the phases reads them)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

def PipelineSchedulePass
    : Pass<"autopar-dist-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Simulate the plan's pipeline schedule over the stages' phases";
  let description = [{
    After autopar-dist-pipeline-phases: the plan's `pipeline.schedule`
    (`schedule`) for `mesh.pp` ranks (`ranks`), `pipeline.chunks`
    (`chunks`) and `batch.micro_batches` (`micro-batches`) is built
    as every rank's action list (passes/parallel/Schedule.h) and all the
    lists are simulated against each other with the phases' predicted
    times (per op, its model FLOPs at `flops-per-second` or its bytes at
    `bytes-per-second`, whichever is longer; a transfer of the largest
    stage output at `link-bytes-per-second`). A schedule the plan's counts
    do not allow, or one that would deadlock, is an error; so are
    point-to-point transfers that would deadlock when each rank runs its
    groups of them one after another, each until every transfer in it has
    met its peer's, matched by position per pair of ranks (NCCL's
    ordering; the runtime's groups, groupTransfers). The prediction
    goes on the module as `dist.pipeline_schedule`: the schedule, the
    bubble fraction, the step's and each stage's seconds, the bytes a
    micro-batch in flight keeps per stage (saved values and the received
    activation), each rank's peak in-flight micro-batches (GPipe `m`, 1F1B
    `min(p - i, m)`) and its activation bytes at that peak. The rates are
    nominal: the bubble and the balance do not depend on them.
  }];
  let options = [
    Option<"flopsPerSecond", "flops-per-second", "double", "1.0e12",
           "Nominal compute rate">,
    Option<"bytesPerSecond", "bytes-per-second", "double", "1.0e11",
           "Nominal memory bandwidth">,
    Option<"linkBytesPerSecond", "link-bytes-per-second", "double", "1.0e10",
           "Nominal bandwidth between pipeline ranks">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "pipeline.schedule: gpipe, 1f1b, interleaved or zb-h1">,
    Option<"ranks", "ranks", "int64_t", "1", "mesh.pp: pipeline ranks">,
    Option<"chunks", "chunks", "int64_t", "1",
           "pipeline.chunks: model chunks per rank">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "batch.micro_batches: micro-batches per step">,
  ];
}

def TensorParallelPass
    : Pass<"autopar-dist-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Seed Megatron's column-parallel splits";
  let description = [{
    Tensor parallelism over the mesh axis `axis` (nothing to do when it has
    size 1), found by propagation rather than by layer names. In program
    order, every projection of the forward computation (a matmul or gemm
    of an activation by a parameter, seen through casts, transposes and
    reshapes) whose activation is not split over the axis on the
    contraction and whose output is not split yet is tried as
    column-parallel: a `dist.shard` splitting its output features over the
    axis. The seed is kept only if propagation then finds a row-parallel
    partner, a later projection whose activation arrives split on the
    contraction (its result a pending sum over the axis), as Megatron pairs
    the two matmuls of an MLP or of attention; otherwise it is removed
    (the split would only be gathered again). Propagation does the rest:
    the weights (open arguments) are stored split as their projections
    want them, heads split through reshapes and transposes, k and v follow
    q through the attention, biases follow their outputs.

    First, every gemm with a bias (`alpha * a b + beta * c`) becomes the
    gemm plus an add of `beta * c`: a row-parallel gemm's result is a
    pending sum, and its bias must be added once, after the sum.

    Before the projections, Megatron's vocab-parallel embedding: a lookup
    (`nn.gather`) of a parameter table at indices computed from an input
    (token ids) gets its table split over its rows, when the axis divides
    them, and its result summed at once (a replicated seed). An LM head is
    kept column-parallel when its logits, split over the vocabulary, reach
    `nn.softmax_cross_entropy` (which takes them split: Spmdize's
    vocab-parallel loss); a tied head reads the split table.

    With `sequence-parallel`, seeds of the last priority split over the
    tokens (the dim before the features) every sum over the axis that a
    tensor-parallel matmul produces and every summed lookup (a
    reduce-scatter), and pin every other activation such a matmul reads
    whole over the tokens (an all-gather where it arrives split): norms
    and the residual stream run on 1/n of the tokens.

    Kept seeds get increasing priorities, so autopar-propagate-sharding
    settles them in the order they were chosen and reproduces the layouts
    seen here.

    ```mlir
    %h = nn.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %a = nn.gelu %h approximate(none) : tensor<8x16xf32>
    %y = nn.matmul %a, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    ```
    over tp = 2 gains
    ```mlir
    %s = dist.shard %h {priority = 1 : i64} : tensor<8x16xf32>
        to #dist.sharding<@mesh, [[], [tp]]>
    ```

    Pipeline stages' training steps are seeded in stage order, each with
    the parameters an earlier stage laid out and its input open, then laid
    out with its input as the previous stage returns it
    (autopar-propagate-sharding's order).
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"tp\"",
           "The tensor-parallel mesh axis">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Split norms, dropout and the residual stream over the tokens "
           "(Megatron's sequence parallelism)">,
  ];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

def PropagateShardingPass : Pass<"autopar-propagate-sharding", "mlir::ModuleOp"> {
  let summary = "Give every value a sharding, forward and backward to a fixpoint";
  let description = [{
    Every value gets a layout from the ops' sharding rules
    (passes/parallel/ShardingRules.h), in both directions until nothing
    changes (after GSPMD and Shardy):

    - forward: a factor of an op's iteration space is split the way its
      first split operand splits it (if the op lets it be split and the
      sizes divide); a split factor that a result does not index (a
      contraction, a reduction, a mean-reduced loss) leaves a pending sum
      over its axes; linear ops (add, mul by a whole value, reshape,
      transpose, matmul, reduce_sum, ...) pass a pending sum on, every
      other op needs it reduced first;
    - backward: a factor that no operand splits is split the way a user of
      a result wants it (a hint), and each operand is wanted split as the
      op's decision splits it, so the hint travels up to the producers.

    Seeds: a `dist.sharding` argument is fixed; an argument without one is
    open and is stored as its users want (a weight that a column split
    reaches is stored column-split); a `dist.shard` result is laid out as
    its sharding and wants its operand so, in the order of its `priority`
    (all of priority 0 settle before priority 1 come in). Hints only gain
    axes, the first one to want a dim keeps it, so the iteration ends. A
    gradient result (`nn.grad`) is laid out as its parameter, keeping the
    pending sums its result sharding asks for. A parameter has one layout
    in the program: the training step (the function returning gradients)
    lays its parameters out first, and the other functions (the forward of
    evaluation) take those layouts as fixed. Pipeline stages' training steps
    (`dist.stage`) are laid out in stage order: a stage takes the
    parameters an earlier one laid out (a tied embedding), and its input
    (`nn.stage_input`) and its output's gradient (`nn.output_grad`) as the
    neighbouring stages return them (their output as computed, pending sums
    reduced; the input's gradient as the input). The result layouts are
    attached as `dist.shardings` (one per result), open arguments get their
    `dist.sharding`.

    ```mlir
    %0 = nn.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = dist.shard %0 : tensor<8x16xf32> to #dist.sharding<@mesh, [[], [tp]]>
    %2 = nn.matmul %1, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    ```
    with `%x` replicated and `%w1`, `%w2` open gives `%w1`
    `[[], [tp]]`, `%w2` `[[tp], []]` and
    ```mlir
    %0 = nn.matmul ... {dist.shardings = [#dist.sharding<@mesh, [[], [tp]]>]}
    %2 = nn.matmul ... {dist.shardings = [#dist.sharding<@mesh, [[], []], partial = [tp]>]}
    ```
  }];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

def PrintShardingRulesPass
    : Pass<"autopar-print-sharding-rules", "mlir::ModuleOp"> {
  let summary = "Print the sharding rule of every op";
  let description = [{
    Prints, for every op of every function, to standard output, its
    sharding rule (ShardingRuleOpInterface; dialects/parallel/ShardingRule.h)
    in Shardy's notation, or `none` for an op without one (propagation then
    keeps its operands and results whole). The IR is left unchanged.

    ```mlir
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    ```
    prints
    ```
    nn.matmul: ([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k} linear=one_of(0, 1)
    ```
  }];
}

def SpmdizePass : Pass<"autopar-dist-spmdize", "mlir::ModuleOp"> {
  let summary = "Rewrite propagated functions into the program of one rank";
  let description = [{
    Every type becomes its per-rank type (split dims divided by the size
    of their axes) and data moves only through explicit `dist` ops: an
    operand whose layout differs from the one its op needs is resharded
    (`dist.all_reduce` for a pending sum, `dist.all_gather` for a split dim
    that must be whole, `dist.tensor_split` for a whole dim that must be
    split); results are resharded to the sharding their `func.return`
    wants. A `dist.shard` becomes the resharding it asks for (its
    reduction kind kept: a pending max is all-reduced by max), and a
    pending sum wanted split is one `dist.reduce_scatter`. A result whose
    `dist.shardings` the rule cannot give is resharded after its op. An
    op that averages over a split factor (a mean-reduced loss,
    `reduce_mean`, the loss gradient's 1/N) computes its local mean, so its
    result is multiplied by 1/(group size): this is data parallelism's
    gradient averaging, and it makes every rank's terms add up to the
    global mean. Results marked `dist.zero` are left to the ZeRO pass.

    ```mlir
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
    ```
    with the batch split over dp = 2 becomes
    ```mlir
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    %c = nn.constant dense<5.000000e-01> : tensor<f32>
    %m = nn.mul %l, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %r = dist.all_reduce sum %m on @mesh axes = [dp] : tensor<f32>
    return %r : tensor<f32>
    ```
  }];
  let dependentDialects = ["autopar::dist::DistDialect",
                           "autopar::nn::NNDialect"];
}

def ZeroPartitionPass : Pass<"autopar-zero-partition", "mlir::ModuleOp"> {
  let summary = "ZeRO stages 2 and 3: flat-shard gradients and parameters";
  let description = [{
    For the module's `dist.zero_stage` (set by autopar-annotate-sharding):
    stage 2 and 3 reduce-scatter each gradient marked `dist.zero` into this
    rank's flat shard (`dist.zero_scatter`) right where the gradient is
    complete, so the full gradient dies there; stage 3 also stores every
    trainable parameter marked `dist.zero` as its flat shard and gathers
    it (`dist.zero_gather`) right before each op that uses it, in forward
    and again in backward, so the full parameter lives only around its use.
    Stages 0 and 1 leave the IR alone.

    ```mlir
    func.func @train_step(%w: tensor<4x4xf32> {dist.zero, nn.param = "w"}, ...)
        -> (..., tensor<4x4xf32> {dist.zero, nn.grad = "w"}) {
      %0 = nn.matmul %x, %w ...
      ...
      return %l, %g
    ```
    at stage 3 over dp = 2 becomes
    ```mlir
    func.func @train_step(%w: tensor<8xf32> {dist.zero, nn.param = "w"}, ...)
        -> (..., tensor<8xf32> {dist.zero, nn.grad = "w"}) {
      %f = dist.zero_gather %w on @mesh axes = [dp] : tensor<8xf32> -> tensor<4x4xf32>
      %0 = nn.matmul %x, %f ...
      ...
      %s = dist.zero_scatter sum %g on @mesh axes = [dp] : tensor<4x4xf32> -> tensor<8xf32>
      return %l, %s
    ```
    A `dist.zero` gradient that is not a pending sum over the axis is an
    error.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"dp\"", "The ZeRO mesh axis">,
  ];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

def HoistGathersPass : Pass<"autopar-dist-hoist-gathers", "mlir::ModuleOp"> {
  let summary = "All-gathers moved above the shape ops that enlarge what they gather";
  let description = [{
    A `dist.all_gather` of the result of a chain of shape ops (`nn.expand`,
    `nn.reshape`, `nn.unsqueeze`, `nn.squeeze`, `nn.transpose`, each used
    only by the next) gathers what those ops computed from a smaller
    tensor when one of them enlarges it: context parallelism's keys after
    grouped-query attention's expand over the query heads, which would move
    heads / kv heads times the bytes. The gather moves to the smallest
    tensor of the chain, on the dim that the gathered dim comes from, and
    the chain is rebuilt on the gathered tensor. Each op acts alike on each
    rank's block, and the dim keeps its place in the row-major layout (a
    reshape keeps the product of the dims before it and the dim itself; an
    expand does not broadcast it), so the result is the same. The gather
    goes to the smallest tensor of the chain nearest it; a chain that does
    not shrink is left alone.

    ```mlir
    %e = nn.expand %k : tensor<1x2x1x8x4xf32> -> tensor<1x2x4x8x4xf32>
    %r = nn.reshape %e : tensor<1x2x4x8x4xf32> -> tensor<1x8x8x4xf32>
    %g = dist.all_gather %r on @mesh axes = [cp] dim = 2 : tensor<1x8x8x4xf32> -> tensor<1x8x16x4xf32>
    ```
    becomes
    ```mlir
    %g = dist.all_gather %k on @mesh axes = [cp] dim = 3 : tensor<1x2x1x8x4xf32> -> tensor<1x2x1x16x4xf32>
    %e = nn.expand %g : tensor<1x2x1x16x4xf32> -> tensor<1x2x4x16x4xf32>
    %r = nn.reshape %e : tensor<1x2x4x16x4xf32> -> tensor<1x8x16x4xf32>
    ```
  }];
  let dependentDialects = ["autopar::dist::DistDialect",
                           "autopar::nn::NNDialect"];
}

def ZigZagPass : Pass<"autopar-dist-zigzag", "mlir::ModuleOp"> {
  let summary = "Context-parallel blocks dealt in zig-zag chunks (load balance)";
  let description = [{
    With a contiguous split of the sequence over cp, a causal attention's
    last cp rank does the most work (its queries see every key) and the
    first the least. Megatron-Core and Llama 3 deal each sequence in 2 x cp
    chunks instead: cp rank r holds chunks r and 2 cp - 1 - r, so every
    rank's queries see as many keys. This pass makes every dim split over
    cp so: collectives move contiguous blocks in rank order, so each
    `dist.tensor_split` and `dist.reduce_scatter` over cp first permutes
    the natural order's chunks into rank order, and each
    `dist.all_gather` permutes them back (slices and a concat: chunks of
    n / (P x 2 cp), P the product of the axes before cp; axes after cp split
    a rank's two chunks in turn). Everything between the collectives is
    per token, and attention masks by `positions`, split as the queries
    are, so the program computes what one device does. Runs after
    autopar-dist-spmdize (the plan's context_parallel.load_balance
    "zigzag", the default).

    ```mlir
    %s = dist.tensor_split %x on @mesh axes = [cp] dim = 0 : tensor<8xi64> -> tensor<4xi64>
    ```
    with cp = 2 becomes (chunks 0, 3 to rank 0 and 1, 2 to rank 1)
    ```mlir
    %0 = nn.slice %x {offsets = array<i64: 0>, strides = array<i64: 1>} : tensor<8xi64> -> tensor<2xi64>
    %1 = nn.slice %x {offsets = array<i64: 6>, strides = array<i64: 1>} : tensor<8xi64> -> tensor<2xi64>
    %2 = nn.slice %x {offsets = array<i64: 2>, strides = array<i64: 1>} : tensor<8xi64> -> tensor<2xi64>
    %3 = nn.slice %x {offsets = array<i64: 4>, strides = array<i64: 1>} : tensor<8xi64> -> tensor<2xi64>
    %4 = nn.concat %0, %1, %2, %3 {axis = 0 : i64} : (...) -> tensor<8xi64>
    %s = dist.tensor_split %4 on @mesh axes = [cp] dim = 0 : tensor<8xi64> -> tensor<4xi64>
    ```
    Error: a dim split over cp that P x 2 cp does not divide.
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def LowerCollectivesPass
    : Pass<"autopar-dist-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Dim-wise collectives as flat ones between transposes";
  let description = [{
    The runtime's all-gather and reduce-scatter move one contiguous block
    per rank. A `dist.all_gather` or `dist.reduce_scatter` whose `dim` has
    a dim of size > 1 before it (in the unsplit tensor) has strided blocks:
    it becomes a transpose that moves `dim` to the front, the collective
    on dim 0 and the inverse transpose. Collectives on a leading dim are
    left alone.

    ```mlir
    %1 = dist.all_gather %0 on @mesh axes = [tp] dim = 1
        : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
    ```
    becomes
    ```mlir
    %t = nn.transpose %0 {perm = array<i64: 1, 0, 2>}
        : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
    %g = dist.all_gather %t on @mesh axes = [tp] dim = 0
        : tensor<4x2x8xf32> -> tensor<8x2x8xf32>
    %1 = nn.transpose %g {perm = array<i64: 1, 0, 2>}
        : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
    ```

    The runtime's all-to-all exchanges contiguous blocks of a flat buffer
    (MPI's). A `dist.all_to_all` of any other form than `split_dim` =
    `concat_dim` on a leading dim becomes: a reshape that cuts `split_dim`
    into [n, size / n], a transpose that moves the n blocks to the front,
    the all-to-all on dim 0 (block j to position j; the leading dim then
    indexes the sender), a transpose that moves that dim in front of
    `concat_dim` and a reshape that merges the two (identity transposes
    left out).
  }];
  let dependentDialects = ["autopar::dist::DistDialect",
                           "autopar::nn::NNDialect"];
}

def ScheduleCollectivesPass
    : Pass<"autopar-dist-schedule-collectives", "mlir::ModuleOp"> {
  let summary = "Bucket gradient reductions and issue them during backward";
  let description = [{
    Gradient collectives (the `dist.all_reduce` / `dist.zero_scatter`
    whose only user is `func.return`) are grouped in the order their
    gradients are produced into buckets of the module's
    `dist.bucket_bytes`, and every collective of a bucket is moved to
    right after the op that completes the bucket's last gradient, tagged
    `dist.bucket = k`. The emitted program issues them as non-blocking
    collectives there and waits for them only where their results are
    used (at the return), so bucket k is reduced while backward computes
    bucket k + 1.

    ```mlir
    %g1 = ...
    %g2 = ...
    %r1 = dist.all_reduce sum %g1 ...
    %r2 = dist.all_reduce sum %g2 ...
    return %l, %r1, %r2
    ```
    with buckets holding one gradient each becomes
    ```mlir
    %g1 = ...
    %r1 = dist.all_reduce sum %g1 ... {dist.bucket = 0 : i64}
    %g2 = ...
    %r2 = dist.all_reduce sum %g2 ... {dist.bucket = 1 : i64}
    return %l, %r1, %r2
    ```

    First, a gradient already left pending over some axes (its result's
    `dist.sharding` has `partial = [dp]`: ZeRO-1, gradient accumulation,
    pipelines; the runtime reduces it once per step) that is all-reduced
    (sum) over other axes in the step (tp: a replicated parameter reached
    by split activations, a layer norm's under sequence parallelism)
    joins that reduction: the all-reduce goes and the result is pending
    over both (`partial = [dp, tp]`), so the accumulated gradient is
    reduced once per step instead of every micro-batch's, as Megatron-LM
    reduces the layer norms' gradients.
  }];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

def OffloadPass : Pass<"autopar-dist-offload", "mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: gradients to host memory for a host optimizer";
  let description = [{
    With the module's `dist.offload = "cpu"`, every gradient result of the
    training step passes through `dist.offload` as soon as it is reduced:
    it leaves the step for the host, where the optimizer state and its
    update live, as in ZeRO-Offload (the runtime copies each rank's shard
    to host memory after the step and copies the updated parameter shard
    back); the device keeps parameters and activations. Without it the
    pass does nothing.

    ```mlir
    %s = dist.zero_scatter sum %g on @mesh axes = [dp] : tensor<4x4xf32> -> tensor<8xf32>
    return %l, %s
    ```
    becomes
    ```mlir
    %s = dist.zero_scatter sum %g on @mesh axes = [dp] : tensor<4x4xf32> -> tensor<8xf32>
    %h = dist.offload %s : tensor<8xf32>
    return %l, %h
    ```
  }];
  let dependentDialects = ["autopar::dist::DistDialect"];
}

#endif // AUTOPAR_PASSES_PARALLEL
