// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s

// Ring attention (cp = 2): the query, key, value and positions stay split
// over the sequence. The forward passes the keys, values and positions one
// rank on (dist.shift) while it attends to its own block, then attends to
// the block that arrived; each block under the causal mask of its key
// positions against the queries' (a query that sees none of the second
// block takes its output and log-sum-exp as 0 and -inf), the two merged by
// their log-sum-exps. The backward passes the keys and values again (the
// positions were passed once), computes each block's gradients against
// the merged output and log-sum-exp, sums the query gradients, and passes
// the key and value gradients' partial sums on with their block, home after
// the last: nothing is gathered, no key gradient is a pending sum.

// CHECK-LABEL: func.func @ring
// CHECK-NEXT: %[[K1:.*]] = dist.shift %arg1 on @mesh axes = [cp] offset = 1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[V1:.*]] = dist.shift %arg2 on @mesh axes = [cp] offset = 1 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[P1:.*]] = dist.shift %arg3 on @mesh axes = [cp] offset = 1 : tensor<4xi64>
// CHECK-NEXT: %[[R0:.*]] = nn.reshape %arg3 : tensor<4xi64> -> tensor<4x1xi64>
// CHECK-NEXT: %[[C0:.*]] = nn.reshape %arg3 : tensor<4xi64> -> tensor<1x4xi64>
// CHECK-NEXT: %[[M0:.*]] = nn.compare le, %[[C0]], %[[R0]] : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi1>
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = nn.attention %arg0, %arg1, %arg2 mask %[[M0]] {causal = false, scale = 5.000000e-01 : f64}
// CHECK-NEXT: %[[R1:.*]] = nn.reshape %arg3 : tensor<4xi64> -> tensor<4x1xi64>
// CHECK-NEXT: %[[C1:.*]] = nn.reshape %[[P1]] : tensor<4xi64> -> tensor<1x4xi64>
// CHECK-NEXT: %[[M1:.*]] = nn.compare le, %[[C1]], %[[R1]]
// CHECK-NEXT: %[[FIRST:.*]] = nn.slice %[[P1]] {offsets = array<i64: 0>, strides = array<i64: 1>} : tensor<4xi64> -> tensor<1xi64>
// CHECK-NEXT: %[[SEES:.*]] = nn.compare le, %[[FIRST]], %arg3 : (tensor<1xi64>, tensor<4xi64>) -> tensor<4xi1>
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = nn.attention %arg0, %[[K1]], %[[V1]] mask %[[M1]] {causal = false
// CHECK-NEXT: %[[NEGINF:.*]] = nn.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %[[L1S:.*]] = nn.where %[[SEES]], %[[L1]], %[[NEGINF]]
// CHECK:      %[[O1S:.*]] = nn.where %{{.*}}, %[[O1]], %{{.*}} : (tensor<4x1xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
// CHECK:      %[[MAX:.*]] = nn.where %{{.*}}, %[[L1S]], %[[L0]]
// CHECK:      %[[OUT:.*]] = nn.add %{{.*}}, %{{.*}} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[LOG:.*]] = nn.log
// CHECK-NEXT: %[[LSE:.*]] = nn.add %[[MAX]], %[[LOG]]
// CHECK-NEXT: %[[K1B:.*]] = dist.shift %arg1 on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[V1B:.*]] = dist.shift %arg2 on @mesh axes = [cp] offset = 1
// CHECK-NOT:  dist.shift %arg3
// CHECK:      %[[DQ0:.*]], %[[DK0:.*]], %[[DV0:.*]] = nn.attention_grad %arg0, %arg1, %arg2 mask %{{.*}}, %[[OUT]], %[[LSE]], %arg4 {causal = false
// CHECK-NEXT: %[[DK0P:.*]] = dist.shift %[[DK0]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[DV0P:.*]] = dist.shift %[[DV0]] on @mesh axes = [cp] offset = 1
// CHECK:      %[[DQ1:.*]], %[[DK1:.*]], %[[DV1:.*]] = nn.attention_grad %arg0, %[[K1B]], %[[V1B]] mask %{{.*}}, %[[OUT]], %[[LSE]], %arg4 {causal = false
// CHECK-NEXT: %[[DQ:.*]] = nn.add %[[DQ0]], %[[DQ1]]
// CHECK-NEXT: %[[DKS:.*]] = nn.add %[[DK0P]], %[[DK1]]
// CHECK-NEXT: %[[DVS:.*]] = nn.add %[[DV0P]], %[[DV1]]
// CHECK-NEXT: %[[DK:.*]] = dist.shift %[[DKS]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: %[[DV:.*]] = dist.shift %[[DVS]] on @mesh axes = [cp] offset = 1
// CHECK-NEXT: return %[[OUT]], %[[DQ]], %[[DK]], %[[DV]]
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

// Not causal: no positions, no masks; the outputs merged all the same.

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
