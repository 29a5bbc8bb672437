// RUN: autopar-opt %s --autopar-dist-split-fused-projections --split-input-file | FileCheck %s

// GPT-2's attention input: one [4, 12] projection and bias, split into q, k
// and v. Each part gets its own projection; the weight is viewed as
// [4, 3, 4] and the bias as [3, 4] (their logical types stay).

// CHECK-LABEL: func.func @fused_qkv
// CHECK-SAME: %arg1: tensor<4x3x4xf32> {nn.logical_type = tensor<4x12xf32>, nn.param = "w"}
// CHECK-SAME: %arg2: tensor<3x4xf32> {nn.logical_type = tensor<12xf32>, nn.param = "b"}
// CHECK: %[[W:.*]]:3 = nn.split %arg1 {axis = 1 : i64} : (tensor<4x3x4xf32>) -> (tensor<4x1x4xf32>, tensor<4x1x4xf32>, tensor<4x1x4xf32>)
// CHECK: %[[W0:.*]] = nn.reshape %[[W]]#0 : tensor<4x1x4xf32> -> tensor<4x4xf32>
// CHECK: %[[B:.*]]:3 = nn.split %arg2 {axis = 0 : i64} : (tensor<3x4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK: %[[B0:.*]] = nn.reshape %[[B]]#0 : tensor<1x4xf32> -> tensor<4xf32>
// CHECK: %[[Q:.*]] = nn.matmul %arg0, %[[W0]] : (tensor<2x8x4xf32>, tensor<4x4xf32>) -> tensor<2x8x4xf32>
// CHECK: %[[QB:.*]] = nn.add %[[Q]], %[[B0]]
// CHECK: %[[K:.*]] = nn.matmul %arg0, %{{.*}}
// CHECK: %[[V:.*]] = nn.matmul %arg0, %{{.*}}
// CHECK-NOT: nn.split %{{.*}} {axis = 2
// CHECK: return %[[QB]], %{{.*}}, %{{.*}} : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
module {
  func.func @fused_qkv(%x: tensor<2x8x4xf32>,
                       %w: tensor<4x12xf32> {nn.logical_type = tensor<4x12xf32>, nn.param = "w"},
                       %b: tensor<12xf32> {nn.logical_type = tensor<12xf32>, nn.param = "b"})
      -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
    %y = nn.matmul %x, %w : (tensor<2x8x4xf32>, tensor<4x12xf32>) -> tensor<2x8x12xf32>
    %z = nn.add %y, %b : (tensor<2x8x12xf32>, tensor<12xf32>) -> tensor<2x8x12xf32>
    %p:3 = nn.split %z {axis = 2 : i64} : (tensor<2x8x12xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
    return %p#0, %p#1, %p#2 : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  }
}

// -----

// The same projection exported without constant folding: nn.Linear's
// weight [12, 4] transposed at its use. It is viewed as [3, 4, 4] and each
// part transposed; the transpose of the whole goes.

// CHECK-LABEL: func.func @fused_qkv_transposed
// CHECK-SAME: %arg1: tensor<3x4x4xf32> {nn.logical_type = tensor<12x4xf32>, nn.param = "w"}
// CHECK: %[[W:.*]]:3 = nn.split %arg1 {axis = 0 : i64} : (tensor<3x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
// CHECK: %[[W0:.*]] = nn.reshape %[[W]]#0 : tensor<1x4x4xf32> -> tensor<4x4xf32>
// CHECK: %[[T0:.*]] = nn.transpose %[[W0]] {perm = array<i64: 1, 0>}
// CHECK: %[[Q:.*]] = nn.matmul %arg0, %[[T0]] : (tensor<2x8x4xf32>, tensor<4x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NOT: nn.transpose %arg1
// CHECK: return %[[Q]], %{{.*}}, %{{.*}} : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
module {
  func.func @fused_qkv_transposed(%x: tensor<2x8x4xf32>,
                                  %w: tensor<12x4xf32> {nn.param = "w"})
      -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
    %t = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<12x4xf32> -> tensor<4x12xf32>
    %y = nn.matmul %x, %t : (tensor<2x8x4xf32>, tensor<4x12xf32>) -> tensor<2x8x12xf32>
    %p:3 = nn.split %y {axis = 2 : i64} : (tensor<2x8x12xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
    return %p#0, %p#1, %p#2 : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  }
}

// -----

// Left alone: a weight used twice (tied), and parts of unequal sizes.

// CHECK-LABEL: func.func @not_fused
// CHECK-SAME: %arg1: tensor<4x12xf32>
// CHECK: nn.split %{{.*}} {axis = 1 : i64} : (tensor<8x12xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK: nn.split %{{.*}} {axis = 1 : i64} : (tensor<8x12xf32>) -> (tensor<8x4xf32>, tensor<8x8xf32>)
module {
  func.func @not_fused(%x: tensor<8x4xf32>, %w: tensor<4x12xf32> {nn.param = "w"},
                       %v: tensor<4x12xf32> {nn.param = "v"})
      -> (tensor<8x4xf32>, tensor<4x12xf32>, tensor<8x8xf32>) {
    %y = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x12xf32>) -> tensor<8x12xf32>
    %p:3 = nn.split %y {axis = 1 : i64} : (tensor<8x12xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
    %u = nn.matmul %x, %v : (tensor<8x4xf32>, tensor<4x12xf32>) -> tensor<8x12xf32>
    %q:2 = nn.split %u {axis = 1 : i64} : (tensor<8x12xf32>) -> (tensor<8x4xf32>, tensor<8x8xf32>)
    return %p#0, %w, %q#1 : tensor<8x4xf32>, tensor<4x12xf32>, tensor<8x8xf32>
  }
}

// -----

// A LoRA update beside the fused projection (autopar-lora) is split with
// it: B [12, 2] viewed as [3, 4, 2], each part's slice transposed; h = x
// A^T computed once and shared.

// CHECK-LABEL: func.func @fused_qkv_lora
// CHECK-SAME: %arg3: tensor<3x4x2xf32> {nn.logical_type = tensor<12x2xf32>, nn.lora_b = "w", nn.param = "lb"}
// CHECK: %[[H:.*]] = nn.matmul %arg0, %{{.*}} {nn.lora} : (tensor<2x8x4xf32>, tensor<4x2xf32>) -> tensor<2x8x2xf32>
// CHECK: %[[S:.*]] = nn.constant {nn.lora} dense<2.000000e+00>
// CHECK: %[[LB:.*]]:3 = nn.split %arg3 {axis = 0 : i64} : (tensor<3x4x2xf32>) -> (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>)
// CHECK: %[[LB0:.*]] = nn.reshape %[[LB]]#0 : tensor<1x4x2xf32> -> tensor<4x2xf32>
// CHECK: %[[LB0T:.*]] = nn.transpose %[[LB0]] {perm = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK: %[[Q:.*]] = nn.matmul %arg0, %{{.*}} : (tensor<2x8x4xf32>, tensor<4x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[QU:.*]] = nn.matmul %[[H]], %[[LB0T]] {nn.lora} : (tensor<2x8x2xf32>, tensor<2x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[QS:.*]] = nn.mul %[[QU]], %[[S]] {nn.lora}
// CHECK-NEXT: %[[QL:.*]] = nn.add %[[Q]], %[[QS]] {nn.lora}
// CHECK-NEXT: %[[QB:.*]] = nn.add %[[QL]], %{{.*}} : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
// CHECK: return %[[QB]],
func.func @fused_qkv_lora(%x: tensor<2x8x4xf32>,
    %w: tensor<12x4xf32> {nn.param = "w", nn.frozen},
    %a: tensor<2x4xf32> {nn.param = "a", nn.lora_a = "w"},
    %lb: tensor<12x2xf32> {nn.param = "lb", nn.lora_b = "w", nn.logical_type = tensor<12x2xf32>},
    %b: tensor<12xf32> {nn.param = "b"})
    -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<12x4xf32> -> tensor<4x12xf32>
  %y = nn.matmul %x, %wt : (tensor<2x8x4xf32>, tensor<4x12xf32>) -> tensor<2x8x12xf32>
  %at = nn.transpose %a {nn.lora, perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %h = nn.matmul %x, %at {nn.lora} : (tensor<2x8x4xf32>, tensor<4x2xf32>) -> tensor<2x8x2xf32>
  %bt = nn.transpose %lb {nn.lora, perm = array<i64: 1, 0>} : tensor<12x2xf32> -> tensor<2x12xf32>
  %d = nn.matmul %h, %bt {nn.lora} : (tensor<2x8x2xf32>, tensor<2x12xf32>) -> tensor<2x8x12xf32>
  %s = nn.constant {nn.lora} dense<2.000000e+00> : tensor<f32>
  %u = nn.mul %d, %s {nn.lora} : (tensor<2x8x12xf32>, tensor<f32>) -> tensor<2x8x12xf32>
  %z = nn.add %y, %u {nn.lora} : (tensor<2x8x12xf32>, tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %zb = nn.add %z, %b : (tensor<2x8x12xf32>, tensor<12xf32>) -> tensor<2x8x12xf32>
  %p:3 = nn.split %zb {axis = 2 : i64} : (tensor<2x8x12xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %p#0, %p#1, %p#2 : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
}
