// RUN: autopar-opt %s --autopar-propagate-sharding --split-input-file | FileCheck %s

// A batch-split input through a linear layer and its weight gradient: the
// matmul keeps the split, the gemm contracting the batch dim leaves a
// pending sum over dp, the bias add broadcasts the replicated bias, the
// reshape [8, 4] -> [2, 4, 4] moves the split to the new major dim, the
// transpose follows it, and reduce_sum over the batch leaves a partial.

// CHECK-LABEL: func.func @linear
// CHECK: nn.matmul {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], []]>]
// CHECK: nn.add {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], []]>]
// CHECK: nn.gemm {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>]
// CHECK: nn.reshape {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [], []]>]
// CHECK: nn.transpose {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], [dp], []]>]
// CHECK: nn.reduce_sum {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>]
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @linear(%w: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
                    %b: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]]>},
                    %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>})
      -> (tensor<4x4xf32>, tensor<4x2x4xf32>, tensor<4xf32>) {
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %1 = nn.add %0, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %2 = nn.gemm %x, %1 {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %3 = nn.reshape %1 : tensor<8x4xf32> -> tensor<2x4x4xf32>
    %4 = nn.transpose %3 {perm = array<i64: 1, 0, 2>} : tensor<2x4x4xf32> -> tensor<4x2x4xf32>
    %5 = nn.reduce_sum %1 {axes = array<i64: 0>, keepdims = false} : tensor<8x4xf32> -> tensor<4xf32>
    return %2, %4, %5 : tensor<4x4xf32>, tensor<4x2x4xf32>, tensor<4xf32>
  }
}

// -----

// Partial sums pass through linear ops only: partial + partial and
// partial * whole stay partial; exp (not linear) and partial + whole need
// the sum first (their results are replicated, the reduction is inserted
// by spmdize). Softmax over the split dim cannot keep the split.

// CHECK-LABEL: func.func @partials
// CHECK: nn.gemm {{.*}}partial = [dp]>]
// CHECK: nn.add %0, %0 {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>]
// CHECK: nn.mul %1, %arg0 {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>]
// CHECK: nn.exp {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []]>]
// CHECK: nn.add %2, %arg0 {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []]>]
// CHECK: nn.softmax {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []]>]
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @partials(%w: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
                      %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>})
      -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
    %0 = nn.gemm %x, %x {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %1 = nn.add %0, %0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %2 = nn.mul %1, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %3 = nn.exp %2 : tensor<4x4xf32>
    %4 = nn.add %2, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %5 = nn.softmax %x {axis = 0 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
    return %3, %4, %5 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
  }
}

// -----

// Backward and forward to a fixpoint from one seed: the first matmul's
// output wanted split over tp on its columns makes the open weight %w1
// column-split (no slicing: the argument is stored split); gelu keeps the
// split; the second matmul contracts the split dim, so the open %w2 is
// wanted row-split and the result is a pending sum over tp (Megatron's
// MLP, found, not matched). The fixed input keeps its dp split; %w1's
// gradient result takes %w1's layout and keeps its pending dp sum.

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %arg0: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>}
// CHECK-SAME: %arg1: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, nn.param = "w1"}
// CHECK-SAME: %arg2: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.param = "w2"}
// CHECK-SAME: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]], partial = [dp]>, nn.grad = "w1"}
// CHECK: nn.matmul %arg0, %arg1 {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [tp]]>]}
// CHECK: nn.gelu {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [tp]]>]
// CHECK: nn.matmul {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], []], partial = [tp]>]
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @mlp(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>},
                 %w1: tensor<4x16xf32> {nn.param = "w1"},
                 %w2: tensor<16x4xf32> {nn.param = "w2"})
      -> (tensor<8x4xf32>, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w1"}) {
    %0 = nn.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = dist.shard %0 : tensor<8x16xf32> to #dist.sharding<@mesh, [[dp], [tp]]>
    %2 = nn.gelu %1 approximate(none) : tensor<8x16xf32>
    %3 = nn.matmul %2, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    return %3, %w1 : tensor<8x4xf32>, tensor<4x16xf32>
  }
}

// -----

// Priorities: %a is wanted split on dim 0 at priority 1 and on dim 1 at
// priority 0 (both over tp, so only one can hold). Priority 0 settles
// first, whatever the order in the program: the open argument and the exp
// take dim 1, and the priority-1 annotation becomes a resharding of its
// own value only.

// CHECK-LABEL: func.func @priorities
// CHECK-SAME: %arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>}
// CHECK: nn.exp %arg0 {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], [tp]]>]}
// CHECK: dist.shard %0 {priority = 1 : i64} : tensor<4x4xf32> to #dist.sharding<@mesh, {{\[\[}}tp], []]>
// CHECK: dist.shard %0 : tensor<4x4xf32> to #dist.sharding<@mesh, {{\[\[}}], [tp]]>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @priorities(%a: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = nn.exp %a : tensor<4x4xf32>
    %1 = dist.shard %0 {priority = 1 : i64} : tensor<4x4xf32> to #dist.sharding<@mesh, [[tp], []]>
    %2 = dist.shard %0 : tensor<4x4xf32> to #dist.sharding<@mesh, [[], [tp]]>
    return %1, %2 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// A sum of a whole term and two terms pending over tp (autodiff's order:
// (w + p1) + p2) is regrouped as (p1 + p2) + w: one all-reduce, not two.

// CHECK-LABEL: func.func @pending_sums
// CHECK: %[[P1:.*]] = nn.matmul %arg1, %arg2
// CHECK: %[[P2:.*]] = nn.matmul %arg3, %arg4
// CHECK: %[[S:.*]] = nn.add %[[P1]], %[[P2]] {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []], partial = [tp]>]}
// CHECK-NEXT: nn.add %[[S]], %arg0 {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], []]>]}
// CHECK-NEXT: return
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @pending_sums(%w: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
                          %a: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>},
                          %b: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>},
                          %c: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>},
                          %d: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>}) -> tensor<4x4xf32> {
    %p1 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %p2 = nn.matmul %c, %d : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %s1 = nn.add %w, %p1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %s2 = nn.add %s1, %p2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %s2 : tensor<4x4xf32>
  }
}

// -----

// A pending sum over tp (an input gradient in backward) meets an operand
// split over tp (a row-parallel weight, here transposed): the sum is
// resolved at the matmul (its operand is wanted whole: one all-reduce),
// so the weight keeps its split and the result is split over its
// features, rather than the weight being gathered to pass the sum on.

// CHECK-LABEL: func.func @pending_meets_split
// CHECK: nn.matmul %{{.*}}, %{{.*}} {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], [tp]]>]}
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @pending_meets_split(
      %dy: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
      %w: tensor<16x8xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>})
      -> tensor<4x16xf32> {
    %p = dist.shard %dy : tensor<4x8xf32> to #dist.sharding<@mesh, [[], []], partial = [tp]>
    %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
    %dx = nn.matmul %p, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    return %dx : tensor<4x16xf32>
  }
}

// -----

// A gradient is wanted laid out as its parameter: the table split over its
// rows makes its gradient's scatter compute the rows this rank holds (the
// pending input gradient is resolved first: its rows are not indexed by
// it).

// CHECK-LABEL: func.func @gradient_hint
// CHECK-SAME: -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.grad = "e"})
// CHECK: nn.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64, dist.shardings = [#dist.sharding<@mesh, {{\[\[}}tp], []]>]}
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @gradient_hint(
      %e: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, nn.param = "e"},
      %ids: tensor<6xi64> {dist.sharding = #dist.sharding<@mesh, [[]]>},
      %g: tensor<6x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>})
      -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "e"}) {
    %p = dist.shard %g : tensor<6x4xf32> to #dist.sharding<@mesh, [[], []], partial = [tp]>
    %de = nn.gather_grad %ids, %p {axis = 0 : i64} : (tensor<6xi64>, tensor<6x4xf32>) -> tensor<8x4xf32>
    return %de : tensor<8x4xf32>
  }
}
