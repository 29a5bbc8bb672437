// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-elementwise))' --split-input-file | FileCheck %s

// Bias add + exact GELU: one fused op; the splat constants are copied into
// the body, the broadcast bias stays an operand.

// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = nn.fused (%[[X]], %[[B]]) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> {
// CHECK: ^bb0(%[[A0:.*]]: tensor<2x8xf32>, %[[A1:.*]]: tensor<8xf32>):
// CHECK-DAG: nn.constant dense<1.41421354> : tensor<f32>
// CHECK-DAG: nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG: nn.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[S:.*]] = nn.add %[[A0]], %[[A1]]
// CHECK: nn.div %[[S]]
// CHECK: nn.erf
// CHECK: nn.add
// CHECK: nn.mul %[[S]]
// CHECK: %[[OUT:.*]] = nn.mul
// CHECK: nn.yield %[[OUT]] : tensor<2x8xf32>
// CHECK-NOT: nn.fused
// CHECK: return %[[R]]
func.func @bias_gelu(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = nn.add %x, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = nn.constant dense<1.41421354> : tensor<f32>
  %2 = nn.div %0, %1 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = nn.erf %2 : tensor<2x8xf32>
  %4 = nn.constant dense<1.0> : tensor<f32>
  %5 = nn.add %3, %4 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %6 = nn.mul %0, %5 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %7 = nn.constant dense<0.5> : tensor<f32>
  %8 = nn.mul %6, %7 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %8 : tensor<2x8xf32>
}

// -----

// A value used outside the chain (%0, also returned) is not absorbed, so it
// is computed once; a producer of another shape (%s) is not fused either;
// non-elementwise ops stay as they are.

// CHECK-LABEL: func.func @boundaries
// CHECK: %[[E:.*]] = nn.fused (%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: nn.exp
// CHECK: %[[SUM:.*]] = nn.reduce_sum %[[E]]
// CHECK: %[[S:.*]] = nn.fused (%[[SUM]]) : (tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK: nn.reciprocal
// CHECK: %[[P:.*]] = nn.fused (%[[E]], %[[S]]) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK: nn.mul
// CHECK: return %[[P]], %[[E]]
func.func @boundaries(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = nn.exp %x : tensor<4x8xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = nn.reciprocal %1 : tensor<4x1xf32>
  %2 = nn.mul %0, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %2, %0 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Non-splat constants are operands; compare, where and cast fuse.

// CHECK-LABEL: func.func @mask
// CHECK: %[[M:.*]] = nn.constant dense<[true, false]> : tensor<2xi1>
// CHECK: nn.fused (%[[M]], %{{.*}}) : (tensor<2xi1>, tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK: nn.where
// CHECK: nn.compare
// CHECK: nn.cast
func.func @mask(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %m = nn.constant dense<[true, false]> : tensor<2xi1>
  %inf = nn.constant dense<0xFF800000> : tensor<f32>
  %0 = nn.where %m, %inf, %x : (tensor<2xi1>, tensor<f32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %z = nn.constant dense<0.0> : tensor<f32>
  %1 = nn.compare gt, %0, %z : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xi1>
  %2 = nn.cast %1 : tensor<3x2xi1> to tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}

// -----

// Multi-output fusion: %0 is read after the chain (as a backward pass reads
// forward values), so the one fused op also yields it. The later fused op
// recomputes %1 = erf(%0) from %0, which it reads anyway, so %1 is not
// yielded; %0 itself would need %x, another full-size tensor, so it is not
// recomputed.

// CHECK-LABEL: func.func @saved_values
// CHECK: %[[F:.*]]:2 = nn.fused (%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: %[[A:.*]] = nn.add
// CHECK: %[[E:.*]] = nn.erf %[[A]]
// CHECK: %[[M:.*]] = nn.mul %[[A]], %[[E]]
// CHECK: nn.yield %[[M]], %[[A]]
// CHECK: %[[G:.*]] = nn.matmul %[[F]]#0, %{{.*}}
// CHECK: nn.fused (%[[F]]#1, %[[G]])
// CHECK: ^bb0(%[[S:.*]]: tensor<4x8xf32>, %[[D:.*]]: tensor<4x8xf32>):
// CHECK: %[[R:.*]] = nn.erf %[[S]]
// CHECK: %[[P:.*]] = nn.mul %[[D]], %[[S]]
// CHECK: nn.mul %[[P]], %[[R]]
func.func @saved_values(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = nn.erf %0 : tensor<4x8xf32>
  %2 = nn.mul %0, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = nn.matmul %2, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %4 = nn.mul %3, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = nn.mul %4, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %5 : tensor<4x8xf32>
}

// -----

// Recomputing %e would need %y, a full-size tensor the later fused op does
// not read: %e is yielded and read, not recomputed.

// CHECK-LABEL: func.func @no_new_reads
// CHECK: %[[F:.*]]:2 = nn.fused
// CHECK: nn.yield
// CHECK: %[[G:.*]] = nn.matmul %[[F]]#0
// CHECK: nn.fused (%[[G]], %[[F]]#1)
// CHECK-NOT: nn.exp
// CHECK: return
func.func @no_new_reads(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = nn.exp %0 : tensor<4x8xf32>
  %1 = nn.mul %e, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = nn.matmul %1, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %3 = nn.mul %2, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
