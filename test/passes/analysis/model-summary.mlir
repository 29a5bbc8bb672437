// RUN: autopar-opt %s --split-input-file --autopar-model-summary -o /dev/null | FileCheck %s
// RUN: autopar-opt %s --split-input-file --autopar-model-summary | FileCheck %s --check-prefix=IR
// RUN: autopar-opt %s --split-input-file -o %t.before.mlir
// RUN: autopar-opt %s --split-input-file --autopar-model-summary -o %t.after.mlir > /dev/null
// RUN: diff %t.before.mlir %t.after.mlir

// The summary goes to stdout; the IR is left unchanged: the IR printed after
// the pass is the input (IR prefix) and identical to the IR printed without
// the pass (diff).

// Parameters (nn.param arguments):
//   fc1.weight 16x32xf32  512 elements  2048 bytes
//   fc1.bias   32xf32      32 elements   128 bytes
//   fc2.weight 10x32xf32  320 elements  1280 bytes
//   fc2.bias   10xf32      10 elements    40 bytes
//   mask       4x4xi1      16 elements    16 bytes (buffer, not floating point)
//   pos        8xi64        8 elements    64 bytes (not floating point)
//   scale      2xf16        2 elements     4 bytes
//   total: 7 tensors, 900 elements, 3580 bytes, 5 floating-point
// FLOPs (2 M N K):
//   matmul [4,16] x [16,32]                 2 * 4 * 32 * 16 = 4096
//   gemm   [4,32] x [10,32]^T (K = 32)      2 * 4 * 10 * 32 = 2560
//   gemm   [16,4]^T x [16,32] (K = 16)      2 * 4 * 32 * 16 = 4096
//   total                                                    10752

// CHECK-LABEL: func @forward
// CHECK-NEXT:   inputs: x tensor<4x16xf32>, labels tensor<4xi64>, x_t tensor<16x4xf32>
// CHECK-NEXT:   outputs: loss tensor<f32>, logits tensor<4x10xf32>
// CHECK-NEXT:   parameters: 7 tensors, 900 elements, 3580 bytes (5 floating-point)
// CHECK-NEXT:   ops: 8
// CHECK-NEXT:     func.return 1
// CHECK-NEXT:     nn.add 1
// CHECK-NEXT:     nn.gemm 2
// CHECK-NEXT:     nn.matmul 1
// CHECK-NEXT:     nn.relu 1
// CHECK-NEXT:     nn.softmax_cross_entropy 1
// CHECK-NEXT:     nn.sub 1
// CHECK-NEXT:   matmul FLOPs: 10752
// CHECK-NOT: {{.}}

// IR-LABEL: func.func @forward(
// IR-SAME: %[[W1:[a-z0-9_]+]]: tensor<16x32xf32> {nn.param = "fc1.weight"}, %[[B1:[a-z0-9_]+]]: tensor<32xf32> {nn.param = "fc1.bias"},
// IR-SAME: %[[W2:[a-z0-9_]+]]: tensor<10x32xf32> {nn.param = "fc2.weight"}, %[[B2:[a-z0-9_]+]]: tensor<10xf32> {nn.param = "fc2.bias"},
// IR-SAME: %{{[a-z0-9_]+}}: tensor<4x4xi1> {nn.buffer, nn.param = "mask"}, %{{[a-z0-9_]+}}: tensor<8xi64> {nn.param = "pos"},
// IR-SAME: %{{[a-z0-9_]+}}: tensor<2xf16> {nn.param = "scale"}, %[[X:[a-z0-9_]+]]: tensor<4x16xf32> {nn.input = "x"},
// IR-SAME: %[[L:[a-z0-9_]+]]: tensor<4xi64> {nn.input = "labels"}, %[[XT:[a-z0-9_]+]]: tensor<16x4xf32> {nn.input = "x_t"},
// IR-SAME: %{{[a-z0-9_]+}}: tensor<3xf32>)
// IR-SAME: -> (tensor<f32> {nn.output = "loss"}, tensor<4x10xf32> {nn.output = "logits"}, tensor<4x32xf32>)
// IR-NEXT: %[[MM:.+]] = nn.matmul %[[X]], %[[W1]] : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
// IR-NEXT: %[[H:.+]] = nn.add %[[MM]], %[[B1]] : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// IR-NEXT: %[[R:.+]] = nn.relu %[[H]] : tensor<4x32xf32>
// IR-NEXT: %[[LOGITS:.+]] = nn.gemm %[[R]], %[[W2]], %[[B2]] {trans_b = true} : (tensor<4x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<4x10xf32>
// IR-NEXT: %[[LOSS:.+]] = nn.softmax_cross_entropy %[[LOGITS]], %[[L]] reduction(mean) {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// IR-NEXT: %[[T:.+]] = nn.gemm %[[XT]], %[[W1]] {trans_a = true} : (tensor<16x4xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
// IR-NEXT: %[[D:.+]] = nn.sub %[[T]], %[[MM]] : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
// IR-NEXT: return %[[LOSS]], %[[LOGITS]], %[[D]] : tensor<f32>, tensor<4x10xf32>, tensor<4x32xf32>
func.func @forward(%w1: tensor<16x32xf32> {nn.param = "fc1.weight"},
                   %b1: tensor<32xf32> {nn.param = "fc1.bias"},
                   %w2: tensor<10x32xf32> {nn.param = "fc2.weight"},
                   %b2: tensor<10xf32> {nn.param = "fc2.bias"},
                   %mask: tensor<4x4xi1> {nn.param = "mask", nn.buffer},
                   %pos: tensor<8xi64> {nn.param = "pos"},
                   %scale: tensor<2xf16> {nn.param = "scale"},
                   %x: tensor<4x16xf32> {nn.input = "x"},
                   %labels: tensor<4xi64> {nn.input = "labels"},
                   %xt: tensor<16x4xf32> {nn.input = "x_t"},
                   %unnamed: tensor<3xf32>)
    -> (tensor<f32> {nn.output = "loss"}, tensor<4x10xf32> {nn.output = "logits"},
        tensor<4x32xf32>) {
  %0 = nn.matmul %x, %w1 : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %1 = nn.add %0, %b1 : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %2 = nn.relu %1 : tensor<4x32xf32>
  %3 = nn.gemm %2, %w2, %b2 {trans_b = true} : (tensor<4x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %4 = nn.softmax_cross_entropy %3, %labels reduction(mean) {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %5 = nn.gemm %xt, %w1 {trans_a = true} : (tensor<16x4xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %6 = nn.sub %5, %0 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %4, %3, %6 : tensor<f32>, tensor<4x10xf32>, tensor<4x32xf32>
}

// -----

// No nn.input / nn.output / nn.param attributes: "(none)" and 0 parameters.
// Matmul FLOPs also count batch dims and rank-1 operands:
//   [2,3,4] x [4,5] -> [2,3,5], K = 4: 2 * 30 * 4 = 240
//   [4] x [4,5]     -> [5],     K = 4: 2 *  5 * 4 =  40
// Every function of the module is summarized, in order; a declaration has no
// ops.

// CHECK-LABEL: func @no_attributes
// CHECK-NEXT:   inputs: (none)
// CHECK-NEXT:   outputs: (none)
// CHECK-NEXT:   parameters: 0 tensors, 0 elements, 0 bytes (0 floating-point)
// CHECK-NEXT:   ops: 3
// CHECK-NEXT:     func.return 1
// CHECK-NEXT:     nn.matmul 2
// CHECK-NEXT:   matmul FLOPs: 280
// CHECK-NEXT: func @empty
// CHECK-NEXT:   inputs: (none)
// CHECK-NEXT:   outputs: (none)
// CHECK-NEXT:   parameters: 0 tensors, 0 elements, 0 bytes (0 floating-point)
// CHECK-NEXT:   ops: 1
// CHECK-NEXT:     func.return 1
// CHECK-NEXT:   matmul FLOPs: 0
// CHECK-NEXT: func @declaration
// CHECK-NEXT:   inputs: (none)
// CHECK-NEXT:   outputs: (none)
// CHECK-NEXT:   parameters: 0 tensors, 0 elements, 0 bytes (0 floating-point)
// CHECK-NEXT:   ops: 0
// CHECK-NEXT:   matmul FLOPs: 0
// CHECK-NOT: {{.}}

// IR-LABEL: func.func @no_attributes(
// IR-SAME: %[[A:[a-z0-9_]+]]: tensor<2x3x4xf32>, %[[B:[a-z0-9_]+]]: tensor<4x5xf32>, %[[V:[a-z0-9_]+]]: tensor<4xf32>)
// IR-SAME: -> (tensor<2x3x5xf32>, tensor<5xf32>)
// IR-NEXT: %[[M0:.+]] = nn.matmul %[[A]], %[[B]] : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
// IR-NEXT: %[[M1:.+]] = nn.matmul %[[V]], %[[B]] : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
// IR-NEXT: return %[[M0]], %[[M1]] : tensor<2x3x5xf32>, tensor<5xf32>
// IR-LABEL: func.func @empty()
// IR-NEXT: return
// IR: func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
func.func @no_attributes(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>, %v: tensor<4xf32>)
    -> (tensor<2x3x5xf32>, tensor<5xf32>) {
  %0 = nn.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %1 = nn.matmul %v, %b : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return %0, %1 : tensor<2x3x5xf32>, tensor<5xf32>
}

func.func @empty() {
  return
}

func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
