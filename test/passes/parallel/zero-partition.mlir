// RUN: autopar-opt %s --autopar-zero-partition --split-input-file | FileCheck %s

// Hybrid sharding: a gradient pending over the shard group (dp) and the
// replicas (dpr) is reduce-scattered over dp, then its shard all-reduced
// over dpr.

// CHECK-LABEL: func.func @hybrid
// CHECK-SAME: -> (tensor<4xf32> {dist.zero, nn.grad = "w"})
// CHECK: %[[S:.*]] = dist.zero_scatter sum %arg0 on @mesh axes = [dp] : tensor<2x4xf32> -> tensor<4xf32>
// CHECK: %[[R:.*]] = dist.all_reduce sum %[[S]] on @mesh axes = [dpr] : tensor<4xf32>
// CHECK: return %[[R]]
module attributes {dist.zero_stage = 2 : i64} {
  dist.mesh @mesh axes = [dpr = 2, dp = 2, pp = 1, tp = 1]
  func.func @hybrid(%g: tensor<2x4xf32>)
      -> (tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dpr, dp]>, dist.zero, nn.grad = "w"}) {
    return %g : tensor<2x4xf32>
  }
}

// -----

// Under tensor parallelism a gradient is this rank's block (split over tp)
// and a pending sum over dp: ZeRO shards the block.

// CHECK-LABEL: func.func @tp_block
// CHECK-SAME: -> (tensor<4xf32> {dist.zero, nn.grad = "w"})
// CHECK: dist.zero_scatter sum %arg0 on @mesh axes = [dp] : tensor<2x4xf32> -> tensor<4xf32>
module attributes {dist.zero_stage = 2 : i64} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @tp_block(%g: tensor<2x4xf32>)
      -> (tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []], partial = [dp]>, dist.zero, nn.grad = "w"}) {
    return %g : tensor<2x4xf32>
  }
}

// -----

// Over one data-parallel rank (dp = 1, tp = 2) a gradient complete on its
// rank (no sum left pending over the axis of size 1) is its own sum: ZeRO
// "shards" its block whole.

// CHECK-LABEL: func.func @one_dp_rank
// CHECK-SAME: -> (tensor<8xf32> {dist.zero, nn.grad = "w"})
// CHECK: dist.zero_scatter sum %arg0 on @mesh axes = [dp] : tensor<2x4xf32> -> tensor<8xf32>
module attributes {dist.zero_stage = 3 : i64} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 2]
  func.func @one_dp_rank(%g: tensor<2x4xf32>)
      -> (tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, dist.zero, nn.grad = "w"}) {
    return %g : tensor<2x4xf32>
  }
}

// -----

// ZeRO-3 over dp = 2: the 3x3 weight (9 elements) is stored as a flat shard
// of 5 (the last rank's padded by one), gathered right before each use (the
// forward matmul and the backward gemm: two gathers); its gradient, a
// pending sum over dp, is reduce-scattered where it is complete. The frozen
// bias is untouched.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<5xf32> {dist.block_type = tensor<3x3xf32>, dist.zero, nn.param = "w"}
// CHECK-SAME: %arg1: tensor<3xf32> {nn.param = "b"}
// CHECK-SAME: -> (tensor<f32>, tensor<5xf32> {dist.zero, nn.grad = "w"})
// CHECK: %[[F1:.*]] = dist.zero_gather %arg0 on @mesh axes = [dp] : tensor<5xf32> -> tensor<3x3xf32>
// CHECK: nn.matmul %arg2, %[[F1]]
// CHECK: %[[F2:.*]] = dist.zero_gather %arg0 on @mesh axes = [dp] : tensor<5xf32> -> tensor<3x3xf32>
// CHECK: nn.gemm %arg2, %[[F2]]
// CHECK: %[[G:.*]] = nn.gemm %arg2, %{{.*}} {trans_a = true}
// CHECK-NEXT: %[[S:.*]] = dist.zero_scatter sum %[[G]] on @mesh axes = [dp] : tensor<3x3xf32> -> tensor<5xf32>
// CHECK: return %{{.*}}, %[[S]] : tensor<f32>, tensor<5xf32>
module attributes {dist.zero_stage = 3 : i64} {
  dist.mesh @mesh axes = [dp = 2]
  func.func @train_step(%w: tensor<3x3xf32> {dist.zero, nn.param = "w"},
                        %b: tensor<3xf32> {nn.param = "b"},
                        %x: tensor<2x3xf32> {nn.input = "x"})
      -> (tensor<f32>, tensor<3x3xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, dist.zero, nn.grad = "w"}) {
    %0 = nn.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %1 = nn.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %2 = nn.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %3 = nn.gemm %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %4 = nn.gemm %x, %3 {trans_a = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %5 = nn.exp %4 : tensor<3x3xf32>
    return %2, %4 : tensor<f32>, tensor<3x3xf32>
  }
}

// -----

// Stages 0 and 1 leave the IR alone.

// CHECK-LABEL: func.func @stage1
// CHECK-SAME: %arg0: tensor<3x3xf32>
// CHECK-NOT: dist.zero_
module attributes {dist.zero_stage = 1 : i64} {
  dist.mesh @mesh axes = [dp = 2]
  func.func @stage1(%w: tensor<3x3xf32> {nn.param = "w"}) -> tensor<3x3xf32> {
    return %w : tensor<3x3xf32>
  }
}
