// RUN: autopar-opt %s --autopar-annotate-sharding --split-input-file --verify-diagnostics
// RUN: not autopar-opt %s --autopar-annotate-sharding="zero-stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not autopar-opt %s --autopar-annotate-sharding="offload=cpu" 2>&1 | FileCheck %s --check-prefix=OFFLOAD
// RUN: not autopar-opt %s --autopar-annotate-sharding="zero-stage=2 defer-reduction=true" 2>&1 | FileCheck %s --check-prefix=DEFER

// STAGE: error: zero-stage must be 0 to 3, got 4
// OFFLOAD: error: offload = cpu needs a ZeRO stage of 1 or more
// DEFER: error: defer-reduction is for ZeRO stage 0 (stage 1 always defers, stages 2 and 3 shard the gradients as they are reduced)

dist.mesh @mesh axes = [dp = 4, pp = 1, tp = 1]
// expected-error @+1 {{input 'x': batch dim 6 is not divisible by mesh.dp = 4}}
func.func @f(%x: tensor<6x4xf32> {nn.input = "x"}) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

// -----

// The mesh comes from autopar-apply-plan.
// expected-error @+1 {{has no dist.mesh (run autopar-apply-plan)}}
module {
  func.func @f(%x: tensor<6x4xf32> {nn.input = "x"}) -> tensor<6x4xf32> {
    return %x : tensor<6x4xf32>
  }
}

// -----

// expected-error @+1 {{the mesh has no dp axis}}
module {
  dist.mesh @mesh axes = [tp = 2]
}

// -----

// Only dp, pp, cp and tp are known: any other axis must have size 1.
// expected-error @+1 {{mesh axis 'ep' has size 2: only the dpr, dp, pp, cp and tp axes are partitioned yet}}
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, ep = 2]
}

// -----

// A replica axis (hybrid sharding's) without ZeRO.
// expected-error @+1 {{a dpr (replica) axis needs a ZeRO stage of 1 or more (it is hybrid sharding's)}}
module {
  dist.mesh @mesh axes = [dpr = 2, dp = 2, pp = 1, tp = 1]
}

// -----

// Context parallelism splits the inputs' sequence dim: cp must divide it.
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 4, tp = 1]
  // expected-error @+1 {{input 'ids': sequence dim 6 is not divisible by mesh.cp = 4}}
  func.func @step(%ids: tensor<2x6xi64> {nn.input = "ids"}) -> tensor<2x6xi64> {
    return %ids : tensor<2x6xi64>
  }
}
