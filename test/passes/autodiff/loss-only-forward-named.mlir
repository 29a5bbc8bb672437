// RUN: autopar-opt %s --autopar-loss-only-forward="loss=l2" | FileCheck %s

// Two scalar losses: the `loss` option names the one the forward function
// keeps (without it the pass fails: loss-only-forward-invalid.mlir).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {nn.output = "l2"})
// CHECK: %[[L2:.*]] = nn.mul
// CHECK-NEXT: return %[[L2]] : tensor<f32>
func.func @forward(%w: tensor<2xf32> {nn.param = "w"})
    -> (tensor<f32> {nn.output = "l1"}, tensor<f32> {nn.output = "l2"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %1 = nn.mul %0, %0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}
