// RUN: autopar-opt %s --autopar-print-sharding-rules -o /dev/null | FileCheck %s

// Every nn op's rule through ShardingRuleOpInterface, in Shardy's notation:
// factors i, j, k, ... with the sizes of the dims they index; `1` for a
// broadcast dim; need_replication: factors that must stay whole;
// reduction / mean: split factors a result does not index leave a pending
// sum / mean; mean_scaled: the loss gradient's 1/N; linear: the operands a
// pending sum passes through. Ops without a rule (another dialect's, or an
// nn op with none) print none: propagation keeps them whole.

// CHECK-LABEL: func @rules
// CHECK-NEXT: nn.matmul: ([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k} linear=one_of(0, 1)
// CHECK-NEXT: nn.gemm: ([k, i], [k, j])->([i, j]) {i=4, j=16, k=8} reduction={k} linear=one_of(0, 1)
// CHECK-NEXT: nn.add: ([i, j], [j])->([i, j]) {i=8, j=16} linear=all_of(0, 1)
// CHECK-NEXT: nn.reshape: ([i, k])->([i, j, k]) {i=8/2, j=4, k=16} need_replication={j} linear=one_of(0)
// CHECK-NEXT: nn.transpose: ([i, j, k])->([i, k, j]) {i=2, j=4, k=16} linear=one_of(0)
// CHECK-NEXT: nn.reduce_sum: ([i, j])->([i, 1]) {i=8, j=16} reduction={j} linear=one_of(0)
// CHECK-NEXT: nn.reduce_mean: ([i, j])->([]) {i=8, j=16} mean={i, j} linear=one_of(0)
// CHECK-NEXT: nn.reduce_max: ([i, j])->([i]) {i=8, j=16} need_replication={j}
// CHECK-NEXT: nn.softmax: ([i, j])->([i, j]) {i=8, j=16} need_replication={j}
// CHECK-NEXT: nn.layer_norm: ([i, j, k], [k], [k])->([i, j, k]) {i=2, j=8, k=16} need_replication={k}
// CHECK-NEXT: nn.gather: ([i, j], [k, l])->([k, l, j]) {i=10, j=4, k=2, l=3} reduction={i}
// CHECK-NEXT: nn.gather_grad: ([k, l], [k, l, j])->([i, j]) {i=10, j=4, k=2, l=3} reduction={k, l} placeable={i} linear=one_of(1)
// CHECK-NEXT: nn.softmax_cross_entropy: ([i, j], [i])->([]) {i=8, j=16} mean={i} within={j}
// CHECK-NEXT: nn.softmax_cross_entropy_grad: ([i, j], [i], [])->([i, j]) {i=8, j=16} mean_scaled={i}
// CHECK-NEXT: nn.attention: ([i, j, k, m], [i, j, l, m], [i, j, l, m])->([i, j, k, m], [i, j, k]) {i=2, j=4, k=16, l=16, m=8} need_replication={k, l, m}
// CHECK-NEXT: nn.attention: ([i, j, k, l], [i, j, k, l], [i, j, k, l])->([i, j, k, l], [i, j, k]) {i=2, j=4, k=16, l=8} need_replication={l}
// CHECK-NEXT: nn.constant: ()->([]) {}
// CHECK-NEXT: dist.all_reduce: none
// CHECK-NEXT: func.return: none
dist.mesh @m axes = [dp = 2]
func.func @rules(%w: tensor<4x16xf32>, %x: tensor<8x4xf32>, %b: tensor<16xf32>,
                 %t: tensor<8xi64>, %y: tensor<2x8x16xf32>, %e: tensor<10x4xf32>,
                 %ids: tensor<2x3xi64>, %q: tensor<2x4x16x8xf32>) -> tensor<f32> {
  %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %1 = nn.gemm %x, %0 {trans_a = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %2 = nn.add %0, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %3 = nn.reshape %2 : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %4 = nn.transpose %3 {perm = array<i64: 0, 2, 1>} : tensor<2x4x16xf32> -> tensor<2x16x4xf32>
  %5 = nn.reduce_sum %2 {axes = array<i64: 1>, keepdims = true} : tensor<8x16xf32> -> tensor<8x1xf32>
  %6 = nn.reduce_mean %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x16xf32> -> tensor<f32>
  %7 = nn.reduce_max %2 {axes = array<i64: 1>, keepdims = false} : tensor<8x16xf32> -> tensor<8xf32>
  %8 = nn.softmax %2 {axis = 1 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>
  %9 = nn.layer_norm %y, %b, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %10 = nn.gather %e, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %g = nn.gather_grad %ids, %10 {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  %11 = nn.softmax_cross_entropy %2, %t reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %12 = nn.softmax_cross_entropy_grad %2, %t, %11 reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  %o, %lse = nn.attention %q, %q, %q {causal = true, scale = 1.250000e-01 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  // Ulysses: the keys' rows are the queries' (split with them; exchanged
  // for the heads around the op).
  %uo, %ul = nn.attention %q, %q, %q {causal = true, scale = 1.250000e-01 : f64, dist.context_parallel = "ulysses"} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %c = nn.constant dense<1.0> : tensor<f32>
  %r = dist.all_reduce sum %c on @m axes = [dp] : tensor<f32>
  return %11 : tensor<f32>
}
