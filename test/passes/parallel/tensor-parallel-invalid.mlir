// Negative: the tensor-parallel axis must be on the mesh.

// RUN: not autopar-opt %s --autopar-dist-tensor-parallel=axis=mp 2>&1 | FileCheck %s
// CHECK: error: the mesh has no axis 'mp'
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
