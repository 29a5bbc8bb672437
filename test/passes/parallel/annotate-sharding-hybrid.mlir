// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=1" | FileCheck %s --check-prefix=Z1
// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=3" | FileCheck %s --check-prefix=Z3

// Hybrid sharding (zero.shard_size, the mesh's dpr replicas outside the
// dp shard group): the batch is split over every data-parallel rank, dpr
// then dp; a ZeRO-1 gradient is a sum pending over both (the runtime
// reduce-scatters it over dp and sums the shard over dpr); ZeRO-3 shards
// the parameter and its gradient as without replicas (over dp, by
// autopar-zero-partition).

// Z1-LABEL: func.func @train_step
// Z1-SAME: %arg1: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dpr, dp], []]>, nn.input = "x"}
// Z1-SAME: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dpr, dp]>, nn.grad = "w"}

// Z3-LABEL: func.func @train_step
// Z3-SAME: %arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []]>, dist.zero, nn.param = "w"}
// Z3-SAME: %arg1: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dpr, dp], []]>, nn.input = "x"}
// Z3-SAME: tensor<4x4xf32> {dist.zero, nn.grad = "w"}
dist.mesh @mesh axes = [dpr = 2, dp = 2, pp = 1, tp = 1]
func.func @train_step(%w: tensor<4x4xf32> {nn.param = "w"},
                      %x: tensor<8x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}, tensor<4x4xf32> {nn.grad = "w"}) {
  %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x4xf32> -> tensor<f32>
  %2 = nn.gemm %x, %0 {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %1, %2 : tensor<f32>, tensor<4x4xf32>
}
