// RUN: autopar-opt %s --autopar-dist-zigzag --split-input-file --verify-diagnostics | FileCheck %s

// cp = 2: 4 chunks, rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2. A
// split permutes the natural chunks into rank order (0, 3, 1, 2) first, a
// reduce-scatter too; a gather's rank-order result is permuted back
// (natural chunk c from position 0, 2, 3, 1). A collective over tp alone
// is left alone.

// CHECK-LABEL: func.func @cp2
// CHECK-DAG: %[[S0:.*]] = nn.slice %arg0 {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<2x8xi64> -> tensor<2x2xi64>
// CHECK-DAG: %[[S3:.*]] = nn.slice %arg0 {offsets = array<i64: 0, 6>, strides = array<i64: 1, 1>} : tensor<2x8xi64> -> tensor<2x2xi64>
// CHECK-DAG: %[[S1:.*]] = nn.slice %arg0 {offsets = array<i64: 0, 2>, strides = array<i64: 1, 1>} : tensor<2x8xi64> -> tensor<2x2xi64>
// CHECK-DAG: %[[S2:.*]] = nn.slice %arg0 {offsets = array<i64: 0, 4>, strides = array<i64: 1, 1>} : tensor<2x8xi64> -> tensor<2x2xi64>
// CHECK: %[[P:.*]] = nn.concat %[[S0]], %[[S3]], %[[S1]], %[[S2]] {axis = 1 : i64}
// CHECK: %[[SPLIT:.*]] = dist.tensor_split %[[P]] on @mesh axes = [cp] dim = 1 : tensor<2x8xi64> -> tensor<2x4xi64>
// CHECK: %[[G:.*]] = dist.all_gather %arg1 on @mesh axes = [cp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK-DAG: %[[G0:.*]] = nn.slice %[[G]] {offsets = array<i64: 0, 0>, {{.*}}} : tensor<8x3xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[G1:.*]] = nn.slice %[[G]] {offsets = array<i64: 4, 0>, {{.*}}} : tensor<8x3xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[G2:.*]] = nn.slice %[[G]] {offsets = array<i64: 6, 0>, {{.*}}} : tensor<8x3xf32> -> tensor<2x3xf32>
// CHECK-DAG: %[[G3:.*]] = nn.slice %[[G]] {offsets = array<i64: 2, 0>, {{.*}}} : tensor<8x3xf32> -> tensor<2x3xf32>
// CHECK: %[[N:.*]] = nn.concat %[[G0]], %[[G1]], %[[G2]], %[[G3]] {axis = 0 : i64}
// CHECK: %[[R:.*]] = nn.concat {{.*}} {axis = 0 : i64} : {{.*}} -> tensor<8x3xf32>
// CHECK: dist.reduce_scatter sum %[[R]] on @mesh axes = [cp] dim = 0
// CHECK: %[[T:.*]] = dist.all_gather %arg3 on @mesh axes = [tp] dim = 0
// CHECK: return %[[SPLIT]], %[[N]], %{{.*}}, %[[T]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 2]
  func.func @cp2(%x: tensor<2x8xi64>, %k: tensor<4x3xf32>, %dk: tensor<8x3xf32>, %t: tensor<4x3xf32>)
      -> (tensor<2x4xi64>, tensor<8x3xf32>, tensor<4x3xf32>, tensor<8x3xf32>) {
    %0 = dist.tensor_split %x on @mesh axes = [cp] dim = 1 : tensor<2x8xi64> -> tensor<2x4xi64>
    %1 = dist.all_gather %k on @mesh axes = [cp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
    %2 = dist.reduce_scatter sum %dk on @mesh axes = [cp] dim = 0 : tensor<8x3xf32> -> tensor<4x3xf32>
    %3 = dist.all_gather %t on @mesh axes = [tp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
    return %0, %1, %2, %3 : tensor<2x4xi64>, tensor<8x3xf32>, tensor<4x3xf32>, tensor<8x3xf32>
  }
}

// -----

// Axes before cp (a flattened [B * T] of one sample per dp rank) repeat
// the zig-zag in each of their blocks: dp = 2, cp = 2 over 16 rows, chunks
// of 2: rank order 0, 3, 1, 2 and 4, 7, 5, 6. Axes after cp (tp) split a
// rank's two chunks: the permutation is the same as over cp alone.

// CHECK-LABEL: func.func @merged
// CHECK: nn.slice %arg0 {offsets = array<i64: 0>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 6>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 2>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 4>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 8>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 14>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 10>
// CHECK-NEXT: nn.slice %arg0 {offsets = array<i64: 12>
// CHECK-NEXT: nn.concat
// CHECK: dist.tensor_split %{{.*}} on @mesh axes = [dp, cp] dim = 0 : tensor<16xf32> -> tensor<4xf32>
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, cp = 2, tp = 1]
  func.func @merged(%x: tensor<16xf32>) -> tensor<4xf32> {
    %0 = dist.tensor_split %x on @mesh axes = [dp, cp] dim = 0 : tensor<16xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @odd(%x: tensor<6xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{'dist.tensor_split' op splits a dim of 6 over cp in zig-zag chunks, which needs a multiple of 4 (context_parallel.load_balance "none" splits contiguously)}}
    %0 = dist.tensor_split %x on @mesh axes = [cp] dim = 0 : tensor<6xf32> -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// An all-to-all over cp (Ulysses) does not say which of its dims is the
// sequence: refused.
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @exchange(%x: tensor<1x2x4x4xf32>) -> tensor<1x1x8x4xf32> {
    // expected-error @+1 {{'dist.all_to_all' op exchanges over cp, which zig-zag chunks cannot deal (context_parallel.mode "ulysses" needs load_balance "none")}}
    %0 = dist.all_to_all %x on @mesh axes = [cp] split_dim = 1 concat_dim = 2 : tensor<1x2x4x4xf32> -> tensor<1x1x8x4xf32>
    return %0 : tensor<1x1x8x4xf32>
  }
}
