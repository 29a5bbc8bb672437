// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-spmdize --split-input-file | FileCheck %s

// A dropout of a split value draws its block of the logical tensor's mask:
// the local op gets the logical shape and its block's first index in each
// dim (the rank's position over the dim's axes times the block size; 0
// where the dim is whole). A whole value's dropout is left as it is.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4x8xf32>
// CHECK: %[[DP:.*]] = dist.axis_index on @mesh axes = [dp] : tensor<i64>
// CHECK: %[[FOUR:.*]] = nn.constant dense<4> : tensor<i64>
// CHECK: %[[ROW:.*]] = nn.mul %[[DP]], %[[FOUR]]
// CHECK: %[[TP:.*]] = dist.axis_index on @mesh axes = [tp] : tensor<i64>
// CHECK: %[[EIGHT:.*]] = nn.constant dense<8> : tensor<i64>
// CHECK: %[[COL:.*]] = nn.mul %[[TP]], %[[EIGHT]]
// CHECK: nn.dropout %arg0 offsets(%[[ROW]], %[[COL]] : tensor<i64>, tensor<i64>) ratio(1.000000e-01) site(0) {logical_shape = array<i64: 8, 16>} : tensor<4x8xf32>
// CHECK: nn.dropout %arg1 ratio(1.000000e-01) site(1) : tensor<8x16xf32>
module {
  dist.mesh @mesh axes = [dp = 2, tp = 2]
  func.func @train_step(
      %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [tp]]>, nn.input = "x"},
      %y: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.input = "y"})
      -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [tp]]>, nn.output = "d"},
          tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.output = "e"}) {
    %d = nn.dropout %x ratio(0.1) site(0) : tensor<8x16xf32>
    %e = nn.dropout %y ratio(0.1) site(1) : tensor<8x16xf32>
    return %d, %e : tensor<8x16xf32>, tensor<8x16xf32>
  }
}

// -----

// A pending sum is resolved before the dropout (not linear: Megatron drops
// after the row-parallel all-reduce), whose value is then whole.

// CHECK-LABEL: func.func @pending
// CHECK: %[[S:.*]] = nn.matmul
// CHECK: %[[R:.*]] = dist.all_reduce sum %[[S]] on @mesh axes = [tp]
// CHECK: nn.dropout %[[R]] ratio(5.000000e-01) site(2) : tensor<4x16xf32>
module {
  dist.mesh @mesh axes = [tp = 2]
  func.func @pending(
      %x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>, nn.input = "x"},
      %w: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, nn.param = "w"})
      -> (tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.output = "d"}) {
    %s = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %d = nn.dropout %s ratio(0.5) site(2) : tensor<4x16xf32>
    return %d : tensor<4x16xf32>
  }
}
