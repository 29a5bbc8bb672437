// autopar-quantize's one-line errors: a trained weight, a glob that
// matches nothing, a tensor that is not an f32 matrix, double quantization
// of INT8.
// RUN: split-file %s %t
// RUN: not autopar-opt %t/m.mlir --autopar-quantize='weights=t' 2>&1 | FileCheck %t/m.mlir --check-prefix=TRAINED
// RUN: not autopar-opt %t/m.mlir --autopar-quantize='weights=none*' 2>&1 | FileCheck %t/m.mlir --check-prefix=NONE
// RUN: not autopar-opt %t/m.mlir --autopar-quantize='weights=b' 2>&1 | FileCheck %t/m.mlir --check-prefix=VECTOR
// RUN: not autopar-opt %t/m.mlir --autopar-quantize='weights=w kind=int4' 2>&1 | FileCheck %t/m.mlir --check-prefix=KIND
// RUN: not autopar-opt %t/m.mlir --autopar-quantize='weights=w kind=int8 double-quant' 2>&1 | FileCheck %t/m.mlir --check-prefix=DQ-INT8

//--- m.mlir
// TRAINED: error: quantize.weights: 't' is trained; a quantized weight must be frozen (plan frozen, or the base of a LoRA adapter)
// NONE: error: quantize.weights[0]: "none*" matches no initializer of the model
// VECTOR: error: quantize.weights: 'b' is not a float32 weight matrix
// KIND: error: quantize.type: expected "nf4" or "int8", got "int4"
// DQ-INT8: error: quantize.double_quant: true is for type "nf4", got "int8"
module {
  func.func @forward(%w: tensor<4x4xf32> {nn.param = "w", nn.frozen},
                     %t: tensor<4x4xf32> {nn.param = "t"},
                     %b: tensor<4xf32> {nn.param = "b", nn.frozen},
                     %x: tensor<3x4xf32> {nn.input = "x"}) -> tensor<3x4xf32> {
    %0 = nn.matmul %x, %w : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %1 = nn.matmul %0, %t : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
    %2 = nn.add %1, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    return %2 : tensor<3x4xf32>
  }
}
