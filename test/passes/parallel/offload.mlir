// RUN: autopar-opt %s --autopar-dist-offload --split-input-file | FileCheck %s

// With dist.offload = "cpu", each gradient goes to host memory right after
// its reduce-scatter; the loss does not.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[S:.*]] = dist.zero_scatter sum
// CHECK-NEXT: %[[H:.*]] = dist.offload %[[S]] : tensor<2xf32>
// CHECK: return %{{.*}}, %[[H]] : tensor<f32>, tensor<2xf32>
module attributes {dist.offload = "cpu"} {
  dist.mesh @mesh axes = [dp = 2]
  func.func @train_step(%w: tensor<4xf32>)
      -> (tensor<f32> {nn.output = "loss"}, tensor<2xf32> {nn.grad = "w"}) {
    %g = nn.exp %w : tensor<4xf32>
    %s = dist.zero_scatter sum %g on @mesh axes = [dp] : tensor<4xf32> -> tensor<2xf32>
    %l = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    return %l, %s : tensor<f32>, tensor<2xf32>
  }
}

// -----

// Without it, nothing moves.

// CHECK-LABEL: func.func @no_offload
// CHECK-NOT: dist.offload
module {
  func.func @no_offload(%w: tensor<4xf32>) -> (tensor<4xf32> {nn.grad = "w"}) {
    return %w : tensor<4xf32>
  }
}
