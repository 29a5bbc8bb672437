// RUN: autopar-opt %s | FileCheck %s

// The dist.* discardable attributes (DistBase.td names them,
// dialects/parallel/DistDialectAttrs.cpp verifies them) in their places:
// the module's ZeRO stage, offload target, bucket size, model FLOPs and
// pipeline schedule; a function's pipeline, phase and stage; an op's
// shardings, bucket and stage; arguments' and results' shardings, ZeRO
// marks and block types. See attrs-invalid.mlir for the errors.

// CHECK: module attributes {dist.bucket_bytes = 1024 : i64, dist.model_flops = 96 : i64, dist.offload = "cpu", dist.pipeline_schedule = {actions = [array<i32: 0, 0, 0, 1, 0, 0>], ranks = 1 : i64, schedule = "gpipe", transfers = [array<i32>]}, dist.zero_stage = 3 : i64}
module attributes {dist.zero_stage = 3 : i64, dist.offload = "cpu", dist.bucket_bytes = 1024 : i64, dist.model_flops = 96 : i64, dist.pipeline_schedule = {schedule = "gpipe", ranks = 1 : i64, actions = [array<i32: 0, 0, 0, 1, 0, 0>], transfers = [array<i32>]}} {
  dist.mesh @mesh axes = [dp = 2]
  // CHECK: func.func @step(%{{.*}}: tensor<4xf32> {dist.block_type = tensor<2x4xf32>, dist.sharding = #dist.sharding<@mesh, {{\[}}[dp]]>, dist.zero})
  // CHECK-SAME: -> (tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, {{\[}}[]]>, dist.zero})
  // CHECK-SAME: attributes {dist.phase = "forward", dist.pipeline = {layers = 2 : i64}, dist.stage = 0 : i64}
  func.func @step(%w: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp]]>, dist.zero, dist.block_type = tensor<2x4xf32>})
      -> (tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [[]]>, dist.zero})
      attributes {dist.phase = "forward", dist.stage = 0 : i64, dist.pipeline = {layers = 2 : i64}} {
    // CHECK: nn.concat {{.*}}dist.bucket = 0 : i64, dist.shardings = [#dist.sharding<@mesh, {{\[}}[]]>], dist.stage = 1 : i64
    %0 = nn.concat %w, %w {axis = 0 : i64, dist.bucket = 0 : i64, dist.shardings = [#dist.sharding<@mesh, [[]]>], dist.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
