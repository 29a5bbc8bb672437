// The plan's quantized frozen weights (autopar-quantize;
// compiler/plan/Pipeline.cpp gives it the plan's quantize): each weight
// becomes its codes and scales, and each use reads a dequantize placed
// right before it; autopar-dequantize-at-use gives each use its own copy
// again after autodiff and CSE. Error cases in quantize-invalid.mlir.
// RUN: split-file %s %t
// RUN: autopar-opt %t/m.mlir --autopar-quantize='weights=q.weight,c.weight kind=nf4 block-size=16' | FileCheck %t/m.mlir --check-prefix=NF4
// RUN: autopar-opt %t/m.mlir --autopar-quantize='weights=q.weight,c.weight kind=int8' | FileCheck %t/m.mlir --check-prefix=INT8
// RUN: autopar-opt %t/m.mlir --autopar-quantize='weights=q.weight kind=nf4 block-size=16 double-quant' | FileCheck %t/m.mlir --check-prefix=DQ
// RUN: autopar-opt %t/uses.mlir --autopar-dequantize-at-use | FileCheck %t/uses.mlir

//--- m.mlir
// kind nf4: 24 elements in 12 code bytes, blocks of 16: 2 scales. The Linear
// weight q [6, 4] is read through its transpose, the Conv1D weight c
// [4, 6] directly; t is not quantized.
// NF4-LABEL: func.func @forward
// NF4-SAME: %arg0: tensor<12xi8> {nn.frozen, nn.logical_type = tensor<12xi8>, nn.param = "q.weight.quant_codes", nn.quant_role = "codes", nn.quantized = "q.weight"}
// NF4-SAME: %arg1: tensor<2xf32> {nn.frozen, nn.logical_type = tensor<2xf32>, nn.param = "q.weight.quant_absmax", nn.quant_role = "absmax", nn.quantized = "q.weight"}
// NF4-SAME: %arg2: tensor<12xi8> {{{.*}}nn.param = "c.weight.quant_codes", nn.quant_role = "codes", nn.quantized = "c.weight"}
// NF4-SAME: %arg4: tensor<4x6xf32> {nn.logical_type = tensor<4x6xf32>, nn.param = "t.weight"}
// NF4:      %[[Q:.*]] = nn.dequantize %arg0, %arg1 {axis = 0 : i64, block_size = 16 : i64, kind = "nf4"} : (tensor<12xi8>, tensor<2xf32>) -> tensor<6x4xf32>
// NF4-NEXT: %[[QT:.*]] = nn.transpose %[[Q]] {perm = array<i64: 1, 0>}
// NF4-NEXT: nn.matmul %arg5, %[[QT]]
// NF4-NEXT: %[[C:.*]] = nn.dequantize %arg2, %arg3 {axis = 0 : i64, block_size = 16 : i64, kind = "nf4"} : (tensor<12xi8>, tensor<2xf32>) -> tensor<4x6xf32>
// NF4-NEXT: nn.matmul %arg5, %[[C]]
// NF4-NEXT: nn.matmul %arg5, %arg4
// kind int8: one code per element, one scale per output feature: q's rows
// (axis 0), c's columns (axis 1, nn.quant_axis1 on its scales).
// INT8-LABEL: func.func @forward
// INT8-SAME: %arg0: tensor<6x4xi8> {{{.*}}nn.param = "q.weight.quant_codes"
// INT8-SAME: %arg1: tensor<6xf32> {{{.*}}nn.param = "q.weight.quant_absmax"
// INT8-SAME: %arg2: tensor<4x6xi8> {{{.*}}nn.param = "c.weight.quant_codes"
// INT8-SAME: %arg3: tensor<6xf32> {{{.*}}nn.param = "c.weight.quant_absmax", nn.quant_axis1, nn.quant_role = "absmax", nn.quantized = "c.weight"}
// INT8: nn.dequantize %arg0, %arg1 {axis = 0 : i64, block_size = 64 : i64, kind = "int8"} : (tensor<6x4xi8>, tensor<6xf32>) -> tensor<6x4xf32>
// INT8: nn.dequantize %arg2, %arg3 {axis = 1 : i64, block_size = 64 : i64, kind = "int8"} : (tensor<4x6xi8>, tensor<6xf32>) -> tensor<4x6xf32>
// double-quant: the 2 scales are i8 codes of the dynamic map, and a third
// parameter holds their offset and one scale per 256 of them (2 floats).
// DQ-LABEL: func.func @forward
// DQ-SAME: %arg0: tensor<12xi8> {{{.*}}nn.param = "q.weight.quant_codes", nn.quant_role = "codes"
// DQ-SAME: %arg1: tensor<2xi8> {nn.frozen, nn.logical_type = tensor<2xi8>, nn.param = "q.weight.quant_absmax", nn.quant_role = "absmax", nn.quantized = "q.weight"}
// DQ-SAME: %arg2: tensor<2xf32> {nn.frozen, nn.logical_type = tensor<2xf32>, nn.param = "q.weight.quant_state2", nn.quant_role = "state2", nn.quantized = "q.weight"}
// DQ-SAME: %arg3: tensor<4x6xf32> {{{.*}}nn.param = "c.weight"}
// DQ: nn.dequantize %arg0, %arg1, %arg2 {axis = 0 : i64, block_size = 16 : i64, kind = "nf4"} : (tensor<12xi8>, tensor<2xi8>, tensor<2xf32>) -> tensor<6x4xf32>
module {
  func.func @forward(%w: tensor<6x4xf32> {nn.param = "q.weight", nn.frozen, nn.logical_type = tensor<6x4xf32>},
                     %c: tensor<4x6xf32> {nn.param = "c.weight", nn.frozen, nn.logical_type = tensor<4x6xf32>},
                     %t: tensor<4x6xf32> {nn.param = "t.weight", nn.logical_type = tensor<4x6xf32>},
                     %x: tensor<3x4xf32> {nn.input = "x"}) -> tensor<3x6xf32> {
    %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
    %0 = nn.matmul %x, %wt : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
    %1 = nn.matmul %x, %c : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
    %2 = nn.matmul %x, %t : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
    %3 = nn.add %0, %1 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
    %4 = nn.add %3, %2 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
    return %4 : tensor<3x6xf32>
  }
}

//--- uses.mlir
// One dequantize read by the forward's matmul and the backward's: each
// gets its own copy (no dequantized weight lives from one to the other).
// CHECK-LABEL: func.func @step
// CHECK:      %[[A:.*]] = nn.dequantize %arg0, %arg1
// CHECK-NEXT: %[[Y:.*]] = nn.matmul %arg2, %[[A]]
// CHECK-NEXT: %[[B:.*]] = nn.dequantize %arg0, %arg1
// CHECK-NEXT: %[[G:.*]] = nn.transpose %[[B]]
// CHECK-NOT:  nn.dequantize
module {
  func.func @step(%codes: tensor<8xi8>, %absmax: tensor<1xf32>, %x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = nn.dequantize %codes, %absmax {axis = 0 : i64, block_size = 64 : i64, kind = "nf4"} : (tensor<8xi8>, tensor<1xf32>) -> tensor<4x4xf32>
    %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = nn.matmul %dy, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y, %dx : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
