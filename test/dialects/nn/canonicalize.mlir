// RUN: autopar-opt %s --canonicalize --split-input-file | FileCheck %s

// Identity, a cast to the same type and a reshape to the same shape fold away.
// CHECK-LABEL: func.func @folds
// CHECK-SAME:  (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT:  return %[[X]], %[[X]], %[[X]]
func.func @folds(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = nn.identity %x : tensor<2x3xf32>
  %1 = nn.cast %x : tensor<2x3xf32> to tensor<2x3xf32>
  %2 = nn.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Real conversions and reshapes stay.
// CHECK-LABEL: func.func @keeps
// CHECK:       nn.cast %{{.+}} : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK:       nn.reshape %{{.+}} : tensor<2x3xf32> -> tensor<6xf32>
func.func @keeps(%x: tensor<2x3xf32>) -> (tensor<2x3xf16>, tensor<6xf32>) {
  %0 = nn.cast %x : tensor<2x3xf32> to tensor<2x3xf16>
  %1 = nn.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  return %0, %1 : tensor<2x3xf16>, tensor<6xf32>
}

// -----

// Transposes compose; the identity permutation folds away.
// CHECK-LABEL: func.func @transposes
// CHECK-SAME:  (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT:  %[[T:.+]] = nn.transpose %[[X]] {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:  return %[[X]], %[[T]]
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = nn.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = nn.transpose %0 {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %2 = nn.transpose %0 {perm = array<i64: 2, 1, 0>} : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// The transpose of a rank-2 product is the product with its operands swapped
// and their transposes flipped: no copy.
// CHECK-LABEL: func.func @transposed_products
// CHECK-SAME:  (%[[A:.+]]: tensor<8x4xf32>, %[[B:.+]]: tensor<8x6xf32>, %[[X:.+]]: tensor<3x5xf32>, %[[Y:.+]]: tensor<5x2xf32>)
// CHECK-NEXT:  %[[G:.+]] = nn.gemm %[[B]], %[[A]] {alpha = 5.000000e-01 : f64, trans_a = true} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:  %[[M:.+]] = nn.gemm %[[Y]], %[[X]] {trans_a = true, trans_b = true} : (tensor<5x2xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  return %[[G]], %[[M]]
func.func @transposed_products(%a: tensor<8x4xf32>, %b: tensor<8x6xf32>, %x: tensor<3x5xf32>, %y: tensor<5x2xf32>) -> (tensor<6x4xf32>, tensor<2x3xf32>) {
  %0 = nn.gemm %a, %b {alpha = 0.5 : f64, trans_a = true} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %1 = nn.transpose %0 {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %2 = nn.matmul %x, %y : (tensor<3x5xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  %3 = nn.transpose %2 {perm = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
  return %1, %3 : tensor<6x4xf32>, tensor<2x3xf32>
}

// -----

// Not rewritten: a gemm with a c operand, a product with another use, a
// batched matmul.
// CHECK-LABEL: func.func @kept_products
// CHECK-COUNT-3: nn.transpose
// CHECK-NOT:   nn.transpose
func.func @kept_products(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>, %x: tensor<2x3x5xf32>, %y: tensor<5x2xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<2x2x3xf32>) {
  %0 = nn.gemm %a, %b, %c : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %1 = nn.transpose %0 {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %2 = nn.gemm %a, %b : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %3 = nn.transpose %2 {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %4 = nn.matmul %x, %y : (tensor<2x3x5xf32>, tensor<5x2xf32>) -> tensor<2x3x2xf32>
  %5 = nn.transpose %4 {perm = array<i64: 0, 2, 1>} : tensor<2x3x2xf32> -> tensor<2x2x3xf32>
  return %1, %3, %2, %5 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<2x2x3xf32>
}

// -----

// Grouped-query attention's repeat_kv, exported piece by piece (each kv head
// sliced off, repeated, the repeats concatenated), is the repeat of the
// whole: one unsqueeze, expand and reshape, with the kv heads one dim.
// CHECK-LABEL: func.func @repeat_kv
// CHECK-SAME:  (%[[X:.+]]: tensor<4x2x16x8xf32>)
// CHECK-NEXT:  %[[U:.+]] = nn.unsqueeze %[[X]] {axes = array<i64: 2>} : tensor<4x2x16x8xf32> -> tensor<4x2x1x16x8xf32>
// CHECK-NEXT:  %[[E:.+]] = nn.expand %[[U]] : tensor<4x2x1x16x8xf32> -> tensor<4x2x3x16x8xf32>
// CHECK-NEXT:  %[[R:.+]] = nn.reshape %[[E]] : tensor<4x2x3x16x8xf32> -> tensor<4x6x16x8xf32>
// CHECK-NEXT:  return %[[R]]
func.func @repeat_kv(%x: tensor<4x2x16x8xf32>) -> tensor<4x6x16x8xf32> {
  %p:2 = nn.split %x {axis = 1 : i64} : (tensor<4x2x16x8xf32>) -> (tensor<4x1x16x8xf32>, tensor<4x1x16x8xf32>)
  %u0 = nn.unsqueeze %p#0 {axes = array<i64: 2>} : tensor<4x1x16x8xf32> -> tensor<4x1x1x16x8xf32>
  %e0 = nn.expand %u0 : tensor<4x1x1x16x8xf32> -> tensor<4x1x3x16x8xf32>
  %r0 = nn.reshape %e0 : tensor<4x1x3x16x8xf32> -> tensor<4x3x16x8xf32>
  %u1 = nn.unsqueeze %p#1 {axes = array<i64: 2>} : tensor<4x1x16x8xf32> -> tensor<4x1x1x16x8xf32>
  %e1 = nn.expand %u1 : tensor<4x1x1x16x8xf32> -> tensor<4x1x3x16x8xf32>
  %r1 = nn.reshape %e1 : tensor<4x1x3x16x8xf32> -> tensor<4x3x16x8xf32>
  %c = nn.concat %r0, %r1 {axis = 1 : i64} : (tensor<4x3x16x8xf32>, tensor<4x3x16x8xf32>) -> tensor<4x6x16x8xf32>
  return %c : tensor<4x6x16x8xf32>
}

// -----

// Pieces out of order are not a repeat of the whole.
// CHECK-LABEL: func.func @pieces_out_of_order
// CHECK: nn.concat
func.func @pieces_out_of_order(%x: tensor<4x2x16x8xf32>) -> tensor<4x6x16x8xf32> {
  %p:2 = nn.split %x {axis = 1 : i64} : (tensor<4x2x16x8xf32>) -> (tensor<4x1x16x8xf32>, tensor<4x1x16x8xf32>)
  %u0 = nn.unsqueeze %p#1 {axes = array<i64: 2>} : tensor<4x1x16x8xf32> -> tensor<4x1x1x16x8xf32>
  %e0 = nn.expand %u0 : tensor<4x1x1x16x8xf32> -> tensor<4x1x3x16x8xf32>
  %r0 = nn.reshape %e0 : tensor<4x1x3x16x8xf32> -> tensor<4x3x16x8xf32>
  %u1 = nn.unsqueeze %p#0 {axes = array<i64: 2>} : tensor<4x1x16x8xf32> -> tensor<4x1x1x16x8xf32>
  %e1 = nn.expand %u1 : tensor<4x1x1x16x8xf32> -> tensor<4x1x3x16x8xf32>
  %r1 = nn.reshape %e1 : tensor<4x1x3x16x8xf32> -> tensor<4x3x16x8xf32>
  %c = nn.concat %r0, %r1 {axis = 1 : i64} : (tensor<4x3x16x8xf32>, tensor<4x3x16x8xf32>) -> tensor<4x6x16x8xf32>
  return %c : tensor<4x6x16x8xf32>
}
