// RUN: autopar-opt %s --autopar-annotate-sharding="defer-reduction=true" --autopar-propagate-sharding --autopar-dist-spmdize | FileCheck %s

// Two pipeline stages' training steps under data parallelism (dp = 2 on
// each pipeline rank): what a stage receives from another is laid out as
// that one returns it, whatever the order of the functions. Stage 0
// splits the batch of its input and so returns its output split; stage 1
// takes its input split so, and returns the input's gradient as the input
// is laid out; stage 0 takes that gradient (nn.output_grad) split the same
// way. Each rank's functions then hold 4 of the 8 rows; weight gradients
// stay pending over dp (reduced once per step by the runtime), the loss is
// reduced in the function.

// CHECK-LABEL: func.func @s1(
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.stage_input})
// CHECK-SAME: -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "v"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input_grad})
// CHECK: dist.all_reduce
// CHECK-LABEL: func.func @s0(
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input = "x"}, %arg2: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output_grad})
// CHECK-SAME: -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output = "stage_output"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "w"})
// CHECK-NOT: dist.all_reduce
// CHECK: return
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 1]
  func.func @s1(%v: tensor<4x4xf32> {nn.param = "v"},
                %h: tensor<8x4xf32> {nn.stage_input})
      -> (tensor<f32> {nn.output = "loss"}, tensor<4x4xf32> {nn.grad = "v"},
          tensor<8x4xf32> {nn.input_grad})
      attributes {dist.stage = 1 : i64} {
    %0 = nn.matmul %h, %v : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x4xf32> -> tensor<f32>
    %g = nn.gemm %h, %h {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %gh = nn.matmul %h, %v : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %1, %g, %gh : tensor<f32>, tensor<4x4xf32>, tensor<8x4xf32>
  }
  func.func @s0(%w: tensor<4x4xf32> {nn.param = "w"},
                %x: tensor<8x4xf32> {nn.input = "x"},
                %dy: tensor<8x4xf32> {nn.output_grad})
      -> (tensor<8x4xf32> {nn.output = "stage_output"}, tensor<4x4xf32> {nn.grad = "w"})
      attributes {dist.stage = 0 : i64} {
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.tanh %0 : tensor<8x4xf32>
    %2 = nn.mul %dy, %1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %3 = nn.gemm %x, %2 {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %1, %3 : tensor<8x4xf32>, tensor<4x4xf32>
  }
}
