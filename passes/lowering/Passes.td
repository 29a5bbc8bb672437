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
    result (multi-output fusion). No value is computed twice and only the
    values read later are written to memory. Splat constants are copied
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
    end of the function.

    Each op gets `nn.offsets` (one byte offset per result, -1 for a view)
    and the function `nn.arena_bytes`:
    ```mlir
    func.func @f(...) attributes {nn.arena_bytes = 256 : i64} {
      %0 = nn.matmul %a, %b {nn.offsets = array<i64: 0>} : ...
    ```
  }];
  let dependentDialects = ["autopar::nn::NNDialect"];
}

#endif // AUTOPAR_PASSES_LOWERING
