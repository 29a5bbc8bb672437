// RUN: autopar-opt %s --autopar-dist-annotate="dp=4" --split-input-file --verify-diagnostics
// RUN: not autopar-opt %s --autopar-dist-annotate="dp=2 zero-stage=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not autopar-opt %s --autopar-dist-annotate="dp=2 offload=cpu" 2>&1 | FileCheck %s --check-prefix=OFFLOAD
// RUN: not autopar-opt %s --autopar-dist-annotate="dp=0" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not autopar-opt %s --autopar-dist-annotate="dp=2 zero-stage=2 defer-reduction=true" 2>&1 | FileCheck %s --check-prefix=DEFER

// STAGE: error: zero-stage must be 0 to 3, got 4
// OFFLOAD: error: offload = cpu needs a ZeRO stage of 1 or more
// DP: error: dp must be at least 1, got 0
// DEFER: error: defer-reduction is for ZeRO stage 0 (stage 1 always defers, stages 2 and 3 shard the gradients as they are reduced)

// expected-error @+1 {{input 'x': batch dim 6 is not divisible by mesh.dp = 4}}
func.func @f(%x: tensor<6x4xf32> {nn.input = "x"}) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

// -----

// expected-error @+1 {{already has a dist.mesh}}
module {
  dist.mesh @m axes = [dp = 4]
}
