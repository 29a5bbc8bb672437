// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s

// Ring attention (cp = 2): the query, key, value and positions stay split
// over the sequence. The forward passes the keys, values and positions one
// rank on (dist.shift) while it attends to its own block, then attends to
// the block that arrived. Each block is attended in its two halves of
// consecutive positions (a zig-zag block's chunks), each a causal attention
// whose positions are the queries' less the half's first key position (the
// kernels skip what they hide; a query that sees none of a half takes its
// output and log-sum-exp as 0 and -inf), the partial results merged by
// their log-sum-exps. The backward passes the keys and values again (the
// positions were passed once), computes each half's gradients against the
// merged output and log-sum-exp, sums the query gradients, concatenates a
// block's key and value gradients, and passes their partial sums on with
// the block, home after the last: nothing is gathered, no key gradient is a
// pending sum.

// CHECK-LABEL: func.func @ring
// CHECK-NEXT: %[[K1:.*]] = dist.shift %arg1 on @mesh axes = [cp] offset = 1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[V1:.*]] = dist.shift %arg2 on @mesh axes = [cp] offset = 1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[P1:.*]] = dist.shift %arg3 on @mesh axes = [cp] offset = 1 : tensor<4xi64>
// CHECK-NEXT: %[[KA:.*]] = nn.slice %arg1 {offsets = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x4xf32>
// CHECK-NEXT: %[[VA:.*]] = nn.slice %arg2 {offsets = array<i64: 0, 0, 0, 0>
// CHECK-NEXT: %[[FA:.*]] = nn.slice %arg3 {offsets = array<i64: 0>, strides = array<i64: 1>} : tensor<4xi64> -> tensor<1xi64>
// CHECK-NEXT: %[[PA:.*]] = nn.sub %arg3, %[[FA]] : (tensor<4xi64>, tensor<1xi64>) -> tensor<4xi64>
// CHECK-NEXT: %[[KB:.*]] = nn.slice %arg1 {offsets = array<i64: 0, 0, 2, 0>
// CHECK-NEXT: %[[VB:.*]] = nn.slice %arg2 {offsets = array<i64: 0, 0, 2, 0>
// CHECK-NEXT: %[[FB:.*]] = nn.slice %arg3 {offsets = array<i64: 2>
// CHECK-NEXT: %[[PB:.*]] = nn.sub %arg3, %[[FB]]
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = nn.attention %arg0, %[[KA]], %[[VA]] positions %[[PA]] {causal = true, scale = 5.000000e-01 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<4xi64>)
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = nn.attention %arg0, %[[KB]], %[[VB]] positions %[[PB]] {causal = true
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[SB:.*]] = nn.compare ge, %[[PB]], %[[ZERO]] : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK-NEXT: %[[NEGINF:.*]] = nn.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %[[L1S:.*]] = nn.where %[[SB]], %[[L1]], %[[NEGINF]]
// CHECK:      nn.where %{{.*}}, %[[O1]], %{{.*}} : (tensor<4x1xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
// CHECK:      %[[MAX:.*]] = nn.where %{{.*}}, %[[L1S]], %[[L0]]
// CHECK:      nn.slice %[[K1]] {offsets = array<i64: 0, 0, 0, 0>
// CHECK:      nn.slice %[[P1]] {offsets = array<i64: 0>
// CHECK:      nn.attention %arg0, %{{.*}}, %{{.*}} positions %{{.*}} {causal = true
// CHECK:      nn.attention %arg0, %{{.*}}, %{{.*}} positions %{{.*}} {causal = true
// CHECK:      %[[OUT:.*]] = nn.add %{{.*}}, %{{.*}} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[LOG:.*]] = nn.log
// CHECK-NEXT: %[[LSE:.*]] = nn.add %{{.*}}, %[[LOG]]
// CHECK-NEXT: %[[K1B:.*]] = dist.shift %arg1 on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[V1B:.*]] = dist.shift %arg2 on @mesh axes = [cp] offset = 1
// CHECK-NOT:  dist.shift %arg3
// CHECK:      %[[DQ0:.*]], %[[DK0:.*]], %[[DV0:.*]] = nn.attention_grad %arg0, %{{.*}}, %{{.*}} positions %{{.*}}, %[[OUT]], %[[LSE]], %arg4 {causal = true
// CHECK:      %[[DQ1:.*]], %[[DK1:.*]], %[[DV1:.*]] = nn.attention_grad %arg0, %{{.*}}, %{{.*}} positions %{{.*}}, %[[OUT]], %[[LSE]], %arg4 {causal = true
// CHECK-NEXT: %[[DQ01:.*]] = nn.add %[[DQ0]], %[[DQ1]]
// CHECK-NEXT: %[[DK:.*]] = nn.concat %[[DK0]], %[[DK1]] {axis = 2 : i64} : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DV:.*]] = nn.concat %[[DV0]], %[[DV1]] {axis = 2 : i64}
// CHECK-NEXT: %[[DKP:.*]] = dist.shift %[[DK]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[DVP:.*]] = dist.shift %[[DV]] on @mesh axes = [cp] offset = 1
// CHECK:      nn.attention_grad %arg0, %{{.*}}, %{{.*}} positions
// CHECK:      nn.attention_grad %arg0, %{{.*}}, %{{.*}} positions
// CHECK:      %[[DKS:.*]] = nn.add %[[DKP]], %{{.*}}
// CHECK-NEXT: %[[DVS:.*]] = nn.add %[[DVP]], %{{.*}}
// CHECK-NEXT: %[[DKH:.*]] = dist.shift %[[DKS]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[DVH:.*]] = dist.shift %[[DVS]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: return %[[OUT]], %{{.*}}, %[[DKH]], %[[DVH]]
// CHECK-NOT: dist.all_gather
// CHECK-NOT: dist.context_parallel
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @ring(%q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                  %k: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                  %v: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
                  %p: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [[cp]]>},
                  %g: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>})
      -> (tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>},
          tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>}) {
    %o, %l = nn.attention %q, %k, %v positions %p {causal = true, scale = 5.000000e-01 : f64, dist.context_parallel = "ring"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<8xi64>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v positions %p, %o, %l, %g {causal = true, scale = 5.000000e-01 : f64, dist.context_parallel = "ring"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<8xi64>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
    return %o, %dq, %dk, %dv : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  }
}

// -----

// Not causal: no positions, whole blocks; the outputs merged all the same.

// CHECK-LABEL: func.func @unmasked
// CHECK-NEXT: %[[K1:.*]] = dist.shift %arg0 on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[V1:.*]] = dist.shift %arg0 on @mesh axes = [cp] offset = 1
// CHECK-NEXT: nn.attention %arg0, %arg0, %arg0 {causal = false
// CHECK-NEXT: nn.attention %arg0, %[[K1]], %[[V1]] {causal = false
// CHECK-NOT: nn.compare le
// CHECK-NOT: nn.slice
// CHECK: return
module {
  dist.mesh @mesh axes = [dp = 1, cp = 2]
  func.func @unmasked(%q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>})
      -> (tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [cp], []]>}) {
    %o, %l = nn.attention %q, %q, %q {causal = false, scale = 5.000000e-01 : f64, dist.context_parallel = "ring"}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}
