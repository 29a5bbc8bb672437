// RUN: autopar-opt %s --autopar-dist-lower-collectives --split-input-file | FileCheck %s

// A collective on dim 1 behind a batch dim of 2 moves strided blocks: it
// becomes transpose, the collective on dim 0, transpose back. Dim 2 of a
// rank-3 tensor needs a permutation that is not its own inverse.

// CHECK-LABEL: func.func @strided
// CHECK: %[[T:.*]] = nn.transpose %arg0 {perm = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK: %[[G:.*]] = dist.all_gather %[[T]] on @mesh axes = [tp] dim = 0 : tensor<4x2x8xf32> -> tensor<8x2x8xf32>
// CHECK: %[[B:.*]] = nn.transpose %[[G]] {perm = array<i64: 1, 0, 2>} : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
// CHECK: %[[U:.*]] = nn.transpose %arg1 {perm = array<i64: 2, 0, 1>} : tensor<2x3x8xf32> -> tensor<8x2x3xf32>
// CHECK: %[[R:.*]] = dist.reduce_scatter sum %[[U]] on @mesh axes = [tp] dim = 0 : tensor<8x2x3xf32> -> tensor<4x2x3xf32>
// CHECK: %[[V:.*]] = nn.transpose %[[R]] {perm = array<i64: 1, 2, 0>} : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
// CHECK: return %[[B]], %[[V]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @strided(%a: tensor<2x4x8xf32>, %b: tensor<2x3x8xf32>)
      -> (tensor<2x8x8xf32>, tensor<2x3x4xf32>) {
    %0 = dist.all_gather %a on @mesh axes = [tp] dim = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
    %1 = dist.reduce_scatter sum %b on @mesh axes = [tp] dim = 2 : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
    return %0, %1 : tensor<2x8x8xf32>, tensor<2x3x4xf32>
  }
}

// -----

// Contiguous blocks stay: dim 0, or a dim behind dims of size 1 only.

// CHECK-LABEL: func.func @contiguous
// CHECK-NOT: nn.transpose
// CHECK: dist.all_gather %arg0 on @mesh axes = [tp] dim = 0
// CHECK: dist.reduce_scatter sum %arg1 on @mesh axes = [tp] dim = 1
// CHECK-NOT: nn.transpose
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @contiguous(%a: tensor<4x8xf32>, %b: tensor<1x8x3xf32>)
      -> (tensor<8x8xf32>, tensor<1x4x3xf32>) {
    %0 = dist.all_gather %a on @mesh axes = [tp] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
    %1 = dist.reduce_scatter sum %b on @mesh axes = [tp] dim = 1 : tensor<1x8x3xf32> -> tensor<1x4x3xf32>
    return %0, %1 : tensor<8x8xf32>, tensor<1x4x3xf32>
  }
}
