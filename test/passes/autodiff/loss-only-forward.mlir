// RUN: autopar-opt %s --autopar-loss-only-forward --split-input-file --verify-diagnostics | FileCheck %s

// The forward function keeps its loss alone (with its result attributes);
// the other results and their attributes go. Other functions stay.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"})
// CHECK: return %{{.*}} : tensor<f32>
// CHECK-LABEL: func.func @other
// CHECK-SAME: -> (tensor<2xf32>, tensor<f32>)
func.func @forward(%w: tensor<2xf32> {nn.param = "w"})
    -> (tensor<2xf32> {nn.output = "logits"}, tensor<f32> {nn.output = "loss"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %w, %0 : tensor<2xf32>, tensor<f32>
}
func.func @other(%w: tensor<2xf32>) -> (tensor<2xf32>, tensor<f32>) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %w, %0 : tensor<2xf32>, tensor<f32>
}
