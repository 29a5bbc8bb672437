// RUN: autopar-opt %s --autopar-autodiff --autopar-recompute=mode=full | FileCheck %s

// Full recompute at Megatron-LM's granularity: two layers, each an
// attention-like block (matmul, softmax, matmul, residual add) and an MLP
// block (matmul, gelu, matmul, residual add), then a head and a loss.
//
// A layer begins at a cut (one activation live) followed by an attention
// (here its softmax): the checkpoints are each layer's input (%0, %7) and
// the end of the last layer (%14, the last join). Each layer is recomputed
// whole from its input: softmax, output projection, residual add, first
// MLP matmul and gelu (the second MLP matmul's result is read by no
// backward op). The middle of a layer (its first residual add) is not a
// checkpoint; the embedding before the first layer and the head and loss
// after the last are kept, not recomputed.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = nn.matmul %arg6, %{{.*}} :
// CHECK: nn.softmax
// CHECK: nn.add
// CHECK: nn.gelu
// CHECK: %[[X2:.*]] = nn.add
// CHECK: nn.reduce_mean
// CHECK-NOT: nn.tanh {{.*}}nn.recomputed
// The second layer, from its input (kept):
// CHECK: %[[Q2:.*]] = nn.matmul %[[X2]], %{{.*}} {nn.recomputed}
// CHECK: %[[S2:.*]] = nn.softmax %[[Q2]] {axis = 1 : i64, nn.recomputed}
// CHECK: %[[O2:.*]] = nn.matmul %[[S2]], %{{.*}} {nn.recomputed}
// CHECK: %[[H2:.*]] = nn.add %[[O2]], %[[X2]] {nn.recomputed}
// CHECK: %[[M2:.*]] = nn.matmul %[[H2]], %{{.*}} {nn.recomputed}
// CHECK: nn.gelu %[[M2]] approximate(none) {nn.recomputed}
// CHECK-NOT: nn.recomputed
// The first layer, from the embedding (kept):
// CHECK: %[[Q1:.*]] = nn.matmul %[[E]], %{{.*}} {nn.recomputed}
// CHECK: %[[S1:.*]] = nn.softmax %[[Q1]] {axis = 1 : i64, nn.recomputed}
// CHECK: %[[O1:.*]] = nn.matmul %[[S1]], %{{.*}} {nn.recomputed}
// CHECK: %[[H1:.*]] = nn.add %[[O1]], %[[E]] {nn.recomputed}
// CHECK: %[[M1:.*]] = nn.matmul %[[H1]], %{{.*}} {nn.recomputed}
// CHECK: nn.gelu %[[M1]] approximate(none) {nn.recomputed}
// CHECK-NOT: nn.recomputed
// CHECK: return
func.func @forward(%wq: tensor<4x4xf32> {nn.param = "wq"}, %wo: tensor<4x4xf32> {nn.param = "wo"},
                   %w1: tensor<4x8xf32> {nn.param = "w1"}, %w2: tensor<8x4xf32> {nn.param = "w2"},
                   %we: tensor<4x4xf32> {nn.param = "we"}, %wh: tensor<4x4xf32> {nn.param = "wh"},
                   %x: tensor<2x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.matmul %x, %we : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = nn.matmul %0, %wq : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %2 = nn.softmax %1 {axis = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  %3 = nn.matmul %2, %wo : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %4 = nn.add %3, %0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %5 = nn.matmul %4, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %6 = nn.gelu %5 approximate(none) : tensor<2x8xf32>
  %f1 = nn.matmul %6, %w2 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %7 = nn.add %f1, %4 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = nn.matmul %7, %wq : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %9 = nn.softmax %8 {axis = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  %10 = nn.matmul %9, %wo : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %11 = nn.add %10, %7 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %12 = nn.matmul %11, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %13 = nn.gelu %12 approximate(none) : tensor<2x8xf32>
  %f2 = nn.matmul %13, %w2 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %14 = nn.add %f2, %11 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %15 = nn.matmul %14, %wh : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %16 = nn.tanh %15 : tensor<2x4xf32>
  %17 = nn.reduce_mean %16 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %17 : tensor<f32>
}
