// Negative: an op whose dist.shardings no longer match its operands.

// RUN: not autopar-opt %s --autopar-dist-spmdize 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: error: 'nn.exp' op result #0 is annotated #dist.sharding<@mesh, {{\[\[}}]]> but its operands give #dist.sharding<@mesh, {{\[\[}}dp]]> (stale dist.shardings: rerun autopar-dist-propagate)
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @stale(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [[dp]]>}) -> tensor<8xf32> {
    %0 = nn.exp %x {dist.shardings = [#dist.sharding<@mesh, [[]]>]} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
