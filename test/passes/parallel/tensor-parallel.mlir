// RUN: autopar-opt %s --autopar-dist-tensor-parallel --split-input-file | FileCheck %s
// RUN: autopar-opt %s --autopar-dist-tensor-parallel --autopar-propagate-sharding --split-input-file | FileCheck %s --check-prefix=PROP
// RUN: autopar-opt %s --autopar-dist-tensor-parallel --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s --check-prefix=SPMD
// RUN: autopar-opt %s --autopar-dist-tensor-parallel=sequence-parallel=true --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s --check-prefix=SEQ

// Megatron's MLP, found: the first projection is column-parallel (a seed on
// its output features), the second has its partner's split on the
// contraction (row-parallel: no seed, a pending sum over tp). Propagation
// stores %w1 and its bias split on the features, %w2 split on its rows,
// and lays the gradient of %w1 out as %w1.

// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.*]] = nn.matmul %arg0, %arg1
// CHECK-NEXT: %[[S:.*]] = dist.shard %[[H]] {priority = 1 : i64} : tensor<8x16xf32> to #dist.sharding<@mesh, {{\[\[}}dp], [tp]]>
// CHECK-NEXT: nn.add %[[S]], %arg2
// CHECK-NOT: = dist.shard
// CHECK: return

// PROP-LABEL: func.func @mlp
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, nn.param = "w1"}
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp]]>, nn.param = "b1"}
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.param = "w2"}
// PROP-SAME: -> (tensor<8x4xf32>, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]], partial = [dp]>, nn.grad = "w1"})
// PROP: nn.matmul %{{.*}}, %arg3 {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}dp], []], partial = [tp]>]}
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @mlp(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>},
                 %w1: tensor<4x16xf32> {nn.param = "w1"},
                 %b1: tensor<16xf32> {nn.param = "b1"},
                 %w2: tensor<16x4xf32> {nn.param = "w2"})
      -> (tensor<8x4xf32>, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w1"}) {
    %0 = nn.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = nn.add %0, %b1 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    %2 = nn.gelu %1 approximate(none) : tensor<8x16xf32>
    %3 = nn.matmul %2, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %4 = nn.add %3, %x : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %g = nn.exp %w1 : tensor<4x16xf32>
    return %4, %g : tensor<8x4xf32>, tensor<4x16xf32>
  }
}

// -----

// Attention with separate q, k, v projections: q is seeded; the split of
// its heads (through the reshape and the transpose) reaches k and v through
// the attention, so their projections need no seed; the output projection
// contracts the split heads (row-parallel).

// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = nn.matmul %arg0, %arg1
// CHECK-NEXT: dist.shard %[[Q]] {priority = 1 : i64} : tensor<2x4x8xf32> to #dist.sharding<@mesh, {{\[\[}}], [], [tp]]>
// CHECK-NOT: = dist.shard
// CHECK: return

// PROP-LABEL: func.func @attention
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, nn.param = "wq"}
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, nn.param = "wk"}
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, nn.param = "wv"}
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.param = "wo"}
// PROP: nn.attention {{.*}}dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], [tp], [], []]>, #dist.sharding<@mesh, {{\[\[}}], [tp], []]>]
// PROP: nn.matmul %{{.*}}, %arg4 {dist.shardings = [#dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>]}
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @attention(%x: tensor<2x4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], []]>},
                       %wq: tensor<8x8xf32> {nn.param = "wq"}, %wk: tensor<8x8xf32> {nn.param = "wk"},
                       %wv: tensor<8x8xf32> {nn.param = "wv"}, %wo: tensor<8x8xf32> {nn.param = "wo"})
      -> (tensor<2x4x8xf32>, tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "wq"}) {
    %q = nn.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %k = nn.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %v = nn.matmul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %q1 = nn.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k1 = nn.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v1 = nn.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %q2 = nn.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %k2 = nn.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %v2 = nn.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %o, %lse = nn.attention %q2, %k2, %v2 {causal = true, scale = 0.5 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
    %o1 = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %o2 = nn.reshape %o1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %y = nn.matmul %o2, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %g = nn.exp %wq : tensor<8x8xf32>
    return %y, %g : tensor<2x4x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A projection with no row-parallel partner is left whole: the split of a
// head over a softmax's axis would only be gathered again.

// CHECK-LABEL: func.func @no_partner
// CHECK-NOT: = dist.shard
// CHECK: return
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @no_partner(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>},
                        %w: tensor<4x16xf32> {nn.param = "w"})
      -> (tensor<8x16xf32>, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "w"}) {
    %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = nn.softmax %0 {axis = 1 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>
    %g = nn.exp %w : tensor<4x16xf32>
    return %1, %g : tensor<8x16xf32>, tensor<4x16xf32>
  }
}

// -----

// Megatron's vocab-parallel embedding and loss, with a tied LM head: the
// table read at the token ids is split over its rows (a seed on the
// lookup's table) and the lookups are summed at once (a replicated seed on
// the result); the head's logits split over the vocabulary reach the loss,
// so the head is column-parallel with the loss as its partner. Locally:
// each rank looks up its rows (indices shifted by its first row, rows held
// elsewhere zeroed), the lookups are all-reduced; the loss all-reduces the
// max (by max), then the sum of exponentials and the target logit; the
// gradient reuses the forward's log-sum-exp; the table's gradient is the
// scatter of the rows a rank holds (after one all-reduce of the pending
// input gradient), added to the head's.

// CHECK-LABEL: func.func @vocab_parallel
// CHECK: %[[T:.*]] = dist.shard %arg0 {priority = 1 : i64} : tensor<8x4xf32> to #dist.sharding<@mesh, {{\[\[}}tp], []]>
// CHECK-NEXT: %[[X:.*]] = nn.gather %[[T]], %arg1
// CHECK-NEXT: dist.shard %[[X]] {priority = 1 : i64} : tensor<2x3x4xf32> to #dist.sharding<@mesh, {{\[\[}}dp], [], []]>
// CHECK-NOT: = dist.shard
// CHECK: return

// PROP-LABEL: func.func @vocab_parallel
// PROP-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.param = "wte"}
// PROP-SAME: -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"}, tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, nn.grad = "wte"})

// SPMD-LABEL: func.func @vocab_parallel
// SPMD-SAME: %arg0: tensor<4x4xf32>
// SPMD: %[[I:.*]] = dist.axis_index on @mesh axes = [tp] : tensor<i64>
// SPMD: %[[START:.*]] = nn.mul %[[I]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// SPMD: %[[LOCAL:.*]] = nn.sub %{{.*}}, %[[START]] : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
// SPMD: %[[HELD:.*]] = nn.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi1>, tensor<i1>) -> tensor<2x3xi1>
// SPMD: %[[IDX:.*]] = nn.where %[[HELD]], %[[LOCAL]], %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
// SPMD: %[[LOOKUP:.*]] = nn.gather %arg0, %[[IDX]] {axis = 0 : i64} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// SPMD: %[[M:.*]] = nn.reshape %[[HELD]] : tensor<2x3xi1> -> tensor<2x3x1xi1>
// SPMD: %[[Z:.*]] = nn.where %[[M]], %[[LOOKUP]], %{{.*}} : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// SPMD: dist.all_reduce sum %[[Z]] on @mesh axes = [tp] : tensor<2x3x4xf32>
// SPMD: %[[LOGITS:.*]] = nn.matmul %{{.*}}, %{{.*}} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
// SPMD: %[[LMAX:.*]] = nn.reduce_max %[[LOGITS]] {axes = array<i64: 1>, keepdims = false} : tensor<6x4xf32> -> tensor<6xf32>
// SPMD: %[[MAX:.*]] = dist.all_reduce max %[[LMAX]] on @mesh axes = [tp] : tensor<6xf32>
// SPMD: %[[SE:.*]], %[[TG:.*]] = nn.cross_entropy_shard_stats %[[LOGITS]], %arg2, %[[MAX]], %{{.*}} : (tensor<6x4xf32>, tensor<6xi64>, tensor<6xf32>, tensor<i64>) -> (tensor<6xf32>, tensor<6xf32>)
// SPMD: %[[SUM:.*]] = dist.all_reduce sum %[[SE]] on @mesh axes = [tp] : tensor<6xf32>
// SPMD: %[[TARGET:.*]] = dist.all_reduce sum %[[TG]] on @mesh axes = [tp] : tensor<6xf32>
// SPMD: %[[LOG:.*]] = nn.log %[[SUM]] : tensor<6xf32>
// SPMD: %[[LSE:.*]] = nn.add %[[LOG]], %[[MAX]]
// SPMD: nn.sub %[[LSE]], %[[TARGET]]
// SPMD: nn.compare ne, %arg2, %{{.*}} : (tensor<6xi64>, tensor<i64>) -> tensor<6xi1>
// SPMD: nn.reduce_sum
// SPMD: nn.div
// SPMD: nn.cross_entropy_shard_grad %[[LOGITS]], %arg2, %{{.*}}, %[[LSE]], %{{.*}} reduction(mean) {ignore_index = -100 : i64} : (tensor<6x4xf32>, tensor<6xi64>, tensor<f32>, tensor<6xf32>, tensor<i64>) -> tensor<6x4xf32>
// SPMD: dist.all_reduce sum %{{.*}} on @mesh axes = [tp] : tensor<2x3x4xf32>
// SPMD: %[[DE:.*]] = nn.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<4x4xf32>
// SPMD: nn.add %{{.*}}, %[[DE]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// SPMD-NOT: dist.
// SPMD: return
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @vocab_parallel(%e: tensor<8x4xf32> {nn.param = "wte"},
                            %ids: tensor<2x3xi64> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "ids"},
                            %t: tensor<6xi64> {dist.sharding = #dist.sharding<@mesh, [[dp]]>, nn.input = "t"})
      -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"},
          tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "wte"}) {
    %x = nn.gather %e, %ids {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %h = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %et = nn.transpose %e {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %s = nn.matmul %h, %et : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) {ignore_index = -100 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    %one = nn.constant dense<1.0> : tensor<f32>
    %ds = nn.softmax_cross_entropy_grad %s, %t, %one reduction(mean) {ignore_index = -100 : i64} : (tensor<6x8xf32>, tensor<6xi64>, tensor<f32>) -> tensor<6x8xf32>
    %dh = nn.matmul %ds, %e : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
    %det = nn.gemm %h, %ds {trans_a = true} : (tensor<6x4xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
    %de1 = nn.transpose %det {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    %dx = nn.reshape %dh : tensor<6x4xf32> -> tensor<2x3x4xf32>
    %de2 = nn.gather_grad %ids, %dx {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
    %de = nn.add %de1, %de2 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %l, %de : tensor<f32>, tensor<8x4xf32>
  }
}

// -----

// Sequence parallelism: the row-parallel projection's pending sum is split
// over the tokens (the leading dim, the samples, when tp divides it: a
// reduce-scatter of contiguous blocks), so the residual add runs on half
// the tokens (its other operand sliced locally); the column-parallel
// projection's input is pinned whole (an all-gather where it arrives
// split; here it is an input, whole already).

// SEQ-LABEL: func.func @mlp_sequence
// SEQ: nn.matmul %arg0, %arg1 : (tensor<2x8x4xf32>, tensor<4x8xf32>) -> tensor<2x8x8xf32>
// SEQ: %[[P:.*]] = nn.matmul %{{.*}}, %arg2 : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
// SEQ: %[[R:.*]] = dist.reduce_scatter sum %[[P]] on @mesh axes = [tp] dim = 0 : tensor<2x8x4xf32> -> tensor<1x8x4xf32>
// SEQ: %[[X:.*]] = dist.tensor_split %arg0 on @mesh axes = [tp] dim = 0 : tensor<2x8x4xf32> -> tensor<1x8x4xf32>
// SEQ: %[[S:.*]] = nn.add %[[R]], %[[X]] : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x8x4xf32>
// SEQ: %[[G:.*]] = dist.all_gather %[[S]] on @mesh axes = [tp] dim = 0 : tensor<1x8x4xf32> -> tensor<2x8x4xf32>
// SEQ: return %[[G]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @mlp_sequence(%x: tensor<2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>},
                          %w1: tensor<4x16xf32> {nn.param = "w1"},
                          %w2: tensor<16x4xf32> {nn.param = "w2"})
      -> (tensor<2x8x4xf32>, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.grad = "w1"}) {
    %0 = nn.matmul %x, %w1 : (tensor<2x8x4xf32>, tensor<4x16xf32>) -> tensor<2x8x16xf32>
    %1 = nn.gelu %0 approximate(none) : tensor<2x8x16xf32>
    %2 = nn.matmul %1, %w2 : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
    %3 = nn.add %2, %x : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
    %g = nn.exp %w1 : tensor<4x16xf32>
    return %3, %g : tensor<2x8x4xf32>, tensor<4x16xf32>
  }
}

// -----

// Under dp x tp the samples are split over dp already: sequence
// parallelism splits each dp block further over tp ([dp] -> [dp, tp] on
// the leading dim: a reduce-scatter over tp of the local block; back to
// [dp]: an all-gather over tp).

// SEQ-LABEL: func.func @mlp_sequence_2d
// SEQ: %[[P:.*]] = nn.matmul %{{.*}}, %arg2 : (tensor<2x8x8xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
// SEQ: %[[R:.*]] = dist.reduce_scatter sum %[[P]] on @mesh axes = [tp] dim = 0 : tensor<2x8x4xf32> -> tensor<1x8x4xf32>
// SEQ: %[[X:.*]] = dist.tensor_split %arg0 on @mesh axes = [tp] dim = 0 : tensor<2x8x4xf32> -> tensor<1x8x4xf32>
// SEQ: %[[S:.*]] = nn.add %[[R]], %[[X]]
// SEQ: dist.all_gather %[[S]] on @mesh axes = [tp] dim = 0 : tensor<1x8x4xf32> -> tensor<2x8x4xf32>
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @mlp_sequence_2d(%x: tensor<4x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>},
                             %w1: tensor<4x16xf32> {nn.param = "w1"},
                             %w2: tensor<16x4xf32> {nn.param = "w2"})
      -> (tensor<4x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>},
          tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w1"}) {
    %0 = nn.matmul %x, %w1 : (tensor<4x8x4xf32>, tensor<4x16xf32>) -> tensor<4x8x16xf32>
    %1 = nn.gelu %0 approximate(none) : tensor<4x8x16xf32>
    %2 = nn.matmul %1, %w2 : (tensor<4x8x16xf32>, tensor<16x4xf32>) -> tensor<4x8x4xf32>
    %3 = nn.add %2, %x : (tensor<4x8x4xf32>, tensor<4x8x4xf32>) -> tensor<4x8x4xf32>
    %g = nn.exp %w1 : tensor<4x16xf32>
    return %3, %g : tensor<4x8x4xf32>, tensor<4x16xf32>
  }
}

// -----

// Two pipeline stages' training steps over dp x pp x tp. Stage 1 takes no
// data input: its input arrives as stage 0 returns it (split over dp and,
// sequence-parallel or not, laid out by stage 0), and while stage 1
// chooses its splits only the tp part of that is open: its column-parallel
// seed keeps the batch split over dp (without it, every dp rank of stage 1
// would compute the whole micro-batch).

// CHECK-LABEL: func.func @stage0
// CHECK: dist.shard {{.*}} : tensor<8x16xf32> to #dist.sharding<@mesh, {{\[\[}}dp], [tp]]>
// CHECK-LABEL: func.func @stage1
// CHECK-SAME: nn.stage_input
// CHECK: %[[H:.*]] = nn.matmul %arg0, %arg1
// CHECK-NEXT: dist.shard %[[H]] {priority = 1 : i64} : tensor<8x16xf32> to #dist.sharding<@mesh, {{\[\[}}dp], [tp]]>
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 2]
  func.func @stage0(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "x"},
                    %w1: tensor<4x16xf32> {nn.param = "w1"},
                    %w2: tensor<16x4xf32> {nn.param = "w2"})
      -> (tensor<8x4xf32> {nn.output = "stage_output"}, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w1"})
      attributes {dist.stage = 0 : i64} {
    %0 = nn.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = nn.gelu %0 approximate(none) : tensor<8x16xf32>
    %2 = nn.matmul %1, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %3 = nn.add %2, %x : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %g = nn.exp %w1 : tensor<4x16xf32>
    return %3, %g : tensor<8x4xf32>, tensor<4x16xf32>
  }
  func.func @stage1(%h: tensor<8x4xf32> {nn.stage_input},
                    %w3: tensor<4x16xf32> {nn.param = "w3"},
                    %w4: tensor<16x4xf32> {nn.param = "w4"})
      -> (tensor<8x4xf32> {nn.output = "y"}, tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w3"})
      attributes {dist.stage = 1 : i64} {
    %0 = nn.matmul %h, %w3 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %1 = nn.gelu %0 approximate(none) : tensor<8x16xf32>
    %2 = nn.matmul %1, %w4 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %3 = nn.add %2, %h : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %g = nn.exp %w3 : tensor<4x16xf32>
    return %3, %g : tensor<8x4xf32>, tensor<4x16xf32>
  }
}

// -----

// A gemm with a bias (Hugging Face GPT-2's Conv1D, exported as Gemm) is a
// gemm plus an add of beta * bias: the row-parallel one's pending sum is
// reduced before its bias is added, once (was: added on every rank).

// CHECK-LABEL: func.func @conv1d_mlp
// CHECK: nn.gemm %arg0, %arg1 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK: nn.add %{{.*}}, %arg2
// CHECK: %[[P:.*]] = nn.gemm %{{.*}}, %arg3 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK: %[[HALF:.*]] = nn.constant dense<5.000000e-01>
// CHECK: %[[B:.*]] = nn.mul %arg4, %[[HALF]]
// CHECK: nn.add %[[P]], %[[B]]

// SPMD-LABEL: func.func @conv1d_mlp
// SPMD: %[[P:.*]] = nn.gemm %{{.*}}, %arg3 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// SPMD: %[[S:.*]] = dist.all_reduce sum %[[P]] on @mesh axes = [tp]
// SPMD-NEXT: nn.add %[[S]], %{{.*}} : (tensor<8x4xf32>, tensor<4xf32>)
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @conv1d_mlp(%x: tensor<8x4xf32>,
                 %w1: tensor<4x16xf32> {nn.param = "w1"},
                 %b1: tensor<16xf32> {nn.param = "b1"},
                 %w2: tensor<16x4xf32> {nn.param = "w2"},
                 %b2: tensor<4xf32> {nn.param = "b2"})
      -> (tensor<8x4xf32>, tensor<4x16xf32> {nn.grad = "w1"}) {
    %0 = nn.gemm %x, %w1, %b1 : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    %1 = nn.gelu %0 approximate(none) : tensor<8x16xf32>
    %2 = nn.gemm %1, %w2, %b2 {beta = 0.5 : f64} : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %g = nn.exp %w1 : tensor<4x16xf32>
    return %2, %g : tensor<8x4xf32>, tensor<4x16xf32>
  }
}
