// RUN: autopar-opt %s --autopar-dist-pipeline-stages --split-input-file --verify-diagnostics | FileCheck %s

// Two stages of a forward split by autopar-dist-pipeline-split: the first
// looks the ids up and runs block 0, the second block 1 and the loss. Each
// stage computes the mask it reads from the buffer; the second receives
// the residual stream (nn.stage_input, last) and returns the loss, the
// first returns the stream (stage_output). @forward stays.

// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @forward_stage0(
// CHECK-SAME: %arg0: tensor<16x8xf32> {nn.param = "wte"}, %arg1: tensor<4x8xf32> {nn.buffer, nn.param = "mask"}, %arg2: tensor<8x8xf32> {nn.param = "w0"}, %arg3: tensor<4xi64> {nn.input = "ids"})
// CHECK-SAME: -> (tensor<4x8xf32> {nn.output = "stage_output"}) attributes {dist.stage = 0 : i64}
// CHECK-NEXT: %[[M:.*]] = nn.exp %arg1
// CHECK-NEXT: %[[X:.*]] = nn.gather %arg0, %arg3
// CHECK-NEXT: %[[A:.*]] = nn.matmul %[[X]], %arg2
// CHECK-NEXT: %[[B:.*]] = nn.add %[[A]], %[[M]]
// CHECK-NEXT: %[[Y:.*]] = nn.add %[[X]], %[[B]]
// CHECK-NEXT: return %[[Y]]
// CHECK-LABEL: func.func @forward_stage1(
// CHECK-SAME: %arg0: tensor<4x8xf32> {nn.buffer, nn.param = "mask"}, %arg1: tensor<8x8xf32> {nn.param = "w1"}, %arg2: tensor<8x16xf32> {nn.param = "head"}, %arg3: tensor<4xi64> {nn.input = "targets"}, %arg4: tensor<4x8xf32> {nn.stage_input})
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"}) attributes {dist.stage = 1 : i64}
// CHECK-NEXT: %[[M:.*]] = nn.exp %arg0
// CHECK-NEXT: %[[A:.*]] = nn.matmul %arg4, %arg1
// CHECK-NEXT: %[[B:.*]] = nn.add %[[A]], %[[M]]
// CHECK-NEXT: %[[Y:.*]] = nn.add %arg4, %[[B]]
// CHECK-NEXT: %[[L:.*]] = nn.matmul %[[Y]], %arg2
// CHECK-NEXT: %[[LOSS:.*]] = nn.softmax_cross_entropy %[[L]], %arg3
// CHECK-NEXT: return %[[LOSS]]
module {
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
                     %mask: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
                     %w0: tensor<8x8xf32> {nn.param = "w0"},
                     %w1: tensor<8x8xf32> {nn.param = "w1"},
                     %head: tensor<8x16xf32> {nn.param = "head"},
                     %ids: tensor<4xi64> {nn.input = "ids"},
                     %t: tensor<4xi64> {nn.input = "targets"})
      -> (tensor<f32> {nn.output = "loss"}) {
    %m = nn.exp %mask : tensor<4x8xf32>
    %x = nn.gather %wte, %ids {axis = 0 : i64, dist.stage = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x, %w0 {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x, %b0 {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %b1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x2, %head {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) {dist.stage = 1 : i64} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Without stages nothing happens.

// CHECK-LABEL: func.func @forward
// CHECK-NOT: func.func
module {
  func.func @forward(%x: tensor<4xf32> {nn.param = "x"}) -> tensor<f32> {
    %0 = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// A stage boundary two activations cross (the split pass never cuts
// there).

module {
  // expected-error @+1 {{pipeline stage 0 receives 0 and sends 2 activations; a stage boundary must be crossed by one}}
  func.func @forward(%w: tensor<4x4xf32> {nn.param = "w"},
                     %x: tensor<4x4xf32> {nn.input = "x"}) -> tensor<f32> {
    %a = nn.matmul %x, %w {dist.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %b = nn.exp %a {dist.stage = 0 : i64} : tensor<4x4xf32>
    %c = nn.add %a, %b {dist.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %d = nn.reduce_sum %c {axes = array<i64: 0, 1>, keepdims = false, dist.stage = 1 : i64} : tensor<4x4xf32> -> tensor<f32>
    return %d : tensor<f32>
  }
}
