// RUN: autopar-opt %s --autopar-dist-annotate="defer-reduction=true" --autopar-dist-propagate --autopar-dist-spmdize | FileCheck %s

// Pipeline phases under data parallelism (dp = 2 on each pipeline rank):
// what a phase receives from another is laid out as that one returns it.
// Stage 0's forward splits the batch of its input and so returns its
// output and saved value split; its backward takes the output's gradient
// and the saved value split the same way, stage 1's forward its input,
// and stage 1's backward returns the input's gradient as the input is
// laid out, whatever the order of the functions. Each rank's functions
// then hold 4 of the 8 rows; weight gradients stay pending over dp
// (reduced once per step by the runtime), the loss is reduced in the
// function.

// CHECK-LABEL: func.func @s1_b(
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.stage_input})
// CHECK-SAME: -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "v"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input_grad})
// CHECK-LABEL: func.func @s1_f(
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.stage_input})
// CHECK-SAME: -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"})
// CHECK: dist.all_reduce
// CHECK-LABEL: func.func @s0_b(
// CHECK-SAME: %arg2: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output_grad}, %arg3: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"})
// CHECK-SAME: -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "w"})
// CHECK-NOT: dist.all_reduce
// CHECK: return
// CHECK-LABEL: func.func @s0_f(
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input = "x"})
// CHECK-SAME: -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.output = "stage_output"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"})
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 1]
  func.func @s1_b(%v: tensor<4x4xf32> {nn.param = "v"},
                  %h: tensor<8x4xf32> {nn.stage_input})
      -> (tensor<4x4xf32> {nn.grad = "v"}, tensor<8x4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 1 : i64} {
    %g = nn.gemm %h, %h {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %gh = nn.matmul %h, %v : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %g, %gh : tensor<4x4xf32>, tensor<8x4xf32>
  }
  func.func @s1_f(%v: tensor<4x4xf32> {nn.param = "v"},
                  %h: tensor<8x4xf32> {nn.stage_input})
      -> (tensor<f32> {nn.output = "loss"})
      attributes {dist.phase = "forward", dist.stage = 1 : i64} {
    %0 = nn.matmul %h, %v : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x4xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @s0_b(%w: tensor<4x4xf32> {nn.param = "w"},
                  %x: tensor<8x4xf32> {nn.input = "x"},
                  %g: tensor<8x4xf32> {nn.output_grad},
                  %t: tensor<8x4xf32> {nn.saved = "f0"})
      -> (tensor<4x4xf32> {nn.grad = "w"})
      attributes {dist.phase = "backward", dist.stage = 0 : i64} {
    %0 = nn.mul %g, %t : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %1 = nn.gemm %x, %0 {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
  func.func @s0_f(%w: tensor<4x4xf32> {nn.param = "w"},
                  %x: tensor<8x4xf32> {nn.input = "x"})
      -> (tensor<8x4xf32> {nn.output = "stage_output"}, tensor<8x4xf32> {nn.saved = "f0"})
      attributes {dist.phase = "forward", dist.stage = 0 : i64} {
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.tanh %0 : tensor<8x4xf32>
    return %1, %1 : tensor<8x4xf32>, tensor<8x4xf32>
  }
}
