// RUN: autopar-opt %s --autopar-autodiff --autopar-recompute=mode=selective | FileCheck %s --check-prefix=SEL
// RUN: autopar-opt %s --autopar-autodiff --autopar-recompute=mode=full | FileCheck %s --check-prefix=FULL
// RUN: autopar-opt %s --autopar-autodiff --autopar-recompute=mode=none | FileCheck %s --check-prefix=NONE
// RUN: not autopar-opt %s --autopar-autodiff --autopar-recompute=mode=all 2>&1 | FileCheck %s --check-prefix=BAD

// Two residual blocks (matmul, gelu, matmul, add) and a tanh loss.
//
// selective: the backward reads copies of the cheap ops (the gelus, the
// residual adds, the tanh), made from what the matmuls produce and the
// arguments, before the first backward op that reads them; the forward
// values die in the forward pass. The matmuls are not copied.
//
// full (a model without attention; recompute-layers.mlir has layers): the
// checkpoints are the first cut (the float input %x, the only value of the
// stream live at the entry) and every join (each block's residual add);
// each block is recomputed from its input when the backward reaches it
// (its first matmul and gelu: the second matmul's result is read by no
// backward op). What follows the last join (the tanh loss) is kept.

// Copies carry nn.recomputed (CSE keeps them apart).

// SEL-LABEL: func.func @train_step
// SEL: %[[M1:.*]] = nn.matmul %arg4, %arg0
// SEL: %[[M2:.*]] = nn.matmul %{{.*}}, %arg1
// SEL: %[[M3:.*]] = nn.matmul %{{.*}}, %arg2
// SEL: %[[M4:.*]] = nn.matmul %{{.*}}, %arg3
// SEL: nn.reduce_mean
// SEL: %[[R1:.*]] = nn.add %[[M2]], %arg4 {nn.recomputed}
// SEL: %[[R2:.*]] = nn.add %[[M4]], %[[R1]] {nn.recomputed}
// SEL: %[[T:.*]] = nn.tanh %[[R2]] {nn.recomputed}
// SEL: nn.mul %[[T]], %[[T]]
// SEL: nn.gelu %[[M3]] approximate(none) {nn.recomputed}
// SEL: nn.gelu %[[M1]] approximate(none) {nn.recomputed}
// SEL-NOT: nn.matmul {{.*}}nn.recomputed
// SEL: return

// FULL-LABEL: func.func @train_step
// FULL: %[[R1:.*]] = nn.add %{{.*}}, %arg4 :
// FULL: nn.reduce_mean
// FULL-NOT: nn.tanh {{.*}}nn.recomputed
// FULL: %[[C3:.*]] = nn.matmul %[[R1]], %arg2 {nn.recomputed}
// FULL: nn.gelu %[[C3]] approximate(none) {nn.recomputed}
// FULL-NOT: nn.add {{.*}}nn.recomputed
// FULL: %[[C1:.*]] = nn.matmul %arg4, %arg0 {nn.recomputed}
// FULL: nn.gelu %[[C1]] approximate(none) {nn.recomputed}
// FULL-NOT: nn.recomputed
// FULL: return

// NONE-NOT: nn.recomputed

// BAD: autopar-recompute: unknown mode 'all' (expected none, selective or full)
func.func @forward(%w1: tensor<4x8xf32> {nn.param = "w1"}, %w2: tensor<8x4xf32> {nn.param = "w2"},
                   %w3: tensor<4x8xf32> {nn.param = "w3"}, %w4: tensor<8x4xf32> {nn.param = "w4"},
                   %x: tensor<2x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %1 = nn.gelu %0 approximate(none) : tensor<2x8xf32>
  %2 = nn.matmul %1, %w2 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %3 = nn.add %2, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = nn.matmul %3, %w3 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %5 = nn.gelu %4 approximate(none) : tensor<2x8xf32>
  %6 = nn.matmul %5, %w4 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %7 = nn.add %6, %3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = nn.tanh %7 : tensor<2x4xf32>
  %9 = nn.reduce_mean %8 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %9 : tensor<f32>
}
