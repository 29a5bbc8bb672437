//===- Passes.td - lowering passes -------------------------*- tablegen -*-===//

#ifndef AUTOPAR_PASSES_LOWERING
#define AUTOPAR_PASSES_LOWERING

include "mlir/Pass/PassBase.td"

def FuseElementwisePass : Pass<"autopar-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Group chains of elementwise ops into nn.fused loop kernels";
  let description = [{
    Every elementwise op (unary, binary, compare, where, cast, expand, gelu,
    gelu_grad) ends up in exactly one `nn.fused` op, which code generators
    emit as one loop nest. Starting from the last op, a fused op absorbs an
    elementwise producer when the producer's result has the fused shape and
    every use of it lies inside the fused op or after it; a producer used
    after the fused op (a value the backward pass reads) becomes one more
    result (multi-output fusion). A producer that is also used elsewhere is
    recomputed inside the fused op (rematerialized, at most 8 ops per
    operand) when the fused op then reads fewer full-size tensors: the
    backward of GELU recomputes erf(x / sqrt(2)) from x instead of reading
    it, so the forward does not write it. Only the values read later are
    written to memory. Splat constants are copied
    into the body; other operands (broadcast ones included) become operands
    of the fused op.

    ```mlir
    %1 = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = nn.relu %1 : tensor<4x8xf32>
    ```
    becomes
    ```mlir
    %2 = nn.fused (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %1 = nn.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %3 = nn.relu %1 : tensor<4x8xf32>
      nn.yield %3 : tensor<4x8xf32>
    }
    ```
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def FuseAttentionPass : Pass<"autopar-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Form nn.attention from the exported attention pattern";
  let description = [{
    torch.onnx.export writes scaled dot-product attention as
    MatMul(q, k^T) -> Mul/Div by a scalar -> optional mask -> Softmax over
    the last dim -> MatMul(., v). Each such chain whose intermediates have no
    other use becomes one `nn.attention` (flash-attention kernels on CUDA,
    tiled kernels on the CPU; its gradient is `nn.attention_grad`), so no
    T x S score matrix is stored for the backward. Masks: `where(c, -inf,
    s)` (c: masked) or `where(c, s, -inf)` (c: attended); a constant mask
    that is exactly the causal one (j > i + S - T masked) becomes
    `causal = true` with no mask operand, any other mask a bool operand.
    Run it before autodiff. Chains it cannot prove equivalent are left as
    they are.

    ```mlir
    %s = nn.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
    %c = nn.constant dense<0.353553385> : tensor<f32>
    %y = nn.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
    %p = nn.softmax %y {axis = 3 : i64} : tensor<2x4x16x16xf32> -> tensor<2x4x16x16xf32>
    %o = nn.matmul %p, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
    ```
    becomes
    ```mlir
    %k = nn.transpose %kt {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
    %o, %lse = nn.attention %q, %k, %v {causal = false, scale = 0.35355338454246521 : f64} : ...
    ```
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "Leave attention with more features per head than this unfused "
           "(the largest the target's kernels take; 0: no limit)">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def FuseGeluPass : Pass<"autopar-fuse-gelu", "mlir::func::FuncOp"> {
  let summary = "Form nn.gelu from the exported GELU pattern";
  let description = [{
    torch.onnx.export (below opset 20) writes GELU as elementwise pieces:
    `0.5 * x * (1 + erf(x / sqrt(2)))`, or with `approximate="tanh"` (and
    Hugging Face's gelu_new) `0.5 * x * (1 + tanh(sqrt(2/pi) * (x +
    0.044715 * x^3)))`. Each such chain whose intermediates have no other
    use becomes one `nn.gelu`, differentiated as one `nn.gelu_grad`: the
    formula of PyTorch's kernels, with no division per element and the
    derivative in closed form. Operands of adds and multiplies match in
    either order, the 0.5 anywhere in the product, `x / sqrt(2)` also as
    `x * (1 / sqrt(2))`, `x^3` as `Pow(x, 3)`, `x * (x * x)` or `(x * x) *
    x`; constants must be scalars within 1e-6 (relative) of the formula's.
    Run it before autodiff.

    ```mlir
    %c = nn.constant dense<1.41421354> : tensor<f32>
    %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %e = nn.erf %d : tensor<4x8xf32>
    %one = nn.constant dense<1.0> : tensor<f32>
    %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %half = nn.constant dense<0.5> : tensor<f32>
    %y = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
    becomes
    ```mlir
    %y = nn.gelu %x approximate(none) : tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def PlanMemoryPass : Pass<"autopar-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign every intermediate tensor an offset in one arena";
  let description = [{
    Static, liveness-based memory planning (greedy by size, as TFLite's and
    XLA's planners): every value that needs storage and is neither a
    function argument nor a view (reshape, squeeze, unsqueeze, identity
    share their operand's bytes) lives from its definition to its last use,
    a view's uses counting as uses of its base. Buffers are placed, largest
    first, at the lowest 64-byte-aligned offset that does not overlap a
    placed buffer with an overlapping lifetime. Results stay live to the
    end of the function. Transposes the consumers read through strides
    (matmul and attention operands) are views too, and so is a split
    whose results attention reads (through reshapes and such transposes)
    as query, key and value; so is the transpose of
    an attention output or of dq / dk / dv that keeps the last dim last:
    the attention kernels write the value straight into the transpose's
    layout, whose buffer then lives from the attention op on (the value and
    the transpose share its offset), or into the storage of a concat those
    transposes feed through single-use reshapes (dq, dk, dv at their
    offsets in the q/k/v gradient; the concat is a view).

    On the CPU target a dequantize (plan `quantize`) that only GEMMs read
    as their B operand (directly or through such a transpose) has no
    buffer either: those GEMMs dequantize it a panel at a time.

    Each op gets `nn.offsets` (one byte offset per result, -1 for a view)
    and the function `nn.arena_bytes`:
    ```mlir
    func.func @f(...) attributes {nn.arena_bytes = 256 : i64} {
      %0 = nn.matmul %a, %b {nn.offsets = array<i64: 0>} : ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or cuda">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def MixedPrecisionPass : Pass<"autopar-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "Store trainable parameters and their activations in a 16-bit type";
  let description = [{
    The plan's `precision: bf16-mixed` (fp32 master weights are the
    runtime's). Run before autodiff, on the forward function: trainable f32
    parameters become `dtype`; an op with a 16-bit float operand computes in
    16 bits (its other float operands cast down, its results 16-bit), except
    softmax_cross_entropy, which reads the 16-bit logits and keeps an f32
    loss, and elementwise
    ops whose other float operands are splat constants, which compute in
    f32 (casting the 16-bit operands up) so that scalars are not rounded.
    Ops without a 16-bit operand (masks from constants and frozen buffers)
    stay f32; attention's log-sum-exp stays f32.

    ```mlir
    func.func @f(%w: tensor<4x4xf32> {nn.param = "w"}, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
      %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      return %y : tensor<2x4xf32>
    }
    ```
    becomes
    ```mlir
    func.func @f(%w: tensor<4x4xbf16> {nn.param = "w"}, %x: tensor<2x4xf32>) -> tensor<2x4xbf16> {
      %0 = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
      %y = nn.matmul %0, %w : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
      return %y : tensor<2x4xbf16>
    }
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "The 16-bit type: bf16 or f16">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def RestoreUntrainedPrecisionPass
    : Pass<"autopar-restore-untrained-precision", "mlir::ModuleOp"> {
  let summary = "Keep parameters without a gradient in their logical type";
  let description = [{
    Run after autopar-mixed-precision and autopar-autodiff. Mixed precision
    stores trained parameters in 16 bits, their f32 masters in the
    optimizer; a parameter that gets no gradient (a mask buffer the loss
    only compares against) has no master, so it stays in its logical type
    (`nn.logical_type`, from autopar-apply-plan) and is cast to the 16-bit
    type where it is used. Applies to every function of the module; a
    parameter is trained when some function returns its gradient
    (`nn.grad`).

    ```mlir
    func.func @train_step(%m: tensor<4x4xbf16> {nn.logical_type = tensor<4x4xf32>, nn.param = "mask"}, ...) {
      %0 = nn.compare gt %m, ...
    ```
    becomes
    ```mlir
    func.func @train_step(%m: tensor<4x4xf32> {nn.logical_type = tensor<4x4xf32>, nn.param = "mask"}, ...) {
      %c = nn.cast %m : tensor<4x4xf32> to tensor<4x4xbf16>
      %0 = nn.compare gt %c, ...
    ```
    The argument keeps its shape (a view of the logical tensor, or the
    logical tensor padded: autopar-dist-pad-vocabulary); a logical type
    with more elements than the argument is an error.
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def GradPrecisionPass : Pass<"autopar-grad-precision", "mlir::ModuleOp"> {
  let summary = "Return 16-bit parameter gradients as f32";
  let description = [{
    Run after autodiff under mixed precision when the plan's `grad_dtype`
    is `fp32` (Megatron-LM's accumulate_allreduce_grads_in_fp32,
    DeepSpeed's grad_accum_dtype): every function result that is a
    parameter gradient (`nn.grad`) of a 16-bit float type is cast to f32
    before it is returned. The data-parallel reduction later placed on the
    returned value (a cast passes a pending sum through), the accumulation
    over micro-batches and the optimizer's read then run in f32. Results
    already f32, and other results, are left alone.

    ```mlir
    func.func @train_step(...) -> (tensor<f32>, tensor<4x4xbf16> {nn.grad = "w"}) {
      return %loss, %dw : tensor<f32>, tensor<4x4xbf16>
    ```
    becomes
    ```mlir
    func.func @train_step(...) -> (tensor<f32>, tensor<4x4xf32> {nn.grad = "w"}) {
      %0 = nn.cast %dw : tensor<4x4xbf16> to tensor<4x4xf32>
      return %loss, %0 : tensor<f32>, tensor<4x4xf32>
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f32\"",
           "The gradients' type: f32">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

def LegalizePrecisionPass : Pass<"autopar-legalize-precision", "mlir::func::FuncOp"> {
  let summary = "Compute ops whose kernels take f32 in f32 around 16-bit tensors";
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Whose kernels: cpu or cuda">,
  ];
  let description = [{
    matmul, gemm, attention, layer_norm, softmax, softmax_cross_entropy
    (and their gradients), gather_grad and the reductions with a 16-bit
    float operand or result get their 16-bit operands cast to f32 and their
    results computed in f32 and cast back: one rounding per result, as
    16-bit kernels with f32 accumulation. Run after autodiff, before
    fusion (the casts fuse into elementwise kernels). With `target=cuda`,
    an nn.matmul, layer_norm(_grad) or reduction whose operands and
    results all have one 16-bit type, a 16-bit attention(_grad), and a
    softmax_cross_entropy(_grad) of 16-bit scores with an f32 loss stay as
    they are: cuBLASLt multiplies bf16 / f16 matrices with f32 accumulation
    on tensor cores, and the other kernels read 16-bit tensors and
    accumulate in f32.

    ```mlir
    %y = nn.matmul %x, %w : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    ```
    becomes
    ```mlir
    %0 = nn.cast %x : tensor<2x4xbf16> to tensor<2x4xf32>
    %1 = nn.cast %w : tensor<4x4xbf16> to tensor<4x4xf32>
    %2 = nn.matmul %0, %1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %y = nn.cast %2 : tensor<2x4xf32> to tensor<2x4xbf16>
    ```
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

#endif // AUTOPAR_PASSES_LOWERING
