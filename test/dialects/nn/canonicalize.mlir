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
