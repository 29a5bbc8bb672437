// Bad options of autopar-apply-plan, each one line naming the plan key;
// one case per file of split-file.
// RUN: split-file %s %t
// RUN: autopar-opt %t/axis.mlir --autopar-apply-plan='dp=0' --verify-diagnostics
// RUN: autopar-opt %t/shard-size.mlir --autopar-apply-plan='dp=6 shard-size=4' --verify-diagnostics
// RUN: autopar-opt %t/glob.mlir --autopar-apply-plan='frozen=w[' --verify-diagnostics
// RUN: autopar-opt %t/padding-entry.mlir --autopar-apply-plan='padding-idx=wte' --verify-diagnostics
// RUN: autopar-opt %t/unmatched.mlir --autopar-apply-plan='frozen=w,decoder.*' --verify-diagnostics
// RUN: autopar-opt %t/rows-outside.mlir --autopar-apply-plan='frozen=v,w[2,4:9]' --verify-diagnostics
// RUN: autopar-opt %t/rows-scalar.mlir --autopar-apply-plan='frozen=s[0]' --verify-diagnostics
// RUN: autopar-opt %t/rows-nothing.mlir --autopar-apply-plan='frozen=x[0]' --verify-diagnostics
// RUN: autopar-opt %t/all-frozen.mlir --autopar-apply-plan='frozen=*' --verify-diagnostics
// RUN: autopar-opt %t/mesh-exists.mlir --autopar-apply-plan --verify-diagnostics
// RUN: autopar-opt %t/padding-unmatched.mlir --autopar-apply-plan='padding-idx=w=0' --verify-diagnostics
// RUN: autopar-opt %t/padding-outside.mlir --autopar-apply-plan='padding-idx=wte=8' --verify-diagnostics

//--- axis.mlir
// expected-error @+1 {{mesh.dp: expected an integer >= 1, got 0}}
module {
}

//--- shard-size.mlir
// expected-error @+1 {{zero.shard_size: 4 does not divide mesh.dp = 6}}
module {
}

//--- glob.mlir
// expected-error @+1 {{frozen: unterminated '[' in glob "w["}}
module {
}

//--- padding-entry.mlir
// expected-error @+1 {{padding-idx: expected GLOB=ROW (a row >= 0), got "wte"}}
module {
}

//--- unmatched.mlir
// expected-error @+1 {{frozen[1]: "decoder.*" matches no initializer of the model}}
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}, %v: tensor<4xf32> {nn.param = "v"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

//--- rows-outside.mlir
// A row list outside dim 0, and rows of a scalar.
// expected-error @+1 {{frozen[1]: "w[2,4:9]": row 8 is outside 'w' (8 rows)}}
module {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}, %v: tensor<4xf32> {nn.param = "v"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

//--- rows-scalar.mlir
// expected-error @+1 {{frozen[0]: "s[0]": row 0 is outside 's' (0 rows: a scalar)}}
module {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}, %s: tensor<f32> {nn.param = "s"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

//--- rows-nothing.mlir
// Rows of no initializer: the glob before the row list matches nothing.
// expected-error @+1 {{frozen[0]: "x[0]" matches no initializer of the model}}
module {
  func.func @forward(%w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<8x2xf32> {
    return %w : tensor<8x2xf32>
  }
}

//--- all-frozen.mlir
// expected-error @+1 {{frozen: every parameter of the model is frozen: nothing to train}}
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

//--- mesh-exists.mlir
// expected-error @+1 {{the module already has a dist.mesh}}
module {
  dist.mesh @mesh axes = [dp = 2]
}

//--- padding-unmatched.mlir
// expected-error @+1 {{padding_idx.w: matches no embedding table (a parameter that a Gather reads rows of)}}
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

//--- padding-outside.mlir
// expected-error @+1 {{padding_idx.wte: row 8 is outside 'wte' (8 rows)}}
module {
  func.func @forward(%wte: tensor<8x4xf32> {nn.param = "wte"}, %idx: tensor<2x4xi64> {nn.input = "idx"}) -> tensor<2x4x4xf32> {
    %0 = nn.gather %wte, %idx {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
    return %0 : tensor<2x4x4xf32>
  }
}
