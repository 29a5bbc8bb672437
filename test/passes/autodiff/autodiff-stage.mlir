// RUN: autopar-opt %s --autopar-autodiff="forward=stage loss=stage_output train-step=stage_step" | FileCheck %s
// RUN: autopar-opt %s --autopar-autodiff="forward=last train-step=last_step" | FileCheck %s --check-prefix=LAST

// A pipeline stage (autopar-dist-pipeline-stages): `loss` names its tensor
// output, whose gradient comes in as a new last argument (nn.output_grad)
// and seeds the backward; the activation it received (nn.stage_input)
// gets its gradient returned last (nn.input_grad).

// CHECK-LABEL: func.func @stage_step(
// CHECK-SAME: %arg0: tensor<4x4xf32> {nn.param = "w"}, %arg1: tensor<2x4xf32> {nn.stage_input}, %arg2: tensor<2x4xf32> {nn.output_grad})
// CHECK-SAME: -> (tensor<2x4xf32> {nn.output = "stage_output"}, tensor<4x4xf32> {nn.grad = "w"}, tensor<2x4xf32> {nn.input_grad})
// CHECK: %[[Y:.*]] = nn.matmul %arg1, %arg0
// CHECK-DAG: %[[WT:.*]] = nn.transpose %arg0
// CHECK-DAG: %[[GX:.*]] = nn.matmul %arg2, %[[WT]]
// CHECK-DAG: %[[XT:.*]] = nn.transpose %arg1
// CHECK-DAG: %[[GW:.*]] = nn.matmul %[[XT]], %arg2
// CHECK: return %[[Y]], %[[GW]], %[[GX]]
func.func @stage(%w: tensor<4x4xf32> {nn.param = "w"},
                 %x: tensor<2x4xf32> {nn.stage_input})
    -> (tensor<2x4xf32> {nn.output = "stage_output"}) {
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// The last stage: seeded with 1 by its scalar loss; a received activation
// the loss does not depend on sends back zeros.

// LAST-LABEL: func.func @last_step(
// LAST-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<4xf32> {nn.grad = "v"}, tensor<2x4xf32> {nn.input_grad})
// LAST: %[[Z:.*]] = nn.constant dense<0.000000e+00> : tensor<2x4xf32>
// LAST: return %{{.*}}, %{{.*}}, %[[Z]]
func.func @last(%v: tensor<4xf32> {nn.param = "v"},
                %x: tensor<2x4xf32> {nn.stage_input})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.reduce_sum %v {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
