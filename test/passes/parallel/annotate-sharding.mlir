// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=0" --split-input-file | FileCheck %s --check-prefix=Z0
// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=1 bucket-mb=1" --split-input-file | FileCheck %s --check-prefix=Z1
// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=3 offload=cpu" --split-input-file | FileCheck %s --check-prefix=Z3
// RUN: autopar-opt %s --autopar-annotate-sharding="zero-stage=0 defer-reduction=true" --split-input-file | FileCheck %s --check-prefix=DEFER

// Inputs split their batch dim over dp; parameters are replicated; the loss
// is wanted replicated; gradients replicated (stage 0), partial (stage 1:
// the runtime reduce-scatters them once per step) or flat shards (stages 2
// and 3, `dist.zero`). At stage 3 trainable parameters are flat shards too;
// the frozen one (no gradient) stays replicated. The module records the
// step's model FLOPs before partitioning (the matmul and the gemm, 2 x 256).

// Z0: module attributes {dist.bucket_bytes = 26214400 : i64, dist.model_flops = 512 : i64, dist.zero_stage = 0 : i64}
// Z0: dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// Z0-LABEL: func.func @train_step
// Z0-SAME: %arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []]>, nn.param = "w"}
// Z0-SAME: %arg1: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]]>, nn.param = "frozen"}
// Z0-SAME: %arg2: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.input = "x"}
// Z0-SAME: -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, []>, nn.output = "loss"}, tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []]>, nn.grad = "w"})

// Z1: module attributes {dist.bucket_bytes = 1048576 : i64, dist.model_flops = 512 : i64, dist.zero_stage = 1 : i64}
// Z1-LABEL: func.func @train_step
// Z1-SAME: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "w"}

// Stage 0 with deferred reduction (gradient accumulation): partial, as Z1.
// DEFER: module attributes {dist.bucket_bytes = 26214400 : i64, dist.model_flops = 512 : i64, dist.zero_stage = 0 : i64}
// DEFER-LABEL: func.func @train_step
// DEFER-SAME: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = [dp]>, nn.grad = "w"}

// Z3: module attributes {dist.bucket_bytes = 26214400 : i64, dist.model_flops = 512 : i64, dist.offload = "cpu", dist.zero_stage = 3 : i64}
// Z3-LABEL: func.func @train_step
// Z3-SAME: %arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []]>, dist.zero, nn.param = "w"}
// Z3-SAME: %arg1: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]]>, nn.param = "frozen"}
// Z3-SAME: tensor<4x4xf32> {dist.zero, nn.grad = "w"}
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @train_step(%w: tensor<4x4xf32> {nn.param = "w"},
                      %f: tensor<4xf32> {nn.param = "frozen"},
                      %x: tensor<8x4xf32> {nn.input = "x"})
    -> (tensor<f32> {nn.output = "loss"}, tensor<4x4xf32> {nn.grad = "w"}) {
  %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.add %0, %f : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %2 = nn.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x4xf32> -> tensor<f32>
  %3 = nn.gemm %x, %0 {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %2, %3 : tensor<f32>, tensor<4x4xf32>
}
