// RUN: autopar-opt %s --autopar-autodiff=loss-scale-argument=true | FileCheck %s
// RUN: autopar-opt %s --autopar-autodiff | FileCheck %s --check-prefix=PLAIN

// With loss-scale-argument the train step takes the seed of the backward
// pass as a last argument (nn.loss_scale) in place of the constant 1: every
// gradient is multiplied by it. @forward keeps its signature.

// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<3xf32> {nn.param = "w"}, %{{.*}}: tensor<3xf32> {nn.input = "x"}) -> (tensor<f32> {nn.output = "loss"})
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<3xf32> {nn.param = "w"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<3xf32> {nn.input = "x"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {nn.loss_scale})
// CHECK-NOT: nn.constant dense<1.000000e+00>
// CHECK: %[[G0:.*]] = nn.reshape %[[S]] : tensor<f32> -> tensor<1xf32>
// CHECK: return
// PLAIN-LABEL: func.func @train_step
// PLAIN-NOT: nn.loss_scale
// PLAIN: nn.constant dense<1.000000e+00> : tensor<f32>
func.func @forward(%w: tensor<3xf32> {nn.param = "w"}, %x: tensor<3xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
