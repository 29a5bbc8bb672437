// RUN: autopar-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the dist verifiers (dialects/parallel/DistOps.cpp,
// DistAttrs.cpp) and a few ODS constraint failures.

//===----------------------------------------------------------------------===//
// dist.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'dist.mesh' op needs at least one axis}}
dist.mesh @m axes = []

// -----

// expected-error @+1 {{'dist.mesh' op axis 'dp' is declared twice}}
dist.mesh @m axes = [dp = 2, tp = 2, dp = 4]

// -----

// expected-error @+1 {{'dist.mesh' op axis 'tp' has size 0; sizes must be at least 1}}
dist.mesh @m axes = [dp = 2, tp = 0]

// -----

// expected-error @+1 {{'dist.mesh' op axis 'dp' has size -2; sizes must be at least 1}}
dist.mesh @m axes = [dp = -2]

// -----

// expected-error @+1 {{'dist.mesh' op has 2 axis names but 1 axis sizes}}
"dist.mesh"() <{sym_name = "m", axis_names = ["dp", "tp"], axis_sizes = array<i64: 2>}> : () -> ()

// -----

// expected-error @+1 {{'dist.mesh' op axis names must be non-empty strings}}
dist.mesh @m axes = ["" = 2]

// -----

func.func @mesh_in_function() {
  // expected-error @+1 {{'dist.mesh' op expects parent op 'builtin.module'}}
  dist.mesh @m axes = [dp = 2]
  return
}


//===----------------------------------------------------------------------===//
// #dist.sharding
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @negative_priority(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op priority must not be negative, got -1}}
  %0 = dist.shard %x {priority = -1 : i64} : tensor<8x8xf32> to #dist.sharding<@m, [[dp], []]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @axis_twice_in_dims(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{mesh axis 'dp' appears more than once in #dist.sharding}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[dp], [tp, dp]]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @axis_split_and_partial(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{mesh axis 'tp' appears more than once in #dist.sharding}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[dp], [tp]], partial = [tp]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @axis_twice_in_partial(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{mesh axis 'pp' appears more than once in #dist.sharding}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[], []], partial = [pp, pp]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @unknown_reduction_kind(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown reduction kind 'min', expected 'sum' or 'max'}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[], []], partial min = [tp]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @kind_without_partial_axes(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{#dist.sharding has the partial reduction kind 'max' but no partial axes}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[], []], partial max = []>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @empty_axis_name(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{mesh axes of #dist.sharding must be non-empty strings, got ""}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[""], []]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @sharding_without_mesh(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{expected valid '@'-identifier for symbol name}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<m, [[], []]>
  return
}

//===----------------------------------------------------------------------===//
// dist.shard
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @sharding_rank(%x: tensor<8x8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op sharding describes 2 dims, the tensor has rank 3}}
  %0 = dist.shard %x : tensor<8x8x8xf32> to #dist.sharding<@m, [[dp], []]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @shard_unknown_mesh(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op refers to unknown mesh @n}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@n, [[dp], []]>
  return
}

// -----

func.func private @not_a_mesh()
func.func @shard_symbol_not_a_mesh(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op refers to @not_a_mesh, which is a 'func.func', not a 'dist.mesh'}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@not_a_mesh, [[dp], []]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @shard_unknown_axis(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op mesh @m has no axis 'xp' (its axes are [dp, pp, tp])}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[dp], [xp]]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @shard_unknown_partial_axis(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op mesh @m has no axis 'sp' (its axes are [dp, pp, tp])}}
  %0 = dist.shard %x : tensor<8x8xf32> to #dist.sharding<@m, [[dp], []], partial = [sp]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @shard_not_divisible(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'dist.shard' op dim 0 of size 6 is not divisible by 4, the number of ranks of axes [dp, tp]}}
  %0 = dist.shard %x : tensor<6x8xf32> to #dist.sharding<@m, [[dp, tp], []]>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @shard_type_mismatch(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.shard' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.shard"(%x) <{sharding = #dist.sharding<@m, [[dp], []]>}> : (tensor<8x8xf32>) -> tensor<8x8xf16>
  return
}

//===----------------------------------------------------------------------===//
// dist.axis_index
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @axis_index_unknown_axis() {
  // expected-error @+1 {{'dist.axis_index' op mesh @m has no axis 'pp'}}
  %0 = dist.axis_index on @m axes = [pp] : tensor<i64>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @axis_index_rank() {
  // expected-error @+1 {{'dist.axis_index' op result #0 must be 0D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = dist.axis_index on @m axes = [tp] : tensor<1xi64>
  return
}

//===----------------------------------------------------------------------===//
// dist.tensor_split
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_no_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op needs at least one mesh axis}}
  %0 = dist.tensor_split %x on @m axes = [] dim = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_duplicate_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op mesh axis 'tp' appears more than once}}
  %0 = dist.tensor_split %x on @m axes = [tp, tp] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op dim 2 is out of range for operand 'input' of rank 2}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 2 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_negative_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op dim -1 is out of range for operand 'input' of rank 2}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = -1 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_unknown_mesh(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op refers to unknown mesh @mesh}}
  %0 = dist.tensor_split %x on @mesh axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op mesh @m has no axis 'mp' (its axes are [dp, pp, tp])}}
  %0 = dist.tensor_split %x on @m axes = [mp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 3]
func.func @split_not_divisible(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op dim 1 of size 8 is not divisible by 3, the number of ranks of axes [tp]}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_wrong_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op result type 'tensor<4x2xf32>' differs from the expected type 'tensor<4x4xf32>'}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op requires the same element type for all operands and results}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf16>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @split_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'dist.tensor_split' op operand #0 must be statically shaped tensor of floating-point or integer values}}
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<?x8xf32> -> tensor<?x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.all_reduce
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_unknown_mesh(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op refers to unknown mesh @n}}
  %0 = dist.all_reduce sum %x on @n axes = [tp] : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op mesh @m has no axis 'TP' (its axes are [dp, pp, tp])}}
  %0 = dist.all_reduce sum %x on @m axes = [dp, TP] : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_duplicate_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op mesh axis 'dp' appears more than once}}
  %0 = dist.all_reduce sum %x on @m axes = [dp, tp, dp] : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_no_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op needs at least one mesh axis}}
  %0 = dist.all_reduce sum %x on @m axes = [] : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_unknown_kind(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{custom op 'dist.all_reduce' expected string or keyword containing one of the following enum values for attribute 'kind' [sum, max]}}
  %0 = dist.all_reduce avg %x on @m axes = [tp] : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_type_mismatch(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.all_reduce"(%x) <{kind = 0 : i32, mesh = @m, axes = ["tp"]}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_booleans(%x: tensor<4x8xi1>) {
  // expected-error @+1 {{'dist.all_reduce' op operand #0 must be statically shaped tensor of floating-point or 8-bit integer or 16-bit integer or 32-bit integer or 64-bit integer values}}
  %0 = dist.all_reduce max %x on @m axes = [tp] : tensor<4x8xi1>
  return
}

//===----------------------------------------------------------------------===//
// dist.all_to_all
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_to_all_wrong_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op result type 'tensor<4x8xf32>' differs from the expected type 'tensor<8x4xf32>'}}
  %0 = dist.all_to_all %x on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_to_all_same_dim_reshaped(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op result type 'tensor<2x16xf32>' differs from the expected type 'tensor<4x8xf32>'}}
  %0 = dist.all_to_all %x on @m axes = [tp] split_dim = 1 concat_dim = 1 : tensor<4x8xf32> -> tensor<2x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_to_all_indivisible(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op dim 1 of size 6 is not divisible by 4, the number of ranks of axes [dp, tp]}}
  %0 = dist.all_to_all %x on @m axes = [dp, tp] split_dim = 1 concat_dim = 0 : tensor<4x6xf32> -> tensor<16x1xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_to_all_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op dim 2 is out of range for operand 'input' of rank 2}}
  %0 = dist.all_to_all %x on @m axes = [tp] split_dim = 1 concat_dim = 2 : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.shift
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @shift_unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.shift' op mesh @m has no axis 'tp' (its axes are [dp, cp])}}
  %0 = dist.shift %x on @m axes = [tp] offset = 1 : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @shift_no_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.shift' op needs at least one mesh axis}}
  %0 = dist.shift %x on @m axes = [] offset = 1 : tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @shift_wrong_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.shift' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.shift"(%x) {mesh = @m, axes = ["cp"], offset = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.all_gather
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_wrong_result(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result type 'tensor<4x16xf32>' differs from the expected type 'tensor<4x8xf32>'}}
  %0 = dist.all_gather %x on @m axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_other_dim_changed(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result type 'tensor<8x8xf32>' differs from the expected type 'tensor<4x8xf32>'}}
  %0 = dist.all_gather %x on @m axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<8x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_dim_out_of_range(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op dim 2 is out of range for operand 'input' of rank 2}}
  %0 = dist.all_gather %x on @m axes = [tp] dim = 2 : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_rank(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op result type has different rank than operands}}
  %0 = dist.all_gather %x on @m axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<32xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_unknown_axis(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op mesh @m has no axis 'sp' (its axes are [dp, pp, tp])}}
  %0 = dist.all_gather %x on @m axes = [sp] dim = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_gather_empty_axis_name(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op mesh axis names must not be empty}}
  %0 = dist.all_gather %x on @m axes = [""] dim = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.reduce_scatter
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @reduce_scatter_not_divisible(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op dim 0 of size 6 is not divisible by 4, the number of ranks of axes [dp, pp]}}
  %0 = dist.reduce_scatter sum %x on @m axes = [dp, pp] dim = 0 : tensor<6x8xf32> -> tensor<1x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @reduce_scatter_wrong_result(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op result type 'tensor<8x4xf32>' differs from the expected type 'tensor<4x8xf32>'}}
  %0 = dist.reduce_scatter sum %x on @m axes = [dp] dim = 0 : tensor<8x8xf32> -> tensor<8x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @reduce_scatter_dim_out_of_range(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op dim 5 is out of range for operand 'input' of rank 2}}
  %0 = dist.reduce_scatter sum %x on @m axes = [dp] dim = 5 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @reduce_scatter_unknown_mesh(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op refers to unknown mesh @m}}
  %0 = dist.reduce_scatter sum %x on @m axes = [dp] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.zero_gather / dist.zero_scatter
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_gather_shard_size(%p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.zero_gather' op operand 'input' has 4 elements; the ZeRO shard of 'tensor<3x3xf32>' over the 2 ranks of axes [dp] has ceil(9 / 2) = 5}}
  %0 = dist.zero_gather %p on @m axes = [dp] : tensor<4xf32> -> tensor<3x3xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_gather_not_flat(%p: tensor<5x1xf32>) {
  // expected-error @+1 {{'dist.zero_gather' op operand 'input' must be a 1-D flat shard, got 'tensor<5x1xf32>'}}
  %0 = dist.zero_gather %p on @m axes = [dp] : tensor<5x1xf32> -> tensor<3x3xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_gather_element_type(%p: tensor<5xf16>) {
  // expected-error @+1 {{'dist.zero_gather' op requires the same element type for all operands and results}}
  %0 = dist.zero_gather %p on @m axes = [dp] : tensor<5xf16> -> tensor<3x3xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_gather_unknown_axis(%p: tensor<5xf32>) {
  // expected-error @+1 {{'dist.zero_gather' op mesh @m has no axis 'zp' (its axes are [dp, pp, tp])}}
  %0 = dist.zero_gather %p on @m axes = [zp] : tensor<5xf32> -> tensor<3x3xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_scatter_shard_size(%g: tensor<3x3xf32>) {
  // expected-error @+1 {{'dist.zero_scatter' op the result has 4 elements; the ZeRO shard of 'tensor<3x3xf32>' over the 4 ranks of axes [dp, tp] has ceil(9 / 4) = 3}}
  %0 = dist.zero_scatter sum %g on @m axes = [dp, tp] : tensor<3x3xf32> -> tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_scatter_not_flat(%g: tensor<3x3xf32>) {
  // expected-error @+1 {{'dist.zero_scatter' op the result must be a 1-D flat shard, got 'tensor<1x5xf32>'}}
  %0 = dist.zero_scatter sum %g on @m axes = [dp] : tensor<3x3xf32> -> tensor<1x5xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @zero_scatter_no_axes(%g: tensor<3x3xf32>) {
  // expected-error @+1 {{'dist.zero_scatter' op needs at least one mesh axis}}
  %0 = dist.zero_scatter sum %g on @m axes = [] : tensor<3x3xf32> -> tensor<9xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.offload / dist.fetch
//===----------------------------------------------------------------------===//

// -----

func.func @offload_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.offload' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.offload"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @fetch_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.fetch' op failed to verify that all of {input, result} have same type}}
  %0 = "dist.fetch"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// dist.send / dist.recv
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @send_peer_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op peer 2 is out of range for mesh axis 'pp' of size 2}}
  dist.send %x on @m axis = pp to 2 : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @send_negative_peer(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op peer -1 must be non-negative}}
  dist.send %x on @m axis = pp to -1 : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @send_unknown_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op mesh @m has no axis 'stage' (its axes are [dp, pp, tp])}}
  dist.send %x on @m axis = stage to 1 : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @send_to_own_stage(%x: tensor<4xf32>) {
  dist.pipeline_stage 1 on @m axis = pp (%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'dist.send' op peer 1 is the enclosing pipeline stage itself}}
    dist.send %a on @m axis = pp to 1 : tensor<4xf32>
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @send_empty_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.send' op needs a mesh axis}}
  dist.send %x on @m axis = "" to 1 : tensor<4xf32>
  return
}

// -----

func.func @recv_unknown_mesh() {
  // expected-error @+1 {{'dist.recv' op refers to unknown mesh @m}}
  %0 = dist.recv on @m axis = pp from 0 : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 4, tp = 2]
func.func @recv_peer_out_of_range() {
  // expected-error @+1 {{'dist.recv' op peer 4 is out of range for mesh axis 'pp' of size 4}}
  %0 = dist.recv on @m axis = pp from 4 : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @recv_from_own_stage() {
  dist.pipeline_stage 0 on @m axis = pp () : () -> () {
    // expected-error @+1 {{'dist.recv' op peer 0 is the enclosing pipeline stage itself}}
    %0 = dist.recv on @m axis = pp from 0 : tensor<4xf32>
  }
  return
}

//===----------------------------------------------------------------------===//
// dist.pipeline_stage / dist.yield
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_out_of_range() {
  // expected-error @+1 {{'dist.pipeline_stage' op stage 2 is out of range for mesh axis 'pp' of size 2}}
  dist.pipeline_stage 2 on @m axis = pp () : () -> () {
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_negative() {
  // expected-error @+1 {{'dist.pipeline_stage' op stage -1 must be non-negative}}
  dist.pipeline_stage -1 on @m axis = pp () : () -> () {
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_unknown_axis() {
  // expected-error @+1 {{'dist.pipeline_stage' op mesh @m has no axis 'pipe' (its axes are [dp, pp, tp])}}
  dist.pipeline_stage 0 on @m axis = pipe () : () -> () {
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_empty_axis() {
  // expected-error @+1 {{'dist.pipeline_stage' op needs a mesh axis}}
  dist.pipeline_stage 0 on @m axis = "" () : () -> () {
  }
  return
}

// -----

func.func @stage_unknown_mesh() {
  // expected-error @+1 {{'dist.pipeline_stage' op refers to unknown mesh @m}}
  dist.pipeline_stage 0 on @m axis = pp () : () -> () {
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_nested() {
  dist.pipeline_stage 0 on @m axis = pp () : () -> () {
    // expected-error @+1 {{'dist.pipeline_stage' op cannot be nested in another pipeline stage}}
    dist.pipeline_stage 1 on @m axis = pp () : () -> () {
    }
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_argument_types(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.pipeline_stage' op body arguments 'tensor<8xf32>' differ from the operands 'tensor<4xf32>'}}
  dist.pipeline_stage 0 on @m axis = pp (%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<8xf32>):
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_yield_types(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.pipeline_stage' op yields 'tensor<4xf32>' for results 'tensor<4xf16>'}}
  %0 = dist.pipeline_stage 0 on @m axis = pp (%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    dist.yield %a : tensor<4xf32>
  }
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @stage_isolated(%x: tensor<4xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  dist.pipeline_stage 0 on @m axis = pp () : () -> () {
    // expected-error @+1 {{'nn.neg' op using value defined outside the region}}
    %0 = nn.neg %x : tensor<4xf32>
  }
  return
}

// -----

func.func @yield_outside_stage(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.yield' op expects parent op 'dist.pipeline_stage'}}
  dist.yield %x : tensor<4xf32>
}
