// RUN: autopar-opt %s --autopar-propagate-sharding --autopar-dist-pipeline-phases | FileCheck %s

// A saved value made by a dist.shard annotation (tensor parallelism's
// pinned inputs, sequence parallelism's gathers) is saved laid out as the
// annotation says, not whole: the weight gradient of the second product
// reads the annotated first product, saved split over dp as the step
// holds it (without its layout it would be gathered over dp and saved
// whole).

// CHECK-LABEL: func.func @step_b(
// CHECK-SAME: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"}
// CHECK-LABEL: func.func @step_f(
// CHECK-SAME: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, nn.saved = "f0"}
// CHECK: %[[S:.*]] = dist.shard
// CHECK: return {{.*}}, %[[S]]
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 1]
  func.func @step(%arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.param = "w"},
                  %arg1: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []]>, nn.param = "v"},
                  %arg2: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.input = "x"},
                  %arg3: tensor<8x4xf32> {nn.output_grad})
      -> (tensor<8x4xf32> {nn.output = "stage_output"},
          tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "w"},
          tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>, nn.grad = "v"})
      attributes {dist.stage = 0 : i64} {
    %0 = nn.matmul %arg2, %arg1 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %s = dist.shard %0 : tensor<8x4xf32> to #dist.sharding<@mesh, [[dp], []]>
    %1 = nn.matmul %s, %arg0 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %2 = nn.transpose %arg0 {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
    %3 = nn.matmul %arg3, %2 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    %4 = nn.transpose %s {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %5 = nn.matmul %4, %arg3 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %6 = nn.transpose %arg2 {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %7 = nn.matmul %6, %3 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %1, %5, %7 : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}
