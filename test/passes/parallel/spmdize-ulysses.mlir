// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file --verify-diagnostics | FileCheck %s

// Ulysses (cp = 2): the attention's query, key and value come split over
// the sequence (dim 2); each is exchanged for a block of the heads (split
// dim 1, concatenated dim 2), the attention runs on 1 of the 2 heads over
// all 8 rows, and its output is exchanged back. The gradient reuses the
// forward's blocks of the query, key, value, output and log-sum-exp (the
// log-sum-exp is never exchanged back: only the gradient reads it),
// exchanges the output's gradient in and its three results back. No key
// gradient is a pending sum: nothing is reduced over cp.

// CHECK-LABEL: func.func @ulysses
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x4xf32> {{.*}}, %[[K:.*]]: tensor<1x2x4x4xf32> {{.*}}, %[[V:.*]]: tensor<1x2x4x4xf32> {{.*}}, %[[G:.*]]: tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[QH:.*]] = dist.all_to_all %[[Q]] on @mesh axes = [cp] split_dim = 1 concat_dim = 2 : tensor<1x2x4x4xf32> -> tensor<1x1x8x4xf32>
// CHECK-NEXT: %[[KH:.*]] = dist.all_to_all %[[K]] on @mesh axes = [cp] split_dim = 1 concat_dim = 2
// CHECK-NEXT: %[[VH:.*]] = dist.all_to_all %[[V]] on @mesh axes = [cp] split_dim = 1 concat_dim = 2
// CHECK-NEXT: %[[O:.*]], %[[L:.*]] = nn.attention %[[QH]], %[[KH]], %[[VH]] {causal = true, scale = 5.000000e-01 : f64} : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x8x4xf32>, tensor<1x1x8xf32>)
// CHECK-NEXT: %[[OB:.*]] = dist.all_to_all %[[O]] on @mesh axes = [cp] split_dim = 2 concat_dim = 1 : tensor<1x1x8x4xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[GH:.*]] = dist.all_to_all %[[G]] on @mesh axes = [cp] split_dim = 1 concat_dim = 2
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %[[QH]], %[[KH]], %[[VH]], %[[O]], %[[L]], %[[GH]] {causal = true, scale = 5.000000e-01 : f64}
// CHECK-NEXT: %[[DQB:.*]] = dist.all_to_all %[[DQ]] on @mesh axes = [cp] split_dim = 2 concat_dim = 1 : tensor<1x1x8x4xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DKB:.*]] = dist.all_to_all %[[DK]] on @mesh axes = [cp] split_dim = 2 concat_dim = 1
// CHECK-NEXT: %[[DVB:.*]] = dist.all_to_all %[[DV]] on @mesh axes = [cp] split_dim = 2 concat_dim = 1
// CHECK-NEXT: return %[[OB]], %[[DQB]], %[[DKB]], %[[DVB]]
// CHECK-NOT: dist.context_parallel
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @ulysses(%q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                     %k: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                     %v: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                     %g: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>})
      -> (tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>}) {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64, dist.context_parallel = "ulysses"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %l, %g {causal = true, scale = 5.000000e-01 : f64, dist.context_parallel = "ulysses"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
    return %o, %dq, %dk, %dv : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  }
}

// -----

// Unmarked, the same attention keeps its keys whole: they are all-gathered
// over cp (all_gather mode; a non-causal attention needs no positions).

// CHECK-LABEL: func.func @gathered
// CHECK: dist.all_gather {{.*}} axes = [cp] dim = 2
// CHECK-NOT: dist.all_to_all
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @gathered(%q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>})
      -> (tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>}) {
    %o, %l = nn.attention %q, %q, %q {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}

// -----

// Under tensor parallelism a rank holds 1 of the 2 heads: the 2 cp ranks
// cannot share it out.
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2, tp = 2]
  func.func @few_heads(%q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp], [cp], []]>})
      -> (tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp], [cp], []]>}) {
    // expected-error @+1 {{'nn.attention' op holds 1 head(s) per rank, which the 2 ranks sharing its sequence (context_parallel.mode "ulysses") do not divide}}
    %o, %l = nn.attention %q, %q, %q {causal = true, scale = 5.000000e-01 : f64, dist.context_parallel = "ulysses"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}
