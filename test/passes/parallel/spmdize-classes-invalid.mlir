// Negative: a loss over a padded vocabulary that counts only its first
// `classes` (autopar-dist-pad-vocabulary on one tp rank) cannot have its
// classes split over tp: the vocab-parallel loss masks the padding instead.

// RUN: not autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize 2>&1 | FileCheck %s

// CHECK: error: 'nn.softmax_cross_entropy' op with `classes` cannot split its classes over ranks
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @vocab_parallel(%e: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, nn.param = "wte"},
                            %ids: tensor<2x3xi64> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "ids"},
                            %t: tensor<6xi64> {dist.sharding = #dist.sharding<@mesh, [[dp]]>, nn.input = "t"})
      -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"}) {
    %x = nn.gather %e, %ids {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %h = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %et = nn.transpose %e {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %s = nn.matmul %h, %et : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
    %l = nn.softmax_cross_entropy %s, %t reduction(mean) {classes = 7 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
