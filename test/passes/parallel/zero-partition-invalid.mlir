// RUN: not autopar-opt %s --autopar-zero-partition --split-input-file 2>&1 | FileCheck %s

// A dist.zero gradient that is split rather than a pending sum over dp
// cannot be reduce-scattered.

// CHECK: error: result #0 is laid out as #dist.sharding<@mesh, {{\[\[}}dp], []]>; ZeRO shards only a gradient that is a pending sum over 'dp' (and the replicas 'dpr') and not split over it
module attributes {dist.zero_stage = 2 : i64} {
  dist.mesh @mesh axes = [dp = 2]
  func.func @split(%g: tensor<2x4xf32>)
      -> (tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, dist.zero, nn.grad = "w"}) {
    return %g : tensor<2x4xf32>
  }
}

// -----

// Over two data-parallel ranks a gradient with no sum pending over dp is
// refused all the same (only one rank's gradient is its own sum).
// RUN: not autopar-opt %s --autopar-zero-partition --split-input-file 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: result #0 is laid out as #dist.sharding<@mesh, {{\[\[}}tp], []]>; ZeRO shards only a gradient
module attributes {dist.zero_stage = 3 : i64} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @not_pending(%g: tensor<2x4xf32>)
      -> (tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, dist.zero, nn.grad = "w"}) {
    return %g : tensor<2x4xf32>
  }
}
