// Negative: spmdize needs propagated shardings, and an argument is data a
// rank holds, never a pending sum.

// RUN: not autopar-opt %s --autopar-dist-spmdize --split-input-file 2>&1 | FileCheck %s

// CHECK: error: 'nn.exp' op has no dist.shardings (run autopar-propagate-sharding first)
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @unpropagated(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [[dp]]>}) -> tensor<8xf32> {
    %0 = nn.exp %x : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// CHECK: error: argument #0 cannot start as a pending sum
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @partial_argument(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [[]], partial = [dp]>}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}
