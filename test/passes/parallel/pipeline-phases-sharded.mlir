// RUN: autopar-opt %s --autopar-autodiff="forward=stage loss=stage_output train-step=step" --autopar-annotate-sharding="defer-reduction=true" --autopar-propagate-sharding --autopar-dist-pipeline-phases | FileCheck %s

// A stage's training step laid out over the mesh before it is split (dp =
// 2: the samples split): the phases keep its layouts. The forward saves
// tanh's output as the step holds it, split over dp, and the backward reads
// it so; arguments and results keep their shardings (the input split, the
// weight's gradient pending over dp).

// CHECK-LABEL: func.func @step_b(
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output_grad}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"}
// CHECK-SAME: -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "w"})
// CHECK-LABEL: func.func @step_f(
// CHECK-SAME: %arg1: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input = "x"}
// CHECK-SAME: -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output = "stage_output"}, tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"})
// CHECK: nn.tanh {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], []]>]
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 1]
  func.func @stage(%w: tensor<4x4xf32> {nn.param = "w"},
                   %x: tensor<8x4xf32> {nn.input = "x"})
      -> (tensor<8x4xf32> {nn.output = "stage_output"}) attributes {dist.stage = 0 : i64} {
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.tanh %0 : tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}
