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

// -----

// Ulysses' all-to-all (heads split, sequence gathered) as MPI's on dim 0:
// the head dim cut into [2, 2] with the 2 blocks in front, exchanged, the
// senders' dim moved in front of the sequence and merged into it. Its
// inverse (sequence split, heads gathered) the same way. MPI's own form
// (split and concatenated dim 0) stays; on a dim behind others it is
// lowered too.

// CHECK-LABEL: func.func @all_to_all
// CHECK: %[[R:.*]] = nn.reshape %arg0 : tensor<2x4x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[T:.*]] = nn.transpose %[[R]] {perm = array<i64: 1, 0, 2, 3, 4>} : tensor<2x2x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[A:.*]] = dist.all_to_all %[[T]] on @mesh axes = [cp] split_dim = 0 concat_dim = 0 : tensor<2x2x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[B:.*]] = nn.transpose %[[A]] {perm = array<i64: 1, 2, 0, 3, 4>} : tensor<2x2x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[M:.*]] = nn.reshape %[[B]] : tensor<2x2x2x8x16xf32> -> tensor<2x2x16x16xf32>
// CHECK: %[[R2:.*]] = nn.reshape %[[M]] : tensor<2x2x16x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[T2:.*]] = nn.transpose %[[R2]] {perm = array<i64: 2, 0, 1, 3, 4>} : tensor<2x2x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[A2:.*]] = dist.all_to_all %[[T2]] on @mesh axes = [cp] split_dim = 0 concat_dim = 0
// CHECK: %[[B2:.*]] = nn.transpose %[[A2]] {perm = array<i64: 1, 0, 2, 3, 4>} : tensor<2x2x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
// CHECK: %[[M2:.*]] = nn.reshape %[[B2]] : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: %[[F:.*]] = dist.all_to_all %arg1 on @mesh axes = [cp] split_dim = 0 concat_dim = 0 : tensor<4x3xf32> -> tensor<4x3xf32>
// CHECK: %[[R3:.*]] = nn.reshape %arg2 : tensor<3x4xf32> -> tensor<3x2x2xf32>
// CHECK: %[[T3:.*]] = nn.transpose %[[R3]] {perm = array<i64: 1, 0, 2>} : tensor<3x2x2xf32> -> tensor<2x3x2xf32>
// CHECK: %[[A3:.*]] = dist.all_to_all %[[T3]] on @mesh axes = [cp] split_dim = 0 concat_dim = 0
// CHECK: %[[B3:.*]] = nn.transpose %[[A3]] {perm = array<i64: 1, 0, 2>} : tensor<2x3x2xf32> -> tensor<3x2x2xf32>
// CHECK: %[[M3:.*]] = nn.reshape %[[B3]] : tensor<3x2x2xf32> -> tensor<3x4xf32>
// CHECK: return %[[M2]], %[[F]], %[[M3]]
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @all_to_all(%q: tensor<2x4x8x16xf32>, %flat: tensor<4x3xf32>,
                        %behind: tensor<3x4xf32>)
      -> (tensor<2x4x8x16xf32>, tensor<4x3xf32>, tensor<3x4xf32>) {
    %0 = dist.all_to_all %q on @mesh axes = [cp] split_dim = 1 concat_dim = 2 : tensor<2x4x8x16xf32> -> tensor<2x2x16x16xf32>
    %1 = dist.all_to_all %0 on @mesh axes = [cp] split_dim = 2 concat_dim = 1 : tensor<2x2x16x16xf32> -> tensor<2x4x8x16xf32>
    %2 = dist.all_to_all %flat on @mesh axes = [cp] split_dim = 0 concat_dim = 0 : tensor<4x3xf32> -> tensor<4x3xf32>
    %3 = dist.all_to_all %behind on @mesh axes = [cp] split_dim = 1 concat_dim = 1 : tensor<3x4xf32> -> tensor<3x4xf32>
    return %1, %2, %3 : tensor<2x4x8x16xf32>, tensor<4x3xf32>, tensor<3x4xf32>
  }
}
