// autopar-lora's one-line errors: a glob that matches nothing, a matched
// tensor that is no projection weight (a bias, a table read by a gather,
// the left operand of a matmul), an also-train glob that matches nothing,
// a malformed glob.
// RUN: split-file %s %t
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=nothing*' 2>&1 | FileCheck %t/m.mlir --check-prefix=NONE
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=b' 2>&1 | FileCheck %t/m.mlir --check-prefix=BIAS
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=emb' 2>&1 | FileCheck %t/m.mlir --check-prefix=GATHER
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=lhs' 2>&1 | FileCheck %t/m.mlir --check-prefix=LHS
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=w also-train=nothing' 2>&1 | FileCheck %t/m.mlir --check-prefix=ALSO
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=w[' 2>&1 | FileCheck %t/m.mlir --check-prefix=GLOB
// RUN: not autopar-opt %t/m.mlir --autopar-lora='targets=w rank=0' 2>&1 | FileCheck %t/m.mlir --check-prefix=RANK

//--- m.mlir
// NONE: error: lora.targets[0]: "nothing*" matches no initializer of the model
// BIAS: error: lora.targets: 'b' is not a projection weight (a float matrix parameter)
// GATHER: error: lora.targets: 'emb' is not a projection weight: it is used by nn.gather (LoRA adapts the weights of MatMul and Gemm)
// LHS: error: lora.targets: 'lhs' is not a projection weight: it is used by nn.matmul (LoRA adapts the weights of MatMul and Gemm)
// ALSO: error: lora.also_train[0]: "nothing" matches no initializer of the model
// GLOB: error: lora.targets: {{.*}} "w["
// RANK: error: lora.r: expected an integer >= 1, got 0
module {
  func.func @forward(%w: tensor<4x4xf32> {nn.param = "w"},
                     %b: tensor<4xf32> {nn.param = "b"},
                     %emb: tensor<8x4xf32> {nn.param = "emb"},
                     %lhs: tensor<3x4xf32> {nn.param = "lhs"},
                     %idx: tensor<3xi64> {nn.input = "idx"}) -> tensor<3x4xf32> {
    %e = nn.gather %emb, %idx {axis = 0 : i64} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %0 = nn.matmul %e, %w : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %1 = nn.add %0, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    %2 = nn.matmul %lhs, %w : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %3 = nn.add %1, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    return %3 : tensor<3x4xf32>
  }
}
