// RUN: autopar-opt %s | autopar-opt | FileCheck %s
// RUN: autopar-opt %s --mlir-print-op-generic | autopar-opt | FileCheck %s

// Round trip of every nn op (custom and generic form) and of the func
// argument/result attributes of the nn dialect.

//===----------------------------------------------------------------------===//
// Function argument and result attributes
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attributes(
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<4x4xf32> {nn.frozen_rows = array<i64: 0, 1, 2, 4>, nn.param = "h.0.attn.w"},
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<4x4xf32> {nn.init_from = "h.0.attn.w", nn.param = "lm_head.w"},
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<1x1x8x8xi1> {nn.buffer, nn.param = "mask"},
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<2x8xi64> {nn.input = "input_ids"},
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<2x8xi64>)
// CHECK-SAME: -> (tensor<2x8xi64> {nn.output = "ids"}, tensor<4x4xf32> {nn.output = "w"}, tensor<4x4xf32>)
func.func @attributes(%w: tensor<4x4xf32> {nn.param = "h.0.attn.w", nn.frozen_rows = array<i64: 0, 1, 2, 4>},
                      %tied: tensor<4x4xf32> {nn.param = "lm_head.w", nn.init_from = "h.0.attn.w"},
                      %mask: tensor<1x1x8x8xi1> {nn.param = "mask", nn.buffer},
                      %ids: tensor<2x8xi64> {nn.input = "input_ids"},
                      %plain: tensor<2x8xi64>)
    -> (tensor<2x8xi64> {nn.output = "ids"}, tensor<4x4xf32> {nn.output = "w"}, tensor<4x4xf32>) {
  return %ids, %w, %tied : tensor<2x8xi64>, tensor<4x4xf32>, tensor<4x4xf32>
}

// A pipeline stage's training step: the activation it receives, the
// gradient of its output it is sent, the gradient it sends back.
// CHECK-LABEL: func.func @stage_attributes(
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<2x4xf32> {nn.stage_input},
// CHECK-SAME: %{{[a-z0-9_]+}}: tensor<2x4xf32> {nn.output_grad})
// CHECK-SAME: -> (tensor<2x4xf32> {nn.input_grad})
func.func @stage_attributes(%x: tensor<2x4xf32> {nn.stage_input},
                            %g: tensor<2x4xf32> {nn.output_grad})
    -> (tensor<2x4xf32> {nn.input_grad}) {
  return %g : tensor<2x4xf32>
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @constant(
// CHECK: nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: nn.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK: nn.constant dense<true> : tensor<2x2xi1>
// CHECK: nn.constant dense<{{\[\[}}1.000000e+00, 2.500000e+00]]> : tensor<1x2xf16>
// CHECK: nn.constant dense<[1.000000e+00, -2.500000e+00]> : tensor<2xbf16>
// CHECK: nn.constant dense<7> : tensor<2x3xi32>
func.func @constant() {
  %0 = nn.constant dense<1.0> : tensor<f32>
  %1 = nn.constant dense<[1, 2, 3]> : tensor<3xi64>
  %2 = nn.constant dense<true> : tensor<2x2xi1>
  %3 = nn.constant dense<[[1.0, 2.5]]> : tensor<1x2xf16>
  %4 = nn.constant dense<[1.0, -2.5]> : tensor<2xbf16>
  %5 = nn.constant dense<7> : tensor<2x3xi32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @unary_float(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x4xf32>, [[H:%[a-z0-9_]+]]: tensor<3xf16>)
// CHECK: nn.neg [[X]] : tensor<2x4xf32>
// CHECK: nn.sqrt [[X]] : tensor<2x4xf32>
// CHECK: nn.erf [[X]] : tensor<2x4xf32>
// CHECK: nn.tanh [[X]] : tensor<2x4xf32>
// CHECK: nn.exp [[X]] : tensor<2x4xf32>
// CHECK: nn.log [[X]] : tensor<2x4xf32>
// CHECK: nn.reciprocal [[X]] : tensor<2x4xf32>
// CHECK: nn.relu [[X]] : tensor<2x4xf32>
// CHECK: nn.sigmoid [[X]] : tensor<2x4xf32>
// CHECK: nn.identity [[X]] : tensor<2x4xf32>
// CHECK: [[E:%[0-9]+]] = nn.exp [[H]] : tensor<3xf16>
// CHECK: nn.sqrt [[E]] : tensor<3xf16>
func.func @unary_float(%x: tensor<2x4xf32>, %h: tensor<3xf16>) {
  %0 = nn.neg %x : tensor<2x4xf32>
  %1 = nn.sqrt %x : tensor<2x4xf32>
  %2 = nn.erf %x : tensor<2x4xf32>
  %3 = nn.tanh %x : tensor<2x4xf32>
  %4 = nn.exp %x : tensor<2x4xf32>
  %5 = nn.log %x : tensor<2x4xf32>
  %6 = nn.reciprocal %x : tensor<2x4xf32>
  %7 = nn.relu %x : tensor<2x4xf32>
  %8 = nn.sigmoid %x : tensor<2x4xf32>
  %9 = nn.identity %x : tensor<2x4xf32>
  %10 = nn.exp %h : tensor<3xf16>
  %11 = nn.sqrt %10 : tensor<3xf16>
  return
}

// neg and relu accept integers, identity any element type.
// CHECK-LABEL: func.func @unary_other(
// CHECK-SAME: [[I:%[a-z0-9_]+]]: tensor<3xi32>, [[B:%[a-z0-9_]+]]: tensor<2x2xi1>, [[S:%[a-z0-9_]+]]: tensor<f32>)
// CHECK: nn.neg [[I]] : tensor<3xi32>
// CHECK: nn.relu [[I]] : tensor<3xi32>
// CHECK: nn.identity [[B]] : tensor<2x2xi1>
// CHECK: nn.tanh [[S]] : tensor<f32>
func.func @unary_other(%i: tensor<3xi32>, %b: tensor<2x2xi1>, %s: tensor<f32>) {
  %0 = nn.neg %i : tensor<3xi32>
  %1 = nn.relu %i : tensor<3xi32>
  %2 = nn.identity %b : tensor<2x2xi1>
  %3 = nn.tanh %s : tensor<f32>
  return
}

// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x4xf32>)
// CHECK: nn.gelu [[X]] approximate(none) : tensor<2x4xf32>
// CHECK: nn.gelu [[X]] approximate(tanh) : tensor<2x4xf32>
func.func @gelu(%x: tensor<2x4xf32>) {
  %0 = nn.gelu %x approximate(none) : tensor<2x4xf32>
  %1 = nn.gelu %x approximate(tanh) : tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @dropout(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x4xf32>, [[O:%[a-z0-9_]+]]: tensor<i64>)
// CHECK: nn.dropout [[X]] ratio(1.000000e-01) site(0) : tensor<2x4xf32>
// CHECK: nn.dropout [[X]] offsets([[O]], [[O]] : tensor<i64>, tensor<i64>) ratio(5.000000e-01) site(7) {logical_shape = array<i64: 4, 8>} : tensor<2x4xf32>
func.func @dropout(%x: tensor<2x4xf32>, %o: tensor<i64>) {
  %0 = nn.dropout %x ratio(0.1) site(0) : tensor<2x4xf32>
  %1 = nn.dropout %x offsets(%o, %o : tensor<i64>, tensor<i64>) ratio(0.5) site(7) {logical_shape = array<i64: 4, 8>} : tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @dequantize(
// CHECK: nn.dequantize %{{.*}}, %{{.*}} {axis = 0 : i64, block_size = 4 : i64, kind = "nf4"} : (tensor<4xi8>, tensor<2xf32>) -> tensor<2x4xf32>
// CHECK: nn.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, block_size = 64 : i64, kind = "int8"} : (tensor<2x4xi8>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: nn.dequantize %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64, block_size = 4 : i64, kind = "nf4"} : (tensor<4xi8>, tensor<2xi8>, tensor<2xf32>) -> tensor<2x4xf32>
func.func @dequantize(%c: tensor<4xi8>, %m: tensor<2xf32>, %c8: tensor<2x4xi8>, %m8: tensor<4xf32>, %q: tensor<2xi8>, %s: tensor<2xf32>) {
  %0 = nn.dequantize %c, %m {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<4xi8>, tensor<2xf32>) -> tensor<2x4xf32>
  %1 = nn.dequantize %c8, %m8 {kind = "int8", block_size = 64 : i64, axis = 1 : i64} : (tensor<2x4xi8>, tensor<4xf32>) -> tensor<2x4xf32>
  %2 = nn.dequantize %c, %q, %s {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<4xi8>, tensor<2xi8>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @binary(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<2x3xf32>, [[B:%[a-z0-9_]+]]: tensor<3xf32>, [[C:%[a-z0-9_]+]]: tensor<4x1x3xf32>, [[S:%[a-z0-9_]+]]: tensor<f32>, [[I:%[a-z0-9_]+]]: tensor<2x1xi64>, [[J:%[a-z0-9_]+]]: tensor<1x5xi64>)
// CHECK: [[ADD:%[0-9]+]] = nn.add [[A]], [[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: nn.sub [[B]], [[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: nn.mul [[A]], [[C]] : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
// CHECK: nn.div [[ADD]], [[S]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: nn.pow [[S]], [[A]] : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: nn.pow [[S]], [[S]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: nn.add [[I]], [[J]] : (tensor<2x1xi64>, tensor<1x5xi64>) -> tensor<2x5xi64>
// CHECK: nn.div [[I]], [[I]] : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x1xi64>
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<4x1x3xf32>,
                  %s: tensor<f32>, %i: tensor<2x1xi64>, %j: tensor<1x5xi64>) {
  %0 = nn.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.sub %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = nn.mul %a, %c : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  %3 = nn.div %0, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %4 = nn.pow %s, %a : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = nn.pow %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %6 = nn.add %i, %j : (tensor<2x1xi64>, tensor<1x5xi64>) -> tensor<2x5xi64>
  %7 = nn.div %i, %i : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x1xi64>
  return
}

// CHECK-LABEL: func.func @compare(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<2x3xf32>, [[B:%[a-z0-9_]+]]: tensor<3xf32>, [[I:%[a-z0-9_]+]]: tensor<4xi32>, [[J:%[a-z0-9_]+]]: tensor<i32>)
// CHECK: nn.compare eq, [[A]], [[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK: nn.compare ne, [[B]], [[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK: nn.compare lt, [[A]], [[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK: nn.compare le, [[I]], [[J]] : (tensor<4xi32>, tensor<i32>) -> tensor<4xi1>
// CHECK: nn.compare gt, [[J]], [[I]] : (tensor<i32>, tensor<4xi32>) -> tensor<4xi1>
// CHECK: nn.compare ge, [[J]], [[J]] : (tensor<i32>, tensor<i32>) -> tensor<i1>
func.func @compare(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4xi32>,
                   %j: tensor<i32>) {
  %0 = nn.compare eq, %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %1 = nn.compare ne, %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %2 = nn.compare lt, %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = nn.compare le, %i, %j : (tensor<4xi32>, tensor<i32>) -> tensor<4xi1>
  %4 = nn.compare gt, %j, %i : (tensor<i32>, tensor<4xi32>) -> tensor<4xi1>
  %5 = nn.compare ge, %j, %j : (tensor<i32>, tensor<i32>) -> tensor<i1>
  return
}

// CHECK-LABEL: func.func @where(
// CHECK-SAME: [[C:%[a-z0-9_]+]]: tensor<1x1x4x4xi1>, [[X:%[a-z0-9_]+]]: tensor<2x3x4x4xf32>, [[S:%[a-z0-9_]+]]: tensor<f32>, [[V:%[a-z0-9_]+]]: tensor<4xi1>)
// CHECK: nn.where [[C]], [[X]], [[S]] : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
// CHECK: nn.where [[C]], [[S]], [[S]] : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
// CHECK: nn.where [[V]], [[V]], [[V]] : (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
func.func @where(%c: tensor<1x1x4x4xi1>, %x: tensor<2x3x4x4xf32>, %s: tensor<f32>,
                 %v: tensor<4xi1>) {
  %0 = nn.where %c, %x, %s : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %1 = nn.where %c, %s, %s : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %2 = nn.where %v, %v, %v : (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @cast(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x3xf32>, [[I:%[a-z0-9_]+]]: tensor<4xi64>)
// CHECK: nn.cast [[X]] : tensor<2x3xf32> to tensor<2x3xi64>
// CHECK: nn.cast [[X]] : tensor<2x3xf32> to tensor<2x3xi1>
// CHECK: nn.cast [[X]] : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK: nn.cast [[I]] : tensor<4xi64> to tensor<4xf32>
// CHECK: nn.cast [[I]] : tensor<4xi64> to tensor<4xi64>
func.func @cast(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  %0 = nn.cast %x : tensor<2x3xf32> to tensor<2x3xi64>
  %1 = nn.cast %x : tensor<2x3xf32> to tensor<2x3xi1>
  %2 = nn.cast %x : tensor<2x3xf32> to tensor<2x3xf16>
  %3 = nn.cast %i : tensor<4xi64> to tensor<4xf32>
  %4 = nn.cast %i : tensor<4xi64> to tensor<4xi64>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x4x8xf32>, [[I:%[a-z0-9_]+]]: tensor<3x5xi32>)
// CHECK: nn.reduce_sum [[X]] {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK: nn.reduce_sum [[X]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4x8xf32> -> tensor<8xf32>
// CHECK: nn.reduce_sum [[I]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x5xi32> -> tensor<i32>
// CHECK: nn.reduce_mean [[X]] {axes = array<i64: 1>, keepdims = false} : tensor<2x4x8xf32> -> tensor<2x8xf32>
// CHECK: nn.reduce_mean [[X]] {axes = array<i64: 0, 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<1x4x1xf32>
// CHECK: nn.reduce_max [[X]] {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK: nn.reduce_max [[I]] {axes = array<i64>, keepdims = false} : tensor<3x5xi32> -> tensor<3x5xi32>
func.func @reduce(%x: tensor<2x4x8xf32>, %i: tensor<3x5xi32>) {
  %0 = nn.reduce_sum %x {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %1 = nn.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4x8xf32> -> tensor<8xf32>
  %2 = nn.reduce_sum %i {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x5xi32> -> tensor<i32>
  %3 = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = false} : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %4 = nn.reduce_mean %x {keepdims = true, axes = array<i64: 0, 2>} : tensor<2x4x8xf32> -> tensor<1x4x1xf32>
  %5 = nn.reduce_max %x {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %6 = nn.reduce_max %i {axes = array<i64>, keepdims = false} : tensor<3x5xi32> -> tensor<3x5xi32>
  return
}

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x8x16xf32>, [[G:%[a-z0-9_]+]]: tensor<16xf32>, [[B:%[a-z0-9_]+]]: tensor<16xf32>, [[G2:%[a-z0-9_]+]]: tensor<8x16xf32>, [[G3:%[a-z0-9_]+]]: tensor<2x8x16xf32>)
// CHECK: nn.layer_norm [[X]], [[G]], [[B]] {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK: nn.layer_norm [[X]], [[G]] {axis = 2 : i64, epsilon = 9.9999999999999998E-13 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK: nn.layer_norm [[X]], [[G2]] {axis = 1 : i64, epsilon = 0.000000e+00 : f64} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
// CHECK: nn.layer_norm [[X]], [[G3]], [[G3]] {axis = 0 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
func.func @layer_norm(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>,
                      %g2: tensor<8x16xf32>, %g3: tensor<2x8x16xf32>) {
  %0 = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = nn.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-12 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %2 = nn.layer_norm %x, %g2 {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %3 = nn.layer_norm %x, %g3, %g3 {axis = 0 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x4x8x8xf32>, [[H:%[a-z0-9_]+]]: tensor<5xf16>)
// CHECK: nn.softmax [[X]] {axis = 3 : i64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: nn.softmax [[X]] {axis = 0 : i64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: nn.softmax [[H]] {axis = 0 : i64} : tensor<5xf16> -> tensor<5xf16>
func.func @softmax(%x: tensor<2x4x8x8xf32>, %h: tensor<5xf16>) {
  %0 = nn.softmax %x {axis = 3 : i64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %1 = nn.softmax %x {axis = 0 : i64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %2 = nn.softmax %h {axis = 0 : i64} : tensor<5xf16> -> tensor<5xf16>
  return
}

// CHECK-LABEL: func.func @softmax_cross_entropy(
// CHECK-SAME: [[S:%[a-z0-9_]+]]: tensor<8x16xf32>, [[L:%[a-z0-9_]+]]: tensor<8xi64>, [[S3:%[a-z0-9_]+]]: tensor<2x16x5xf32>, [[L3:%[a-z0-9_]+]]: tensor<2x5xi32>)
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(mean) {ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(sum) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(sum) {ignore_index = 0 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(none) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<8xf32>
// CHECK: nn.softmax_cross_entropy [[S3]], [[L3]] reduction(none) {ignore_index = -1 : i64} : (tensor<2x16x5xf32>, tensor<2x5xi32>) -> tensor<2x5xf32>
// CHECK: nn.softmax_cross_entropy [[S3]], [[L3]] reduction(mean) : (tensor<2x16x5xf32>, tensor<2x5xi32>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(mean) {classes = 11 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy [[S]], [[L]] reduction(sum) {classes = 16 : i64, ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy_grad [[S]], [[L]], %{{.*}} reduction(mean) {classes = 1 : i64} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
func.func @softmax_cross_entropy(%s: tensor<8x16xf32>, %l: tensor<8xi64>,
                                 %s3: tensor<2x16x5xf32>, %l3: tensor<2x5xi32>) {
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) {ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %1 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %2 = nn.softmax_cross_entropy %s, %l reduction(sum) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %3 = nn.softmax_cross_entropy %s, %l reduction(sum) {ignore_index = 0 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %4 = nn.softmax_cross_entropy %s, %l reduction(none) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<8xf32>
  %5 = nn.softmax_cross_entropy %s3, %l3 reduction(none) {ignore_index = -1 : i64} : (tensor<2x16x5xf32>, tensor<2x5xi32>) -> tensor<2x5xf32>
  %6 = nn.softmax_cross_entropy %s3, %l3 reduction(mean) : (tensor<2x16x5xf32>, tensor<2x5xi32>) -> tensor<f32>
  // A padded vocabulary: only the first `classes` count.
  %7 = nn.softmax_cross_entropy %s, %l reduction(mean) {classes = 11 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %8 = nn.softmax_cross_entropy %s, %l reduction(sum) {classes = 16 : i64, ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %9 = nn.softmax_cross_entropy_grad %s, %l, %7 reduction(mean) {classes = 1 : i64} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  return
}

// CHECK-LABEL: func.func @cross_entropy_shard(
// CHECK: nn.cross_entropy_shard_stats %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK: nn.cross_entropy_shard_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} reduction(mean) {ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>, tensor<8xf32>, tensor<i64>) -> tensor<8x16xf32>
// CHECK: nn.cross_entropy_shard_stats %{{.*}} : (tensor<2x16x5xbf16>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<i64>) -> (tensor<2x5xf32>, tensor<2x5xf32>)
// CHECK: nn.cross_entropy_shard_grad %{{.*}} reduction(none) : (tensor<2x16x5xbf16>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<i64>) -> tensor<2x16x5xbf16>
func.func @cross_entropy_shard(%s: tensor<8x16xf32>, %l: tensor<8xi64>,
                               %m: tensor<8xf32>, %o: tensor<i64>,
                               %g: tensor<f32>, %s3: tensor<2x16x5xbf16>,
                               %l3: tensor<2x5xi32>, %m3: tensor<2x5xf32>) {
  %e, %t = nn.cross_entropy_shard_stats %s, %l, %m, %o : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
  %0 = nn.cross_entropy_shard_grad %s, %l, %g, %m, %o reduction(mean) {ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>, tensor<8xf32>, tensor<i64>) -> tensor<8x16xf32>
  %e3, %t3 = nn.cross_entropy_shard_stats %s3, %l3, %m3, %o : (tensor<2x16x5xbf16>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<i64>) -> (tensor<2x5xf32>, tensor<2x5xf32>)
  %1 = nn.cross_entropy_shard_grad %s3, %l3, %m3, %m3, %o reduction(none) : (tensor<2x16x5xbf16>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<i64>) -> tensor<2x16x5xbf16>
  return
}

// 16-bit scores: the loss has their type or f32 (mixed precision), and so
// has the gradient's `grad`.
// CHECK-LABEL: func.func @softmax_cross_entropy_16(
// CHECK: nn.softmax_cross_entropy %arg0, %arg1 reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy %arg0, %arg1 reduction(none) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<8xbf16>
// CHECK: nn.softmax_cross_entropy_grad %arg0, %arg1, %{{.*}} reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xbf16>
func.func @softmax_cross_entropy_16(%s: tensor<8x16xbf16>, %l: tensor<8xi64>) {
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
  %1 = nn.softmax_cross_entropy %s, %l reduction(none) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<8xbf16>
  %2 = nn.softmax_cross_entropy_grad %s, %l, %0 reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<3x4xf32>, [[B:%[a-z0-9_]+]]: tensor<4x5xf32>, [[V:%[a-z0-9_]+]]: tensor<4xf32>, [[W:%[a-z0-9_]+]]: tensor<3xf32>, [[L:%[a-z0-9_]+]]: tensor<2x1x3x4xf32>, [[R:%[a-z0-9_]+]]: tensor<6x4x5xf32>, [[I:%[a-z0-9_]+]]: tensor<2x3xi32>, [[J:%[a-z0-9_]+]]: tensor<3x2xi32>)
// CHECK: nn.matmul [[A]], [[B]] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK: nn.matmul [[V]], [[B]] : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
// CHECK: nn.matmul [[A]], [[V]] : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>
// CHECK: nn.matmul [[V]], [[V]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
// CHECK: nn.matmul [[L]], [[R]] : (tensor<2x1x3x4xf32>, tensor<6x4x5xf32>) -> tensor<2x6x3x5xf32>
// CHECK: nn.matmul [[L]], [[B]] : (tensor<2x1x3x4xf32>, tensor<4x5xf32>) -> tensor<2x1x3x5xf32>
// CHECK: nn.matmul [[W]], [[L]] : (tensor<3xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x4xf32>
// CHECK: nn.matmul [[L]], [[V]] : (tensor<2x1x3x4xf32>, tensor<4xf32>) -> tensor<2x1x3xf32>
// CHECK: nn.matmul [[I]], [[J]] : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
func.func @matmul(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %v: tensor<4xf32>,
                  %w: tensor<3xf32>, %l: tensor<2x1x3x4xf32>, %r: tensor<6x4x5xf32>,
                  %i: tensor<2x3xi32>, %j: tensor<3x2xi32>) {
  %0 = nn.matmul %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %1 = nn.matmul %v, %b : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  %2 = nn.matmul %a, %v : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>
  %3 = nn.matmul %v, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %4 = nn.matmul %l, %r : (tensor<2x1x3x4xf32>, tensor<6x4x5xf32>) -> tensor<2x6x3x5xf32>
  %5 = nn.matmul %l, %b : (tensor<2x1x3x4xf32>, tensor<4x5xf32>) -> tensor<2x1x3x5xf32>
  %6 = nn.matmul %w, %l : (tensor<3xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x4xf32>
  %7 = nn.matmul %l, %v : (tensor<2x1x3x4xf32>, tensor<4xf32>) -> tensor<2x1x3xf32>
  %8 = nn.matmul %i, %j : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
  return
}

// Default attributes (alpha = beta = 1.0, no transposes) are elided.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<3x4xf32>, [[B:%[a-z0-9_]+]]: tensor<4x5xf32>, [[AT:%[a-z0-9_]+]]: tensor<4x3xf32>, [[BT:%[a-z0-9_]+]]: tensor<5x4xf32>, [[C:%[a-z0-9_]+]]: tensor<3x5xf32>, [[CR:%[a-z0-9_]+]]: tensor<5xf32>, [[CC:%[a-z0-9_]+]]: tensor<3x1xf32>, [[CS:%[a-z0-9_]+]]: tensor<f32>, [[I:%[a-z0-9_]+]]: tensor<2x2xi64>)
// CHECK: nn.gemm [[A]], [[B]] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[A]], [[B]], [[C]] : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[A]], [[BT]], [[CR]] {trans_b = true} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[AT]], [[B]], [[CC]] {alpha = 5.000000e-01 : f64, trans_a = true} : (tensor<4x3xf32>, tensor<4x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[AT]], [[BT]], [[CS]] {alpha = 2.000000e+00 : f64, beta = 0.000000e+00 : f64, trans_a = true, trans_b = true} : (tensor<4x3xf32>, tensor<5x4xf32>, tensor<f32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[A]], [[B]] {beta = 2.500000e-01 : f64} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
// CHECK: nn.gemm [[I]], [[I]], [[I]] : (tensor<2x2xi64>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
func.func @gemm(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %at: tensor<4x3xf32>,
                %bt: tensor<5x4xf32>, %c: tensor<3x5xf32>, %cr: tensor<5xf32>,
                %cc: tensor<3x1xf32>, %cs: tensor<f32>, %i: tensor<2x2xi64>) {
  %0 = nn.gemm %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %1 = nn.gemm %a, %b, %c {alpha = 1.0 : f64, beta = 1.0 : f64, trans_a = false, trans_b = false} : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = nn.gemm %a, %bt, %cr {trans_b = true} : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %3 = nn.gemm %at, %b, %cc {trans_a = true, alpha = 0.5 : f64} : (tensor<4x3xf32>, tensor<4x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  %4 = nn.gemm %at, %bt, %cs {alpha = 2.0 : f64, beta = 0.0 : f64, trans_a = true, trans_b = true} : (tensor<4x3xf32>, tensor<5x4xf32>, tensor<f32>) -> tensor<3x5xf32>
  %5 = nn.gemm %a, %b {beta = 0.25 : f64} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %6 = nn.gemm %i, %i, %i : (tensor<2x2xi64>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  return
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gather(
// CHECK-SAME: [[E:%[a-z0-9_]+]]: tensor<100x16xf32>, [[IDS:%[a-z0-9_]+]]: tensor<2x8xi64>, [[K:%[a-z0-9_]+]]: tensor<i32>, [[V:%[a-z0-9_]+]]: tensor<3xi32>)
// CHECK: nn.gather [[E]], [[IDS]] {axis = 0 : i64} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
// CHECK: nn.gather [[E]], [[K]] {axis = 1 : i64} : (tensor<100x16xf32>, tensor<i32>) -> tensor<100xf32>
// CHECK: nn.gather [[E]], [[V]] {axis = 1 : i64} : (tensor<100x16xf32>, tensor<3xi32>) -> tensor<100x3xf32>
// CHECK: nn.gather [[IDS]], [[IDS]] {axis = 1 : i64} : (tensor<2x8xi64>, tensor<2x8xi64>) -> tensor<2x2x8xi64>
func.func @gather(%e: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %k: tensor<i32>,
                  %v: tensor<3xi32>) {
  %0 = nn.gather %e, %ids {axis = 0 : i64} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %1 = nn.gather %e, %k {axis = 1 : i64} : (tensor<100x16xf32>, tensor<i32>) -> tensor<100xf32>
  %2 = nn.gather %e, %v {axis = 1 : i64} : (tensor<100x16xf32>, tensor<3xi32>) -> tensor<100x3xf32>
  %3 = nn.gather %ids, %ids {axis = 1 : i64} : (tensor<2x8xi64>, tensor<2x8xi64>) -> tensor<2x2x8xi64>
  return
}

// CHECK-LABEL: func.func @reshape(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x8x16xf32>, [[S:%[a-z0-9_]+]]: tensor<1x1xi64>)
// CHECK: nn.reshape [[X]] : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
// CHECK: nn.reshape [[X]] : tensor<2x8x16xf32> -> tensor<256xf32>
// CHECK: nn.reshape [[X]] : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK: nn.reshape [[S]] : tensor<1x1xi64> -> tensor<i64>
func.func @reshape(%x: tensor<2x8x16xf32>, %s: tensor<1x1xi64>) {
  %0 = nn.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %1 = nn.reshape %x : tensor<2x8x16xf32> -> tensor<256xf32>
  %2 = nn.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %3 = nn.reshape %s : tensor<1x1xi64> -> tensor<i64>
  return
}

// CHECK-LABEL: func.func @unsqueeze_squeeze(
// CHECK-SAME: [[M:%[a-z0-9_]+]]: tensor<2x8xi1>, [[S:%[a-z0-9_]+]]: tensor<f32>, [[U:%[a-z0-9_]+]]: tensor<2x1x1x8xi1>)
// CHECK: nn.unsqueeze [[M]] {axes = array<i64: 1, 2>} : tensor<2x8xi1> -> tensor<2x1x1x8xi1>
// CHECK: nn.unsqueeze [[M]] {axes = array<i64: 0, 3>} : tensor<2x8xi1> -> tensor<1x2x8x1xi1>
// CHECK: nn.unsqueeze [[S]] {axes = array<i64: 0>} : tensor<f32> -> tensor<1xf32>
// CHECK: nn.squeeze [[U]] {axes = array<i64: 1, 2>} : tensor<2x1x1x8xi1> -> tensor<2x8xi1>
// CHECK: nn.squeeze [[U]] {axes = array<i64: 2>} : tensor<2x1x1x8xi1> -> tensor<2x1x8xi1>
// CHECK: nn.squeeze [[U]] {axes = array<i64>} : tensor<2x1x1x8xi1> -> tensor<2x1x1x8xi1>
func.func @unsqueeze_squeeze(%m: tensor<2x8xi1>, %s: tensor<f32>, %u: tensor<2x1x1x8xi1>) {
  %0 = nn.unsqueeze %m {axes = array<i64: 1, 2>} : tensor<2x8xi1> -> tensor<2x1x1x8xi1>
  %1 = nn.unsqueeze %m {axes = array<i64: 0, 3>} : tensor<2x8xi1> -> tensor<1x2x8x1xi1>
  %2 = nn.unsqueeze %s {axes = array<i64: 0>} : tensor<f32> -> tensor<1xf32>
  %3 = nn.squeeze %u {axes = array<i64: 1, 2>} : tensor<2x1x1x8xi1> -> tensor<2x8xi1>
  %4 = nn.squeeze %u {axes = array<i64: 2>} : tensor<2x1x1x8xi1> -> tensor<2x1x8xi1>
  %5 = nn.squeeze %u {axes = array<i64>} : tensor<2x1x1x8xi1> -> tensor<2x1x1x8xi1>
  return
}

// CHECK-LABEL: func.func @expand(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<1x1x8x8xi1>, [[S:%[a-z0-9_]+]]: tensor<f32>, [[V:%[a-z0-9_]+]]: tensor<3x1xi64>)
// CHECK: nn.expand [[X]] : tensor<1x1x8x8xi1> -> tensor<2x4x8x8xi1>
// CHECK: nn.expand [[S]] : tensor<f32> -> tensor<2x3xf32>
// CHECK: nn.expand [[V]] : tensor<3x1xi64> -> tensor<5x3x4xi64>
// CHECK: nn.expand [[V]] : tensor<3x1xi64> -> tensor<3x1xi64>
func.func @expand(%x: tensor<1x1x8x8xi1>, %s: tensor<f32>, %v: tensor<3x1xi64>) {
  %0 = nn.expand %x : tensor<1x1x8x8xi1> -> tensor<2x4x8x8xi1>
  %1 = nn.expand %s : tensor<f32> -> tensor<2x3xf32>
  %2 = nn.expand %v : tensor<3x1xi64> -> tensor<5x3x4xi64>
  %3 = nn.expand %v : tensor<3x1xi64> -> tensor<3x1xi64>
  return
}

// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x8x4x16xf32>, [[S:%[a-z0-9_]+]]: tensor<f32>)
// CHECK: nn.transpose [[X]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: nn.transpose [[X]] {perm = array<i64: 3, 2, 1, 0>} : tensor<2x8x4x16xf32> -> tensor<16x4x8x2xf32>
// CHECK: nn.transpose [[X]] {perm = array<i64: 0, 1, 2, 3>} : tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>
// CHECK: nn.transpose [[S]] {perm = array<i64>} : tensor<f32> -> tensor<f32>
func.func @transpose(%x: tensor<2x8x4x16xf32>, %s: tensor<f32>) {
  %0 = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %1 = nn.transpose %x {perm = array<i64: 3, 2, 1, 0>} : tensor<2x8x4x16xf32> -> tensor<16x4x8x2xf32>
  %2 = nn.transpose %x {perm = array<i64: 0, 1, 2, 3>} : tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>
  %3 = nn.transpose %s {perm = array<i64>} : tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @slice(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<4x10xf32>, [[S:%[a-z0-9_]+]]: tensor<f32>)
// CHECK: nn.slice [[X]] {offsets = array<i64: 0, 2>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x5xf32>
// CHECK: nn.slice [[X]] {offsets = array<i64: 1, 0>, strides = array<i64: 2, 3>} : tensor<4x10xf32> -> tensor<2x4xf32>
// CHECK: nn.slice [[X]] {offsets = array<i64: 3, 9>, strides = array<i64: -1, -1>} : tensor<4x10xf32> -> tensor<4x10xf32>
// CHECK: nn.slice [[X]] {offsets = array<i64: 0, 8>, strides = array<i64: 1, -4>} : tensor<4x10xf32> -> tensor<4x3xf32>
// CHECK: nn.slice [[X]] {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x0xf32>
// CHECK: nn.slice [[S]] {offsets = array<i64>, strides = array<i64>} : tensor<f32> -> tensor<f32>
func.func @slice(%x: tensor<4x10xf32>, %s: tensor<f32>) {
  %0 = nn.slice %x {offsets = array<i64: 0, 2>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x5xf32>
  %1 = nn.slice %x {offsets = array<i64: 1, 0>, strides = array<i64: 2, 3>} : tensor<4x10xf32> -> tensor<2x4xf32>
  %2 = nn.slice %x {offsets = array<i64: 3, 9>, strides = array<i64: -1, -1>} : tensor<4x10xf32> -> tensor<4x10xf32>
  %3 = nn.slice %x {offsets = array<i64: 0, 8>, strides = array<i64: 1, -4>} : tensor<4x10xf32> -> tensor<4x3xf32>
  %4 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x0xf32>
  %5 = nn.slice %s {offsets = array<i64>, strides = array<i64>} : tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @concat(
// CHECK-SAME: [[A:%[a-z0-9_]+]]: tensor<2x3xf32>, [[B:%[a-z0-9_]+]]: tensor<2x5xf32>, [[C:%[a-z0-9_]+]]: tensor<4x3xf32>, [[I:%[a-z0-9_]+]]: tensor<1xi64>)
// CHECK: nn.concat [[A]], [[B]], [[A]] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
// CHECK: nn.concat [[A]], [[C]] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
// CHECK: nn.concat [[I]] {axis = 0 : i64} : (tensor<1xi64>) -> tensor<1xi64>
// CHECK: nn.concat [[I]], [[I]], [[I]], [[I]] {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<4x3xf32>,
                  %i: tensor<1xi64>) {
  %0 = nn.concat %a, %b, %a {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
  %1 = nn.concat %a, %c {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %2 = nn.concat %i {axis = 0 : i64} : (tensor<1xi64>) -> tensor<1xi64>
  %3 = nn.concat %i, %i, %i, %i {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return
}

// CHECK-LABEL: func.func @split(
// CHECK-SAME: [[X:%[a-z0-9_]+]]: tensor<2x8x48xf32>, [[V:%[a-z0-9_]+]]: tensor<6xi64>)
// CHECK: [[S:%[0-9]+]]:3 = nn.split [[X]] {axis = 2 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
// CHECK: nn.split [[X]] {axis = 1 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x3x48xf32>, tensor<2x5x48xf32>)
// CHECK: nn.split [[V]] {axis = 0 : i64} : (tensor<6xi64>) -> tensor<6xi64>
// CHECK: nn.add [[S]]#0, [[S]]#2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
func.func @split(%x: tensor<2x8x48xf32>, %v: tensor<6xi64>) {
  %0:3 = nn.split %x {axis = 2 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %1:2 = nn.split %x {axis = 1 : i64} : (tensor<2x8x48xf32>) -> (tensor<2x3x48xf32>, tensor<2x5x48xf32>)
  %2 = nn.split %v {axis = 0 : i64} : (tensor<6xi64>) -> tensor<6xi64>
  %3 = nn.add %0#0, %0#2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// CHECK-LABEL: func.func @attention(
// CHECK: %[[O:.*]], %[[L:.*]] = nn.attention %arg0, %arg1, %arg2 {causal = true, scale = 1.250000e-01 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK: nn.attention %arg0, %arg1, %arg2 mask %arg3 {causal = false, scale = 1.000000e+00 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK: nn.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[L]], %arg4 {causal = true, scale = 1.250000e-01 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
// CHECK: nn.attention_grad %arg0, %arg1, %arg2 mask %arg3, %[[O]], %[[L]], %arg4 {causal = false
func.func @attention(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %m: tensor<1x1x16x16xi1>, %g: tensor<2x4x16x8xf32>) {
  %o, %l = nn.attention %q, %k, %v {causal = true, scale = 0.125 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %o2, %l2 = nn.attention %q, %k, %v mask %m {causal = false, scale = 1.0 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %l, %g {causal = true, scale = 0.125 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  %dq2, %dk2, %dv2 = nn.attention_grad %q, %k, %v mask %m, %o, %l, %g {causal = false, scale = 1.0 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  return
}
