// RUN: autopar-opt %s --autopar-autodiff --autopar-loss-only-forward | FileCheck %s

// The gradient of a dropout is the same dropout (site, ratio: the same
// mask drawn again) of the output gradient; evaluation (the forward left by
// autopar-loss-only-forward) runs without dropout.

// CHECK-LABEL: func.func @forward
// CHECK-NOT: nn.dropout
// CHECK: return
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]] = nn.matmul %{{.*}}, %arg0
// CHECK: %[[D:.*]] = nn.dropout %[[Y]] ratio(1.000000e-01) site(3) : tensor<2x3xf32>
// CHECK: nn.reduce_mean %[[D]]
// CHECK: %[[G:.*]] = nn.expand
// CHECK: %[[DG:.*]] = nn.dropout %[[G]] ratio(1.000000e-01) site(3) : tensor<2x3xf32>
// CHECK: nn.matmul %{{.*}}, %[[DG]]
func.func @forward(%w: tensor<4x3xf32> {nn.param = "w"}, %x: tensor<2x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %d = nn.dropout %y ratio(0.1) site(3) : tensor<2x3xf32>
  %l = nn.reduce_mean %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
