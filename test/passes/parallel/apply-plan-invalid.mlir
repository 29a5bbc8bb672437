// RUN: autopar-opt %s --autopar-apply-plan --split-input-file --verify-diagnostics

// expected-error @+1 {{the module has no 'autopar.plan' attribute (the plan; autopar compile writes it)}}
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{autopar.plan: mesh.dp: expected an integer >= 1, got 0}}
module attributes {autopar.plan = {mesh = {dp = 0 : i64}}} {
}

// -----

// expected-error @+1 {{'autopar.plan' must be a dictionary of strings, booleans, i64 and f64 numbers, arrays and dictionaries}}
module attributes {autopar.plan = {mesh = {dp = 2 : i32}}} {
}

// -----

// expected-error @+1 {{frozen[1]: "decoder.*" matches no initializer of the model}}
module attributes {autopar.plan = {frozen = ["w", "decoder.*"]}} {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}, %v: tensor<4xf32> {nn.param = "v"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// A row list outside dim 0, and rows of a scalar.
// expected-error @+1 {{frozen[1]: "w[2,4:9]": row 8 is outside 'w' (8 rows)}}
module attributes {autopar.plan = {frozen = ["v", "w[2,4:9]"]}} {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}, %v: tensor<4xf32> {nn.param = "v"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

// -----

// expected-error @+1 {{frozen[0]: "s[0]": row 0 is outside 's' (0 rows: a scalar)}}
module attributes {autopar.plan = {frozen = ["s[0]"]}} {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}, %s: tensor<f32> {nn.param = "s"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

// -----

// Rows of no initializer: the glob before the row list matches nothing.
// expected-error @+1 {{frozen[0]: "x[0]" matches no initializer of the model}}
module attributes {autopar.plan = {frozen = ["x[0]"]}} {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

// -----

// expected-error @+1 {{frozen: every parameter of the model is frozen: nothing to train}}
module attributes {autopar.plan = {frozen = ["*"]}} {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{the module already has a dist.mesh}}
module attributes {autopar.plan = {}} {
  dist.mesh @mesh axes = [dp = 2]
}

// -----

// expected-error @+1 {{padding_idx.w: matches no embedding table (a parameter that a Gather reads rows of)}}
module attributes {autopar.plan = {padding_idx = {w = 0 : i64}}} {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{padding_idx.wte: row 8 is outside 'wte' (8 rows)}}
module attributes {autopar.plan = {padding_idx = {wte = 8 : i64}}} {
  func.func @forward(%wte: tensor<8x4xf32> {nn.param = "wte"}, %idx: tensor<2x4xi64> {nn.input = "idx"}) -> tensor<2x4x4xf32> {
    %0 = nn.gather %wte, %idx {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
    return %0 : tensor<2x4x4xf32>
  }
}
