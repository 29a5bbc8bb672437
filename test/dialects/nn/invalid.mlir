// RUN: autopar-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the nn verifiers (dialects/nn/NNOps.cpp,
// NNForwardOps.cpp and NNBackwardOps.cpp) and a few ODS constraint failures.

//===----------------------------------------------------------------------===//
// ODS constraints
//===----------------------------------------------------------------------===//

func.func @float_op_on_integers(%x: tensor<4xi32>) {
  // expected-error @+1 {{'nn.sqrt' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.sqrt %x : tensor<4xi32>
  return
}

// -----

func.func @pow_on_integers(%x: tensor<4xi32>) {
  // expected-error @+1 {{'nn.pow' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.pow %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'nn.exp' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.exp %x : tensor<?x4xf32>
  return
}

// -----

func.func @unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'nn.identity' op operand #0 must be statically shaped tensor of floating-point or integer values}}
  %0 = "nn.identity"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @unary_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.exp' op requires the same type for all operands and results}}
  %0 = "nn.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @neg_on_index(%x: tensor<4xindex>) {
  // expected-error @+1 {{'nn.neg' op operand #0 must be statically shaped tensor of floating-point or 8-bit integer or 16-bit integer or 32-bit integer or 64-bit integer values}}
  %0 = nn.neg %x : tensor<4xindex>
  return
}

// -----

func.func @where_condition_not_i1(%c: tensor<4xi8>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = nn.where %c, %x, %x : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_result_not_i1(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.compare' op result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = nn.compare eq, %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @float_labels(%s: tensor<8x16xf32>, %l: tensor<8xf32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @gather_float_indices(%e: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'nn.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.gather %e, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @reduce_missing_keepdims(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op requires attribute 'keepdims'}}
  %0 = nn.reduce_sum %x {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{'nn.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "nn.constant"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<1xf32>
  return
}

// -----

func.func @unknown_gelu_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = nn.gelu %x approximate(exact) : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Argument and result attributes
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown argument attribute 'nn.weight'}}
func.func @unknown_arg_attr(%x: tensor<4xf32> {nn.weight = "w"}) {
  return
}

// -----

// nn.output names a result, not an argument.
// expected-error @+1 {{unknown argument attribute 'nn.output'}}
func.func @output_on_arg(%x: tensor<4xf32> {nn.output = "y"}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.param' must be a string}}
func.func @param_not_string(%x: tensor<4xf32> {nn.param = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.init_from' must be a string}}
func.func @init_from_not_string(%x: tensor<4xf32> {nn.param = "a", nn.init_from}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.input' must be a string}}
func.func @input_not_string(%x: tensor<4xf32> {nn.input = ["x"]}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.buffer' must be a unit attribute}}
func.func @buffer_not_unit(%x: tensor<4xf32> {nn.param = "m", nn.buffer = true}) {
  return
}

// -----

// expected-error @+1 {{unknown result attribute 'nn.param'}}
func.func @param_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {nn.param = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{unknown result attribute 'nn.buffer'}}
func.func @buffer_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {nn.buffer}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{result attribute 'nn.output' must be a string}}
func.func @output_not_string(%x: tensor<4xf32>) -> (tensor<4xf32> {nn.output}) {
  return %x : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @binary_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'nn.add' op operand 'rhs' element type 'f16' differs from operand 'lhs' element type 'f32'}}
  %0 = nn.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'nn.sub' op operands 'lhs' ('tensor<2x3xf32>') and 'rhs' ('tensor<2xf32>') do not broadcast}}
  %0 = nn.sub %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @binary_result_type(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.mul' op result type 'tensor<3xf32>' differs from the inferred type 'tensor<2x3xf32>'}}
  %0 = nn.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @binary_result_element_type(%a: tensor<2x3xi32>) {
  // expected-error @+1 {{'nn.div' op result type 'tensor<2x3xf32>' differs from the inferred type 'tensor<2x3xi32>'}}
  %0 = nn.div %a, %a : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @compare_element_types(%a: tensor<4xi32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{'nn.compare' op operand 'rhs' element type 'i64' differs from operand 'lhs' element type 'i32'}}
  %0 = nn.compare lt, %a, %b : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_no_broadcast(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.compare' op operands 'lhs' ('tensor<4xf32>') and 'rhs' ('tensor<3xf32>') do not broadcast}}
  %0 = nn.compare ge, %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_result_shape(%a: tensor<4xf32>, %b: tensor<2x1xf32>) {
  // expected-error @+1 {{'nn.compare' op result type 'tensor<4xi1>' differs from the inferred type 'tensor<2x4xi1>'}}
  %0 = nn.compare ne, %a, %b : (tensor<4xf32>, tensor<2x1xf32>) -> tensor<4xi1>
  return
}

// -----

func.func @where_element_types(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'nn.where' op operand 'rhs' element type 'i32' differs from operand 'lhs' element type 'f32'}}
  %0 = nn.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_values_no_broadcast(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.where' op operands 'condition' ('tensor<4xi1>'), 'lhs' ('tensor<4xf32>') and 'rhs' ('tensor<3xf32>') do not broadcast}}
  %0 = nn.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_condition_no_broadcast(%c: tensor<8x8xi1>, %a: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.where' op operands 'condition' ('tensor<8x8xi1>'), 'lhs' ('tensor<2x4xf32>') and 'rhs' ('tensor<2x4xf32>') do not broadcast}}
  %0 = nn.where %c, %a, %a : (tensor<8x8xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @where_result_type(%c: tensor<1x1x4x4xi1>, %a: tensor<2x3x4x4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'nn.where' op result type 'tensor<1x1x4x4xf32>' differs from the inferred type 'tensor<2x3x4x4xf32>'}}
  %0 = nn.where %c, %s, %a : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.cast' op result shape [3, 2] differs from operand 'input' shape [2, 3]}}
  %0 = nn.cast %x : tensor<2x3xf32> to tensor<3x2xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

func.func @reduce_axis_out_of_range(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op axis 2 is out of range for operand 'input' of rank 2}}
  %0 = nn.reduce_sum %x {axes = array<i64: 2>, keepdims = true} : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_negative_axis(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reduce_mean' op axis -1 is out of range for operand 'input' of rank 2}}
  %0 = nn.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : tensor<2x4xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @reduce_axes_unsorted(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.reduce_max' op axes must be sorted and unique}}
  %0 = nn.reduce_max %x {axes = array<i64: 2, 0>, keepdims = false} : tensor<2x4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_axes_duplicate(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op axes must be sorted and unique}}
  %0 = nn.reduce_sum %x {axes = array<i64: 1, 1>, keepdims = false} : tensor<2x4x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @reduce_result_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op result type 'tensor<2xf32>' differs from the inferred type 'tensor<2x1xf32>'}}
  %0 = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : tensor<2x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op axis 2 is out of range for operand 'input' of rank 2}}
  %0 = nn.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_scale_element_type(%x: tensor<2x8xf32>, %g: tensor<8xf16>) {
  // expected-error @+1 {{'nn.layer_norm' op operand 'scale' element type 'f16' differs from operand 'input' element type 'f32'}}
  %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op operand 'scale' shape [2, 8] differs from the normalized shape [8] of operand 'input'}}
  %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias_element_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.layer_norm' op operand 'bias' element type 'bf16' differs from operand 'input' element type 'f32'}}
  %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op operand 'bias' shape [1, 8] differs from the normalized shape [8] of operand 'input'}}
  %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op epsilon must be a non-negative number, got -1.000000e-05}}
  %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = -1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_result_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op result type 'tensor<2x8xf16>' differs from the inferred type 'tensor<2x8xf32>'}}
  %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.softmax' op axis 2 is out of range for operand 'input' of rank 2}}
  %0 = nn.softmax %x {axis = 2 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_result_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.softmax' op result type 'tensor<8x2xf32>' differs from the inferred type 'tensor<2x8xf32>'}}
  %0 = nn.softmax %x {axis = 1 : i64} : tensor<2x8xf32> -> tensor<8x2xf32>
  return
}

// -----

func.func @sce_scores_rank(%s: tensor<16xf32>, %l: tensor<i64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op operand 'scores' must have rank >= 2 ([N, C, ...]), got 'tensor<16xf32>'}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<16xf32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @sce_labels_shape(%s: tensor<8x16xf32>, %l: tensor<16xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op operand 'labels' shape [16] must be the shape of operand 'scores' without its class dim: [8]}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xf32>, tensor<16xi64>) -> tensor<f32>
  return
}

// -----

func.func @sce_labels_shape_rank3(%s: tensor<2x16x5xf32>, %l: tensor<2x16xi32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op operand 'labels' shape [2, 16] must be the shape of operand 'scores' without its class dim: [2, 5]}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(none) : (tensor<2x16x5xf32>, tensor<2x16xi32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @sce_result_none(%s: tensor<8x16xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op result type 'tensor<f32>' differs from the inferred type 'tensor<8xf32>'}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(none) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @sce_f32_scores_f16_loss(%s: tensor<8x16xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op result type 'tensor<f16>' differs from the inferred type 'tensor<f32>'}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f16>
  return
}

// -----

func.func @sce_grad_f16_grad_of_bf16(%s: tensor<8x16xbf16>, %l: tensor<8xi64>, %g: tensor<f16>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op operand 'grad' type 'tensor<f16>' must be the loss type 'tensor<bf16>'}}
  %0 = nn.softmax_cross_entropy_grad %s, %l, %g reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f16>) -> tensor<8x16xbf16>
  return
}

// -----

func.func @sce_classes_zero(%s: tensor<8x16xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op classes 0 must be within 1..16 (the scores' class dim)}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(mean) {classes = 0 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @sce_grad_classes_past_scores(%s: tensor<8x16xf32>, %l: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' op classes 17 must be within 1..16 (the scores' class dim)}}
  %0 = nn.softmax_cross_entropy_grad %s, %l, %g reduction(mean) {classes = 17 : i64} : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @sce_result_mean(%s: tensor<8x16xf32>, %l: tensor<8xi64>) {
  // expected-error @+1 {{'nn.softmax_cross_entropy' op result type 'tensor<8xf32>' differs from the inferred type 'tensor<f32>'}}
  %0 = nn.softmax_cross_entropy %s, %l reduction(sum) {ignore_index = -100 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

func.func @matmul_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+1 {{'nn.matmul' op operand 'rhs' element type 'f16' differs from operand 'lhs' element type 'f32'}}
  %0 = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_lhs_rank0(%a: tensor<f32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.matmul' op operand 'lhs' must have rank >= 1}}
  %0 = nn.matmul %a, %b : (tensor<f32>, tensor<3x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_rhs_rank0(%a: tensor<3xf32>, %b: tensor<f32>) {
  // expected-error @+1 {{'nn.matmul' op operand 'rhs' must have rank >= 1}}
  %0 = nn.matmul %a, %b : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.matmul' op contracting dim of operand 'rhs' (4) differs from that of operand 'lhs' (3)}}
  %0 = nn.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_contracting_vector(%a: tensor<2x3xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'nn.matmul' op contracting dim of operand 'rhs' (4) differs from that of operand 'lhs' (3)}}
  %0 = nn.matmul %a, %v : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<5x4x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op batch dims of operands 'lhs' ('tensor<2x3x4xf32>') and 'rhs' ('tensor<5x4x6xf32>') do not broadcast}}
  %0 = nn.matmul %a, %b : (tensor<2x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x3x6xf32>
  return
}

// -----

func.func @matmul_result_type(%v: tensor<4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.matmul' op result type 'tensor<1x5xf32>' differs from the inferred type 'tensor<5xf32>'}}
  %0 = nn.matmul %v, %b : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<1x5xf32>
  return
}

// -----

func.func @gemm_a_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'a' must have rank 2}}
  %0 = nn.gemm %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_b_rank(%a: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'b' must have rank 2}}
  %0 = nn.gemm %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @gemm_element_types(%a: tensor<3x4xf32>, %b: tensor<4x5xi32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'b' element type 'i32' differs from operand 'a' element type 'f32'}}
  %0 = nn.gemm %a, %b : (tensor<3x4xf32>, tensor<4x5xi32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_contracting(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op contracting dim of operand 'b' (5) differs from that of operand 'a' (4)}}
  %0 = nn.gemm %a, %b {trans_b = true} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gemm_contracting_trans_a(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op contracting dim of operand 'b' (4) differs from that of operand 'a' (3)}}
  %0 = nn.gemm %a, %b {trans_a = true} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @gemm_c_element_type(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf16>) {
  // expected-error @+1 {{'nn.gemm' op operand 'c' element type 'f16' differs from operand 'a' element type 'f32'}}
  %0 = nn.gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf16>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_c_no_broadcast(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'c' ('tensor<3xf32>') does not broadcast to [3, 5]}}
  %0 = nn.gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3xf32>) -> tensor<3x5xf32>
  return
}

// -----

// c may only broadcast to [M, N], not widen it.
func.func @gemm_c_larger(%a: tensor<1x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'c' ('tensor<3x5xf32>') does not broadcast to [1, 5]}}
  %0 = nn.gemm %a, %b, %c : (tensor<1x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<1x5xf32>
  return
}

// -----

func.func @gemm_c_rank3(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<1x3x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op operand 'c' ('tensor<1x3x5xf32>') does not broadcast to [3, 5]}}
  %0 = nn.gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<1x3x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_result_type(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'nn.gemm' op result type 'tensor<4x5xf32>' differs from the inferred type 'tensor<3x5xf32>'}}
  %0 = nn.gemm %a, %b {trans_a = true} : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

func.func @gather_axis(%e: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'nn.gather' op axis 2 is out of range for operand 'data' of rank 2}}
  %0 = nn.gather %e, %i {axis = 2 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<10x4x3xf32>
  return
}

// -----

func.func @gather_result_type(%e: tensor<10x4xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'nn.gather' op result type 'tensor<6x4xf32>' differs from the inferred type 'tensor<2x3x4xf32>'}}
  %0 = nn.gather %e, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<6x4xf32>
  return
}

// -----

func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op result has 8 elements but operand 'input' has 6}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op result element type 'f16' differs from operand 'input' element type 'f32'}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

func.func @unsqueeze_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.unsqueeze' op axis 3 is out of range for the result of rank 3}}
  %0 = nn.unsqueeze %x {axes = array<i64: 3>} : tensor<2x3xf32> -> tensor<2x3x1xf32>
  return
}

// -----

func.func @unsqueeze_axes_order(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.unsqueeze' op axes must be sorted and unique}}
  %0 = nn.unsqueeze %x {axes = array<i64: 2, 0>} : tensor<2x3xf32> -> tensor<1x2x1x3xf32>
  return
}

// -----

func.func @unsqueeze_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.unsqueeze' op result type 'tensor<2x3x1xf32>' differs from the inferred type 'tensor<2x1x3xf32>'}}
  %0 = nn.unsqueeze %x {axes = array<i64: 1>} : tensor<2x3xf32> -> tensor<2x3x1xf32>
  return
}

// -----

func.func @squeeze_axis(%x: tensor<2x1xf32>) {
  // expected-error @+1 {{'nn.squeeze' op axis 2 is out of range for operand 'input' of rank 2}}
  %0 = nn.squeeze %x {axes = array<i64: 2>} : tensor<2x1xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @squeeze_axes_order(%x: tensor<1x2x1xf32>) {
  // expected-error @+1 {{'nn.squeeze' op axes must be sorted and unique}}
  %0 = nn.squeeze %x {axes = array<i64: 2, 0>} : tensor<1x2x1xf32> -> tensor<2xf32>
  return
}

// -----

func.func @squeeze_not_one(%x: tensor<2x1x4xf32>) {
  // expected-error @+1 {{'nn.squeeze' op dim 2 of operand 'input' is 4, not 1}}
  %0 = nn.squeeze %x {axes = array<i64: 1, 2>} : tensor<2x1x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @squeeze_result_type(%x: tensor<2x1x4xf32>) {
  // expected-error @+1 {{'nn.squeeze' op result type 'tensor<4x2xf32>' differs from the inferred type 'tensor<2x4xf32>'}}
  %0 = nn.squeeze %x {axes = array<i64: 1>} : tensor<2x1x4xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @expand_element_type(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{'nn.expand' op result element type 'i32' differs from operand 'input' element type 'f32'}}
  %0 = nn.expand %x : tensor<1x4xf32> -> tensor<3x4xi32>
  return
}

// -----

func.func @expand_incompatible(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.expand' op operand 'input' ('tensor<2x4xf32>') does not broadcast to the result shape [3, 4]}}
  %0 = nn.expand %x : tensor<2x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @expand_rank_decrease(%x: tensor<1x1x4xf32>) {
  // expected-error @+1 {{'nn.expand' op operand 'input' ('tensor<1x1x4xf32>') does not broadcast to the result shape [3, 4]}}
  %0 = nn.expand %x : tensor<1x1x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @expand_shrink(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.expand' op operand 'input' ('tensor<3x4xf32>') does not broadcast to the result shape [1, 4]}}
  %0 = nn.expand %x : tensor<3x4xf32> -> tensor<1x4xf32>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm [1, 0] is not a permutation of the dims of operand 'input' (rank 3)}}
  %0 = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_duplicate(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm [0, 2, 2] is not a permutation of the dims of operand 'input' (rank 3)}}
  %0 = nn.transpose %x {perm = array<i64: 0, 2, 2>} : tensor<2x3x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @transpose_perm_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.transpose' op perm [1, 2] is not a permutation of the dims of operand 'input' (rank 2)}}
  %0 = nn.transpose %x {perm = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_result_type(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'nn.transpose' op result type 'tensor<2x3x4xf32>' differs from the inferred type 'tensor<4x3x2xf32>'}}
  %0 = nn.transpose %x {perm = array<i64: 2, 1, 0>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @slice_element_type(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op result element type 'f16' differs from operand 'input' element type 'f32'}}
  %0 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x10xf16>
  return
}

// -----

func.func @slice_offsets_rank(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op offsets, strides and slice must have the rank of operand 'input' (2)}}
  %0 = nn.slice %x {offsets = array<i64: 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_strides_rank(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op offsets, strides and slice must have the rank of operand 'input' (2)}}
  %0 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_result_rank(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op offsets, strides and slice must have the rank of operand 'input' (2)}}
  %0 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<40xf32>
  return
}

// -----

func.func @slice_stride_zero(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op stride of dim 1 is 0}}
  %0 = nn.slice %x {offsets = array<i64: 0, 0>, strides = array<i64: 1, 0>} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_past_end(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op dim 1 reads indices 2 to 10, outside operand 'input' dim of size 10}}
  %0 = nn.slice %x {offsets = array<i64: 0, 2>, strides = array<i64: 1, 2>} : tensor<4x10xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @slice_negative_offset(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op dim 0 reads indices -1 to 0, outside operand 'input' dim of size 4}}
  %0 = nn.slice %x {offsets = array<i64: -1, 0>, strides = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
  return
}

// -----

func.func @slice_negative_stride_below_zero(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op dim 1 reads indices 3 to -1, outside operand 'input' dim of size 10}}
  %0 = nn.slice %x {offsets = array<i64: 0, 3>, strides = array<i64: 1, -1>} : tensor<4x10xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @slice_offset_past_end(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{'nn.slice' op dim 1 reads indices 10 to 8, outside operand 'input' dim of size 10}}
  %0 = nn.slice %x {offsets = array<i64: 0, 10>, strides = array<i64: 1, -1>} : tensor<4x10xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_no_operand() {
  // expected-error @+1 {{'nn.concat' op needs at least one operand}}
  %0 = nn.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.concat' op axis 2 is out of range for operand 'inputs' of rank 2}}
  %0 = nn.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'nn.concat' op operand #1 ('tensor<3x3xf32>') does not concatenate with operand #0 ('tensor<2x3xf32>') along axis 1}}
  %0 = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+1 {{'nn.concat' op operand #2 ('tensor<2x3x1xf32>') does not concatenate with operand #0 ('tensor<2x3xf32>') along axis 0}}
  %0 = nn.concat %a, %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<6x3xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xi32>) {
  // expected-error @+1 {{'nn.concat' op operand #1 ('tensor<2x3xi32>') does not concatenate with operand #0 ('tensor<2x3xf32>') along axis 0}}
  %0 = nn.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_result_type(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{'nn.concat' op result type 'tensor<2x9xf32>' differs from the inferred type 'tensor<2x8xf32>'}}
  %0 = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @split_no_result(%x: tensor<6xf32>) {
  // expected-error @+1 {{'nn.split' op needs at least one result}}
  nn.split %x {axis = 0 : i64} : (tensor<6xf32>) -> ()
  return
}

// -----

func.func @split_axis(%x: tensor<6xf32>) {
  // expected-error @+1 {{'nn.split' op axis 1 is out of range for operand 'input' of rank 1}}
  %0:2 = nn.split %x {axis = 1 : i64} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @split_piece_dims(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.split' op result #1 ('tensor<3x3xf32>') is not a piece of operand 'input' ('tensor<2x6xf32>') along axis 1}}
  %0:2 = nn.split %x {axis = 1 : i64} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<3x3xf32>)
  return
}

// -----

func.func @split_piece_rank(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.split' op result #0 ('tensor<6xf32>') is not a piece of operand 'input' ('tensor<2x6xf32>') along axis 1}}
  %0 = nn.split %x {axis = 1 : i64} : (tensor<2x6xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @split_piece_element_type(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.split' op result #1 ('tensor<2x3xf16>') is not a piece of operand 'input' ('tensor<2x6xf32>') along axis 1}}
  %0:2 = nn.split %x {axis = 1 : i64} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf16>)
  return
}

// -----

func.func @split_sum(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'nn.split' op results sum to 5 along axis 1, operand 'input' has 6}}
  %0:2 = nn.split %x {axis = 1 : i64} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @layer_norm_nan_epsilon(%x: tensor<2x4xf32>, %g: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'nn.layer_norm' op epsilon must be a non-negative number, got nan}}
  %0 = nn.layer_norm %x, %g {axis = 1 : i64, epsilon = 0x7FF8000000000000 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A stride so large that offset + (count - 1) * stride would overflow.
func.func @slice_huge_stride(%x: tensor<5xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'nn.slice' op dim 0 takes 5 elements with stride 4611686018427387904, outside operand 'input' dim of size 5}}
  %0 = nn.slice %x {offsets = array<i64: 0>, strides = array<i64: 4611686018427387904>} : tensor<5xf32> -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @neg_bool(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'nn.neg' op operand #0 must be statically shaped tensor of floating-point or 8-bit integer}}
  %0 = nn.neg %x : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// expected-error @+1 {{argument #0 with 'nn.param' must be a statically shaped tensor, got 'i32'}}
func.func @param_not_tensor(%a: i32 {nn.param = "a"}) {
  return
}

// -----

// expected-error @+1 {{argument #0 with 'nn.param' must be a statically shaped tensor, got 'tensor<?x4xf32>'}}
func.func @param_dynamic(%a: tensor<?x4xf32> {nn.param = "a"}) {
  return
}

// -----

// expected-error @+1 {{result #0 with 'nn.output' must be a statically shaped tensor, got 'f32'}}
func.func @output_not_tensor(%a: f32) -> (f32 {nn.output = "y"}) {
  return %a : f32
}

// -----

// expected-error @+1 {{argument #0 has 'nn.init_from' but no 'nn.param'}}
func.func @init_from_without_param(%a: tensor<4xf32> {nn.init_from = "w"}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.frozen_rows' must be a non-empty array of sorted, disjoint [begin, end) row ranges}}
func.func @frozen_rows_unsorted(%a: tensor<8x2xf32> {nn.param = "w", nn.frozen_rows = array<i64: 4, 6, 0, 2>}) {
  return
}

// -----

// expected-error @+1 {{argument attribute 'nn.frozen_rows' must be a non-empty array of sorted, disjoint [begin, end) row ranges}}
func.func @frozen_rows_odd(%a: tensor<8x2xf32> {nn.param = "w", nn.frozen_rows = array<i64: 1>}) {
  return
}

// -----

// Rows of the logical tensor: its block [4, 2] may name rows up to 8.
// expected-error @+1 {{argument #0 with 'nn.frozen_rows' names rows outside dim 0 of 'tensor<8x2xf32>'}}
func.func @frozen_rows_outside(%a: tensor<4x2xf32> {nn.param = "w", nn.logical_type = tensor<8x2xf32>, nn.frozen_rows = array<i64: 6, 9>}) {
  return
}

// -----

// expected-error @+1 {{argument #0 has 'nn.frozen_rows' but no 'nn.param'}}
func.func @frozen_rows_without_param(%a: tensor<8x2xf32> {nn.frozen_rows = array<i64: 0, 1>}) {
  return
}

// -----

// expected-error @+1 {{argument #0 has 'nn.buffer' but no 'nn.param'}}
func.func @buffer_without_param(%a: tensor<4xi1> {nn.buffer}) {
  return
}

// -----

// expected-error @+1 {{argument #0 is both a parameter and a graph input}}
func.func @param_and_input(%a: tensor<4xf32> {nn.input = "x", nn.param = "w"}) {
  return
}

// -----

// A declaration's arguments are checked too.
// expected-error @+1 {{argument #1 with 'nn.input' must be a statically shaped tensor, got 'tensor<*xi64>'}}
func.func private @declaration(tensor<4xf32> {nn.param = "w"}, tensor<*xi64> {nn.input = "x"})

// -----

func.func @attention_rank(%q: tensor<16x8xf32>) {
  // expected-error @+1 {{'nn.attention' op operand 'query' must have rank 3 or more ([..., T, D]), got 'tensor<16x8xf32>'}}
  %o, %l = nn.attention %q, %q, %q {causal = false, scale = 1.0 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16xf32>)
  return
}

// -----

func.func @attention_key_rank(%q: tensor<2x16x8xf32>, %k: tensor<2x1x16x8xf32>) {
  // expected-error @+1 {{'nn.attention' op operands 'key' and 'value' must have the rank of 'query' (3)}}
  %o, %l = nn.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_element_types(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf64>) {
  // expected-error @+1 {{'nn.attention' op operands 'query', 'key' and 'value' must have one element type}}
  %o, %l = nn.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf64>, tensor<2x16x8xf64>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_batch(%q: tensor<2x16x8xf32>, %k: tensor<1x16x8xf32>) {
  // expected-error @+1 {{'nn.attention' op operands 'key' and 'value' must be [..., S, D] with the leading dims of 'query' 'tensor<2x16x8xf32>', got 'tensor<1x16x8xf32>' and 'tensor<1x16x8xf32>'}}
  %o, %l = nn.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<1x16x8xf32>, tensor<1x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_features(%q: tensor<2x16x8xf32>, %k: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'nn.attention' op operand 'key' has 4 features per position, 'query' 8}}
  %o, %l = nn.attention %q, %k, %k {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_mask(%q: tensor<2x16x8xf32>, %m: tensor<16x15xi1>) {
  // expected-error @+1 {{'nn.attention' op operand 'mask' 'tensor<16x15xi1>' does not broadcast to the scores' shape [2, 16, 16]}}
  %o, %l = nn.attention %q, %q, %q mask %m {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<16x15xi1>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_scale(%q: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'nn.attention' op scale must be a positive number, got 0}}
  %o, %l = nn.attention %q, %q, %q {causal = false, scale = 0.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'nn.attention' op result type 'tensor<2x8xf32>' differs from the inferred type 'tensor<2x16xf32>'}}
  %o, %l = nn.attention %q, %q, %q {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @attention_grad_operands(%q: tensor<2x16x8xf32>, %l: tensor<2x16xf32>, %g: tensor<2x16x4xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op operands 'output' and 'grad' must have the type of 'query' 'tensor<2x16x8xf32>'}}
  %a, %b, %c = nn.attention_grad %q, %q, %q, %q, %l, %g {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16xf32>, tensor<2x16x4xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<2x16x8xf32>, %l: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op operand 'lse' must be 'tensor<2x16xf32>', got 'tensor<2x8xf32>'}}
  %a, %b, %c = nn.attention_grad %q, %q, %q, %q, %l, %q {causal = false, scale = 1.0 : f64} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// expected-error @+1 {{argument #0 has 'nn.tril' but no 'nn.param'}}
func.func private @tril_without_param(tensor<4x4xi1> {nn.tril})

// -----

// expected-error @+1 {{argument attribute 'nn.arange' must be an i64 integer}}
func.func private @arange_not_integer(tensor<8xi64> {nn.param = "pos", nn.buffer, nn.arange = "0"})

// -----

// expected-error @+1 {{argument #0 with 'nn.arange' must be an integer buffer with at most one dim over 1, got 'tensor<2x8xi64>'}}
func.func private @arange_matrix(tensor<2x8xi64> {nn.param = "pos", nn.buffer, nn.arange = 0 : i64})

// -----

// expected-error @+1 {{argument #0 with 'nn.arange' must be an integer buffer with at most one dim over 1, got 'tensor<8xf32>'}}
func.func private @arange_float(tensor<8xf32> {nn.param = "pos", nn.buffer, nn.arange = 0 : i64})

// -----

// expected-error @+1 {{argument #0 with 'nn.loss_scale' must be a float scalar, got 'tensor<2xf32>'}}
func.func private @loss_scale_not_scalar(tensor<2xf32> {nn.loss_scale})

// -----

// expected-error @+1 {{argument #0 with 'nn.loss_scale' cannot be a parameter or a graph input}}
func.func private @loss_scale_param(tensor<f32> {nn.loss_scale, nn.param = "s"})

// -----

// expected-error @+1 {{argument attribute 'nn.loss_scale' must be a unit attribute}}
func.func private @loss_scale_not_unit(tensor<f32> {nn.loss_scale = 2.0 : f32})

// -----

func.func @shard_stats_max_type(%s: tensor<8x16xf32>, %l: tensor<8xi64>, %m: tensor<8xf16>, %o: tensor<i64>) {
  // expected-error @+1 {{'nn.cross_entropy_shard_stats' op operand 'max' type 'tensor<8xf16>' must be 'tensor<8xf32>'}}
  %e, %t = nn.cross_entropy_shard_stats %s, %l, %m, %o : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf16>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @shard_stats_labels(%s: tensor<8x16xf32>, %l: tensor<16xi64>, %m: tensor<8xf32>, %o: tensor<i64>) {
  // expected-error @+1 {{'nn.cross_entropy_shard_stats' op operand 'labels' shape [16] must be the shape of operand 'scores' without its class dim: [8]}}
  %e, %t = nn.cross_entropy_shard_stats %s, %l, %m, %o : (tensor<8x16xf32>, tensor<16xi64>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @shard_stats_offset(%s: tensor<8x16xf32>, %l: tensor<8xi64>, %m: tensor<8xf32>, %o: tensor<1xi64>) {
  // expected-error @+1 {{'nn.cross_entropy_shard_stats' op operand #3 must be 0D tensor of 64-bit signless integer values}}
  %e, %t = nn.cross_entropy_shard_stats %s, %l, %m, %o : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf32>, tensor<1xi64>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @shard_grad_lse(%s: tensor<8x16xf32>, %l: tensor<8xi64>, %g: tensor<f32>, %lse: tensor<8x1xf32>, %o: tensor<i64>) {
  // expected-error @+1 {{'nn.cross_entropy_shard_grad' op operand 'lse' type 'tensor<8x1xf32>' must be 'tensor<8xf32>'}}
  %0 = nn.cross_entropy_shard_grad %s, %l, %g, %lse, %o reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>, tensor<8x1xf32>, tensor<i64>) -> tensor<8x16xf32>
  return
}

// -----

func.func @shard_grad_grad(%s: tensor<8x16xf32>, %l: tensor<8xi64>, %g: tensor<8xf32>, %lse: tensor<8xf32>, %o: tensor<i64>) {
  // expected-error @+1 {{'nn.cross_entropy_shard_grad' op operand 'grad' type 'tensor<8xf32>' must be the loss type 'tensor<f32>'}}
  %0 = nn.cross_entropy_shard_grad %s, %l, %g, %lse, %o reduction(sum) : (tensor<8x16xf32>, tensor<8xi64>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> tensor<8x16xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 with 'nn.stage_input' must be a float tensor, got 'tensor<4xi64>'}}
func.func private @stage_input_int(tensor<4xi64> {nn.stage_input})

// -----

// expected-error @+1 {{argument #0 with 'nn.output_grad' cannot be a parameter or a graph input}}
func.func private @output_grad_param(tensor<4xf32> {nn.output_grad, nn.param = "g"})

// -----

// expected-error @+1 {{result attribute 'nn.input_grad' must be a unit attribute}}
func.func private @input_grad_string() -> (tensor<4xf32> {nn.input_grad = "x"})

// -----

func.func @dequantize_codes(%c: tensor<3xi8>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op nf4 needs 4 code bytes for 8 elements, got 3}}
  %0 = nn.dequantize %c, %m {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<3xi8>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_blocks(%c: tensor<4xi8>, %m: tensor<1xf32>) {
  // expected-error @+1 {{'nn.dequantize' op nf4 needs one absmax per block of 4 (2), got 1}}
  %0 = nn.dequantize %c, %m {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<4xi8>, tensor<1xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_int8_scales(%c: tensor<2x4xi8>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op int8 needs one absmax per output feature (4), got 2}}
  %0 = nn.dequantize %c, %m {kind = "int8", block_size = 64 : i64, axis = 1 : i64} : (tensor<2x4xi8>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_kind(%c: tensor<2x4xi8>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op kind must be "nf4" or "int8", got "int4"}}
  %0 = nn.dequantize %c, %m {kind = "int4", block_size = 64 : i64, axis = 0 : i64} : (tensor<2x4xi8>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_state2_missing(%c: tensor<4xi8>, %m: tensor<2xi8>) {
  // expected-error @+1 {{'nn.dequantize' op i8 absmax (double quantization) needs the state2 operand}}
  %0 = nn.dequantize %c, %m {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<4xi8>, tensor<2xi8>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_state2_f32_absmax(%c: tensor<4xi8>, %m: tensor<2xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op with state2 (double quantization) the absmax must be i8 codes}}
  %0 = nn.dequantize %c, %m, %s {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<4xi8>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dequantize_state2_size(%c: tensor<514xi8>, %m: tensor<257xi8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op state2 needs the offset and one scale per 256 absmax (3), got 2}}
  %0 = nn.dequantize %c, %m, %s {kind = "nf4", block_size = 4 : i64, axis = 0 : i64} : (tensor<514xi8>, tensor<257xi8>, tensor<2xf32>) -> tensor<4x257xf32>
  return
}

// -----

func.func @dequantize_int8_state2(%c: tensor<2x4xi8>, %m: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.dequantize' op int8 takes f32 absmax and no state2 (double quantization is for nf4)}}
  %0 = nn.dequantize %c, %m, %s {kind = "int8", block_size = 64 : i64, axis = 1 : i64} : (tensor<2x4xi8>, tensor<4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dropout_ratio_one(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.dropout' op ratio must be in [0, 1), got 1}}
  %0 = nn.dropout %x ratio(1.0) site(0) : tensor<4xf32>
  return
}

// -----

func.func @dropout_site(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.dropout' op site must be in [0, 2^32), got 4294967296}}
  %0 = nn.dropout %x ratio(0.5) site(4294967296) : tensor<4xf32>
  return
}

// -----

func.func @dropout_offsets(%x: tensor<4x2xf32>, %o: tensor<i64>) {
  // expected-error @+1 {{'nn.dropout' op has 1 offsets; expected none or one per dim (2)}}
  %0 = nn.dropout %x offsets(%o : tensor<i64>) ratio(0.5) site(0) : tensor<4x2xf32>
  return
}

// -----

func.func @dropout_logical_shape(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.dropout' op logical_shape [4, 1] is smaller than the operand's shape [4, 2] in dim 1}}
  %0 = nn.dropout %x ratio(0.5) site(0) {logical_shape = array<i64: 4, 1>} : tensor<4x2xf32>
  return
}

// -----

func.func @dropout_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'nn.dropout' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.dropout %x ratio(0.5) site(0) : tensor<4xi32>
  return
}
