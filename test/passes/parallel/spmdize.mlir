// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s

// Data parallelism: the batch dim of every activation halves; the
// mean-reduced loss is a local mean, scaled by 1/2 to be this rank's term
// of the global mean, then all-reduced to the replicated result its return
// wants; the gradient of the loss (its 1/N uses the local N) is scaled the
// same way, and the weight gradient (a contraction over the batch) is
// all-reduced.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>
// CHECK-SAME: %arg2: tensor<4xi64>
// CHECK-SAME: -> (tensor<f32> {{.*}}, tensor<16x16xf32>
// CHECK: %[[S:.*]] = nn.matmul %arg1, %arg0 : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[L:.*]] = nn.softmax_cross_entropy %[[S]], %arg2 reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: %[[H:.*]] = nn.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[LS:.*]] = nn.mul %[[L]], %[[H]]
// CHECK: %[[G:.*]] = nn.softmax_cross_entropy_grad %[[S]], %arg2, %{{.*}} reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
// CHECK: %[[GS:.*]] = nn.mul %[[G]], %{{.*}} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK: %[[W:.*]] = nn.gemm %arg1, %[[GS]] {trans_a = true} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// CHECK: %[[LR:.*]] = dist.all_reduce sum %[[LS]] on @mesh axes = [dp] : tensor<f32>
// CHECK: %[[WR:.*]] = dist.all_reduce sum %[[W]] on @mesh axes = [dp] : tensor<16x16xf32>
// CHECK: return %[[LR]], %[[WR]]
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @train_step(
      %w: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.param = "w"},
      %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "x"},
      %t: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [[dp]]>, nn.input = "t"})
      -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"},
          tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "w"}) {
    %s = nn.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
    %one = nn.constant dense<1.0> : tensor<f32>
    %g = nn.softmax_cross_entropy_grad %s, %t, %one reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
    %gw = nn.gemm %x, %g {trans_a = true} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
    return %l, %gw : tensor<f32>, tensor<16x16xf32>
  }
}

// -----

// Resharding: a pending sum feeding a non-linear op is all-reduced first; a
// whole constant meeting a split operand of a softmax over another dim is
// split locally (no communication); a split value that must be whole (the
// softmax axis, the replicated result) is all-gathered; a whole value
// wanted as a pending sum is divided among the ranks.

// CHECK-LABEL: func.func @reshard
// CHECK: %[[P:.*]] = nn.gemm
// CHECK: %[[R:.*]] = dist.all_reduce sum %[[P]] on @mesh axes = [dp] : tensor<4x4xf32>
// CHECK: nn.exp %[[R]] : tensor<4x4xf32>
// CHECK: %[[C:.*]] = dist.tensor_split %{{.*}} on @mesh axes = [dp] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: nn.add %arg0, %[[C]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[A:.*]] = dist.all_gather %arg0 on @mesh axes = [dp] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK: nn.softmax %[[A]] {axis = 0 : i64} : tensor<8x4xf32>
// CHECK: %[[H:.*]] = nn.constant dense<5.000000e-01>
// CHECK: nn.mul %{{.*}}, %[[H]] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @reshard(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>})
      -> (tensor<4x4xf32>, tensor<8x4xf32>,
          tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
          tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>}) {
    %p = nn.gemm %x, %x {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %e = nn.exp %p : tensor<4x4xf32>
    %c = nn.constant dense<2.0> : tensor<8x4xf32>
    %a = nn.add %x, %c : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %s = nn.softmax %x {axis = 0 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
    %w = nn.exp %e : tensor<4x4xf32>
    return %e, %a, %s, %w : tensor<4x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>
  }
}

// -----

// partial -> split is one reduce-scatter (each rank reduces only its block),
// not an all-reduce and a slice; a pending sum over more axes than the split
// takes an all-reduce over the rest.

// CHECK-LABEL: func.func @partial_to_split
// CHECK: %[[P:.*]] = nn.gemm
// CHECK: %[[Q:.*]] = nn.gemm
// CHECK-NEXT: %[[S:.*]] = dist.reduce_scatter sum %[[P]] on @mesh axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[T:.*]] = dist.reduce_scatter sum %[[Q]] on @mesh axes = [tp] dim = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[U:.*]] = dist.all_reduce sum %[[T]] on @mesh axes = [dp] : tensor<2x4xf32>
// CHECK: return %[[S]], %[[U]]
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @partial_to_split(
      %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>},
      %y: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp, tp], []]>})
      -> (tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>},
          tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>}) {
    %p = nn.gemm %x, %x {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %q = nn.gemm %y, %y {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %p, %q : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// dist.shard is the resharding it asks for, keeping its reduction kind: a
// whole value as a pending max is itself; a pending max wanted split is a
// max reduce-scatter. A
// result annotated otherwise than its rule gives (here by hand) is
// resharded right after its op. A shard read only by another shard is
// skipped: only the last layout is made (whole -> split: a local slice).

// CHECK-LABEL: func.func @annotations
// CHECK: %[[I:.*]] = nn.identity %arg0 : tensor<4x4xf32>
// CHECK: %[[S:.*]] = dist.reduce_scatter max %[[I]] on @mesh axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK: %[[E:.*]] = nn.exp %[[S]] : tensor<4x2xf32>
// CHECK: %[[T:.*]] = dist.tensor_split %arg0 on @mesh axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK: %[[L:.*]] = nn.log %[[T]] : tensor<4x2xf32>
// CHECK: %[[G:.*]] = dist.all_gather %[[E]] on @mesh axes = [tp] dim = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK: %[[M:.*]] = dist.all_reduce max %[[I]] on @mesh axes = [tp] : tensor<4x4xf32>
// CHECK: %[[G2:.*]] = dist.all_gather %[[L]]
// CHECK: return %[[G]], %[[M]], %[[G2]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @annotations(%a: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>}) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = dist.shard %a : tensor<4x4xf32> to #dist.sharding<@mesh, [[], []], partial max = [tp]>
    %1 = dist.shard %0 : tensor<4x4xf32> to #dist.sharding<@mesh, [[], [tp]]>
    %2 = nn.exp %1 {dist.shardings = [#dist.sharding<@mesh, [[], []]>]} : tensor<4x4xf32>
    %3 = dist.shard %a : tensor<4x4xf32> to #dist.sharding<@mesh, [[], []], partial max = [tp]>
    %4 = dist.shard %3 : tensor<4x4xf32> to #dist.sharding<@mesh, [[], [tp]]>
    %5 = nn.log %4 {dist.shardings = [#dist.sharding<@mesh, [[], []]>]} : tensor<4x4xf32>
    return %2, %0, %5 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// Axes of size 1 move nothing: a split over dp = 1 wanted whole, or a sum
// pending over it wanted reduced, is no collective.

// CHECK-LABEL: func.func @trivial_axes
// CHECK-NOT: = dist.
// CHECK: return %arg0, %{{.*}} : tensor<4x2xi64>, tensor<2x2xf32>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @trivial_axes(%ids: tensor<4x2xi64> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>},
                          %x: tensor<4x2xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>})
      -> (tensor<4x2xi64> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
          tensor<2x2xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>}) {
    %p = nn.gemm %x, %x {trans_a = true} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    return %ids, %p : tensor<4x2xi64>, tensor<2x2xf32>
  }
}

// -----

// An axis that moves from one dim to another ([[], [tp]] -> [[tp], []], a
// pipeline stage's saved activation split over its features wanted split
// over its tokens) is gathered off the first dim before it splits the
// second: splitting first would gather blocks of different rows.

// CHECK-LABEL: func.func @move_axis
// CHECK: %[[G:.*]] = dist.all_gather %arg0 on @mesh axes = [tp] dim = 1 : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = dist.tensor_split %[[G]] on @mesh axes = [tp] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[S]]
module {
  dist.mesh @mesh axes = [tp = 2]
  func.func @move_axis(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>})
      -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>}) {
    return %x : tensor<8x4xf32>
  }
}
