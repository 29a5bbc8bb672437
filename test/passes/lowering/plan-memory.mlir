// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-plan-memory))' --split-input-file | FileCheck %s

// %0 dies at %1, so %2 reuses its bytes; %1 lives to the end (returned).
// Views (reshape) and folded transposes get -1 and extend their base's
// lifetime; constants and arguments take no arena space.

// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {nn.arena_bytes = 128 : i64}
// CHECK: nn.exp %{{.*}} {nn.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {nn.offsets = array<i64: 64>}
// CHECK: nn.reshape %{{.*}} {nn.offsets = array<i64: -1>}
// CHECK: nn.sqrt %{{.*}} {nn.offsets = array<i64: 0>}
func.func @chain(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<4x4xf32>) {
  %0 = nn.exp %x : tensor<16xf32>
  %1 = nn.tanh %0 : tensor<16xf32>
  %r = nn.reshape %1 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = nn.sqrt %x : tensor<16xf32>
  return %2, %r : tensor<16xf32>, tensor<4x4xf32>
}

// -----

// A view keeps its base alive: %0 is read through %v by the last op, so %1
// cannot take its bytes.

// CHECK-LABEL: func.func @view_lifetime
// CHECK-SAME: attributes {nn.arena_bytes = 192 : i64}
// CHECK: nn.exp %{{.*}} {nn.offsets = array<i64: 0>}
// CHECK: nn.reshape %{{.*}} {nn.offsets = array<i64: -1>}
// CHECK: nn.tanh %{{.*}} {nn.offsets = array<i64: 64>}
// CHECK: nn.matmul %{{.*}}, %{{.*}} {nn.offsets = array<i64: 128>}
func.func @view_lifetime(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %0 = nn.exp %x : tensor<16xf32>
  %v = nn.reshape %0 : tensor<16xf32> -> tensor<4x4xf32>
  %1 = nn.tanh %x : tensor<16xf32>
  %w = nn.reshape %1 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = nn.matmul %v, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// A transpose of the last two dims read only by a matmul is folded into it
// (no storage); one read by anything else is materialized.

// CHECK-LABEL: func.func @transposes
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 1, 0>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: {{[0-9]+}}>, perm = array<i64: 1, 0>}
func.func @transposes(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8x4xf32>) {
  %t = nn.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %0 = nn.matmul %t, %b : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %u = nn.transpose %b {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0, %u : tensor<8x8xf32>, tensor<8x4xf32>
}

// -----

// A declaration has nothing to plan.
// CHECK-LABEL: func.func private @external
// CHECK-NOT: nn.arena_bytes
func.func private @external(tensor<4xf32>) -> tensor<4xf32>

// -----

// Attention's head permutes keep the last (contiguous) input dim as a
// matrix dim, so the matmul reads them through strides; a permute that
// moves the last dim into the batch dims is materialized.

// CHECK-LABEL: func.func @head_permutes
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 0, 2, 1, 3>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 0, 2, 3, 1>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: {{[0-9]+}}>, perm = array<i64: 0, 3, 1, 2>}
func.func @head_permutes(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x16x8x4xf32>) {
  %qt = nn.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 3, 1>} : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %s = nn.matmul %qt, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m = nn.transpose %q {perm = array<i64: 0, 3, 1, 2>} : tensor<2x8x4x16xf32> -> tensor<2x16x8x4xf32>
  %r = nn.matmul %m, %w : (tensor<2x16x8x4xf32>, tensor<4x4xf32>) -> tensor<2x16x8x4xf32>
  return %s, %r : tensor<2x4x8x8xf32>, tensor<2x16x8x4xf32>
}
