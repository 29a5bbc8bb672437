// RUN: autopar-opt %s --autopar-autodiff --split-input-file --verify-diagnostics | FileCheck %s

// A Linear layer, a frozen scale and a parameter the loss does not use: the
// frozen and the unused parameter get no gradient result; the bias gradient
// is the broadcast sum; the weight gradient is x^T g.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4x3xf32> {nn.param = "w"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {nn.param = "b"}
// CHECK-SAME: %[[F:[a-z0-9]+]]: tensor<3xf32> {nn.frozen, nn.param = "f"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4xf32> {nn.input = "x"}
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<4x3xf32> {nn.grad = "w"}, tensor<3xf32> {nn.grad = "b"})
// CHECK: %[[Y:.*]] = nn.tanh
// CHECK: %[[LOSS:.*]] = nn.reduce_mean %[[Y]]
// CHECK: %[[SEED:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G0:.*]] = nn.reshape %[[SEED]] : tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[INV:.*]] = nn.constant dense<0.166666672> : tensor<f32>
// CHECK: %[[G1:.*]] = nn.mul %[[G0]], %[[INV]]
// CHECK: %[[G2:.*]] = nn.expand %[[G1]] : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK: %[[YY:.*]] = nn.mul %[[Y]], %[[Y]]
// CHECK: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[D:.*]] = nn.sub %[[ONE]], %[[YY]]
// CHECK: %[[G3:.*]] = nn.mul %[[G2]], %[[D]]
// CHECK: %[[G4:.*]] = nn.mul %[[G3]], %[[F]]
// CHECK: %[[SB:.*]] = nn.reduce_sum %[[G4]] {axes = array<i64: 0>, keepdims = true} : tensor<2x3xf32> -> tensor<1x3xf32>
// CHECK: %[[DB:.*]] = nn.reshape %[[SB]] : tensor<1x3xf32> -> tensor<3xf32>
// CHECK: %[[XT:.*]] = nn.transpose %[[X]] {perm = array<i64: 1, 0>}
// CHECK: %[[DW:.*]] = nn.matmul %[[XT]], %[[G4]]
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @forward(%w: tensor<4x3xf32> {nn.param = "w"}, %b: tensor<3xf32> {nn.param = "b"},
                   %m: tensor<3xf32> {nn.param = "unused"},
                   %f: tensor<3xf32> {nn.param = "f", nn.frozen},
                   %x: tensor<2x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %1 = nn.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = nn.mul %1, %f : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = nn.tanh %2 : tensor<2x3xf32>
  %4 = nn.reduce_mean %3 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %4 : tensor<f32>
}

// -----

// A [B, T, C] x [C, N] Linear layer: the weight gradient is one GEMM over
// the folded rows; a value used twice sums its gradients; integer inputs
// (token ids) get none.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<10x4xf32> {nn.grad = "emb"}, tensor<4x5xf32> {nn.grad = "w"})
// CHECK: %[[DX:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[DW:.*]] = nn.gemm %{{.*}}, %{{.*}} {trans_a = true} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK: %[[SUM:.*]] = nn.add %[[DX]], %[[DX]]
// CHECK: %[[DE:.*]] = nn.gather_grad %{{.*}}, %[[SUM]] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
// CHECK: return %{{.*}}, %[[DE]], %[[DW]]
func.func @forward(%e: tensor<10x4xf32> {nn.param = "emb"}, %w: tensor<4x5xf32> {nn.param = "w"},
                   %ids: tensor<2x3xi64> {nn.input = "ids"}, %t: tensor<2x3xi64> {nn.input = "t"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.gather %e, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = nn.add %0, %0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = nn.matmul %1, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %3 = nn.reshape %2 : tensor<2x3x5xf32> -> tensor<6x5xf32>
  %4 = nn.reshape %t : tensor<2x3xi64> -> tensor<6xi64>
  %5 = nn.softmax_cross_entropy %3, %4 reduction(mean) {ignore_index = -100 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----

// A gather marked nn.padding_idx (plan padding_idx): the lookups of that row
// add nothing to the table's gradient (the incoming gradient is zeroed where
// the id is the row), as nn.Embedding(padding_idx=...).

// CHECK-LABEL: func.func @train_step
// CHECK: %[[ROW:.*]] = nn.constant dense<1> : tensor<i64>
// CHECK: %[[KEEP:.*]] = nn.compare ne, %{{.*}}, %[[ROW]] : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi1>
// CHECK: %[[KEEP3:.*]] = nn.reshape %[[KEEP]] : tensor<2x3xi1> -> tensor<2x3x1xi1>
// CHECK: %[[G:.*]] = nn.where %[[KEEP3]], %{{.*}}, %{{.*}} : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// CHECK: nn.gather_grad %{{.*}}, %[[G]] {axis = 0 : i64}
func.func @forward(%e: tensor<10x4xf32> {nn.param = "emb"},
                   %ids: tensor<2x3xi64> {nn.input = "ids"}, %t: tensor<2x3xi64> {nn.input = "t"})
    -> (tensor<f32> {nn.output = "loss"}) {
  %0 = nn.gather %e, %ids {axis = 0 : i64, nn.padding_idx = 1 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = nn.reshape %0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = nn.reshape %t : tensor<2x3xi64> -> tensor<6xi64>
  %3 = nn.softmax_cross_entropy %1, %2 reduction(mean) : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// expected-error @+1 {{has no scalar floating-point result to use as the loss}}
func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{has several scalar floating-point results; name the loss}}
func.func @forward(%w: tensor<f32> {nn.param = "w"}) -> (tensor<f32>, tensor<f32>) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<f32> {
  // expected-error @+1 {{'nn.fused' op has no gradient rule, but lies between a trainable parameter and the loss}}
  %0 = nn.fused (%w) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = nn.exp %a : tensor<4xf32>
    nn.yield %1 : tensor<4xf32>
  }
  %2 = nn.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// expected-error @+1 {{no function @forward to differentiate}}
module {
  func.func @model() {
    return
  }
}
