// RUN: autopar-opt %s --autopar-autodiff="forward=stage loss=stage_output train-step=step" --autopar-dist-pipeline-phases | FileCheck %s
// RUN: autopar-opt %s --autopar-autodiff="forward=stage loss=stage_output train-step=step" --autopar-dist-pipeline-phases=split-weight-gradients=true | FileCheck %s --check-prefix=ZB
// RUN: autopar-opt %s --autopar-autodiff="forward=plain loss=stage_output train-step=plain_step" --autopar-dist-pipeline-phases | FileCheck %s --check-prefix=PLAIN
// RUN: autopar-opt %s --autopar-autodiff="forward=tied loss=stage_output train-step=tied_step" --autopar-dist-pipeline-phases | FileCheck %s --check-prefix=TIED

// A middle pipeline stage, y = tanh(x w) * m with m = sum(exp(mask)) (a
// buffer), differentiated by autopar-autodiff. The forward phase returns
// y and saves tanh's output (its gradient reads it); the backward reads it
// back under the same key with the output's gradient and returns w's and
// x's gradients. m, which only depends on the buffer, the backward
// recomputes rather than reads saved.

// CHECK-LABEL: func.func @step_b(
// CHECK-SAME: %arg0: tensor<4x4xf32> {nn.param = "w"}, %arg1: tensor<4x4xf32> {nn.buffer, nn.param = "mask"}, %arg2: tensor<2x4xf32> {nn.stage_input}, %arg3: tensor<2x4xf32> {nn.output_grad}, %arg4: tensor<2x4xf32> {nn.saved = "f0"})
// CHECK-SAME: -> (tensor<4x4xf32> {nn.grad = "w"}, tensor<2x4xf32> {nn.input_grad}) attributes {dist.phase = "backward", dist.stage = 1 : i64}
// CHECK-NEXT: nn.exp %arg1
// CHECK: nn.mul %arg4, %arg4
// CHECK: return
// CHECK-LABEL: func.func @step_f(
// CHECK-SAME: %arg0: tensor<4x4xf32> {nn.param = "w"}, %arg1: tensor<4x4xf32> {nn.buffer, nn.param = "mask"}, %arg2: tensor<2x4xf32> {nn.stage_input})
// CHECK-SAME: -> (tensor<2x4xf32> {nn.output = "stage_output"}, tensor<2x4xf32> {nn.saved = "f0"}) attributes {dist.phase = "forward", dist.stage = 1 : i64}
// CHECK: %[[XW:.*]] = nn.matmul %arg2, %arg0
// CHECK: %[[T:.*]] = nn.tanh %[[XW]]
// CHECK: %[[M:.*]] = nn.exp %arg1
// CHECK: %[[Y:.*]] = nn.mul %[[T]]
// CHECK: return %[[Y]], %[[T]]

// Zero bubble: the input's gradient first, saving what the weights'
// gradient also reads (tanh's gradient); then the weights' gradient from
// the forward's and the first half's saved values.

// ZB-LABEL: func.func @step_w(
// ZB-SAME: %arg0: tensor<2x4xf32> {nn.stage_input}, %arg1: tensor<2x4xf32> {nn.saved = "i0"})
// ZB-SAME: -> (tensor<4x4xf32> {nn.grad = "w"}) attributes {dist.phase = "weight", dist.stage = 1 : i64}
// ZB-NEXT: nn.transpose %arg0
// ZB-NEXT: nn.matmul
// ZB-NEXT: return
// ZB-LABEL: func.func @step_i(
// ZB-SAME: %arg0: tensor<4x4xf32> {nn.param = "w"}, %arg1: tensor<4x4xf32> {nn.buffer, nn.param = "mask"}, %arg2: tensor<2x4xf32> {nn.output_grad}, %arg3: tensor<2x4xf32> {nn.saved = "f0"})
// ZB-SAME: -> (tensor<2x4xf32> {nn.input_grad}, tensor<2x4xf32> {nn.saved = "i0"}) attributes {dist.phase = "input", dist.stage = 1 : i64}
// ZB-NOT: func.func @step_b
// ZB-LABEL: func.func @step_f(

// A value computed from parameters alone (a tied head's transposed
// embedding) is recomputed by the backward from the parameter, not saved
// (a copy per micro-batch in flight): tanh's output is the only saved
// value.

// TIED-LABEL: func.func @tied_step_b(
// TIED-SAME: %arg0: tensor<4x4xf32> {nn.param = "w"}, %arg1: tensor<2x4xf32> {nn.stage_input}, %arg2: tensor<2x4xf32> {nn.output_grad}, %arg3: tensor<2x4xf32> {nn.saved = "f0"})
// TIED-NEXT: nn.transpose %arg0
// TIED-LABEL: func.func @tied_step_f(
// TIED-SAME: -> (tensor<2x4xf32> {nn.output = "stage_output"}, tensor<2x4xf32> {nn.saved = "f0"})

// A function without a stage is no pipeline stage: nothing to split.

// PLAIN-NOT: @plain_step_f
module {
  func.func @stage(%w: tensor<4x4xf32> {nn.param = "w"},
                   %mask: tensor<4x4xf32> {nn.param = "mask", nn.buffer},
                   %x: tensor<2x4xf32> {nn.stage_input})
      -> (tensor<2x4xf32> {nn.output = "stage_output"}) attributes {dist.stage = 1 : i64} {
    %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = nn.tanh %0 : tensor<2x4xf32>
    %m = nn.exp %mask : tensor<4x4xf32>
    %r = nn.reduce_sum %m {axes = array<i64: 0>, keepdims = false} : tensor<4x4xf32> -> tensor<4xf32>
    %2 = nn.mul %1, %r : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func @tied(%w: tensor<4x4xf32> {nn.param = "w"},
                  %x: tensor<2x4xf32> {nn.stage_input})
      -> (tensor<2x4xf32> {nn.output = "stage_output"}) attributes {dist.stage = 1 : i64} {
    %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
    %0 = nn.matmul %x, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = nn.tanh %0 : tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
  func.func @plain(%w: tensor<4x4xf32> {nn.param = "w"},
                   %x: tensor<2x4xf32> {nn.stage_input})
      -> (tensor<2x4xf32> {nn.output = "stage_output"}) {
    %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
