// Negative: without a mesh there is nothing to propagate over.

// RUN: not autopar-opt %s --autopar-propagate-sharding 2>&1 | FileCheck %s --check-prefix=NOMESH
// NOMESH: error: has no dist.mesh (run autopar-apply-plan)
func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
