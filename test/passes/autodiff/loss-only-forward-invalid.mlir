// RUN: autopar-opt %s --autopar-loss-only-forward --split-input-file --verify-diagnostics

// expected-error @+1 {{no function @forward with a body}}
module {
  func.func @main(%w: tensor<2xf32>) -> tensor<2xf32> {
    return %w : tensor<2xf32>
  }
}

// -----

module {
  // expected-error @+1 {{has several scalar floating-point results; name the loss}}
  func.func @forward(%w: tensor<2xf32> {nn.param = "w"})
      -> (tensor<f32> {nn.output = "l1"}, tensor<f32> {nn.output = "l2"}) {
    %0 = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %0, %0 : tensor<f32>, tensor<f32>
  }
}
