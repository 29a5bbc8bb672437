// RUN: autopar-opt %s --split-input-file --autopar-dist-pad-vocabulary="multiple=4" | FileCheck %s
// RUN: not autopar-opt %s --split-input-file --autopar-dist-pad-vocabulary="multiple=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// pad_vocab_multiple on one device (tp = 1): a vocabulary of 5 becomes 8,
// the next multiple of 4 x 1; the table keeps its logical type, the loss
// counts the first 5 classes (`classes`; no mask over the logits).

// CHECK-LABEL: func.func @one_device
// CHECK-SAME: %arg0: tensor<8x4xf32> {nn.logical_type = tensor<5x4xf32>, nn.param = "wte"}
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NOT: nn.concat
// CHECK-NOT: nn.add
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} reduction(mean) {classes = 5 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
// ZERO: error: autopar-dist-pad-vocabulary: multiple must be >= 1, got 0
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]
  func.func @one_device(%wte: tensor<5x4xf32> {nn.param = "wte"},
                        %ids: tensor<2x3xi64> {nn.input = "ids"},
                        %targets: tensor<2x3xi64> {nn.input = "targets"}) -> tensor<f32> {
    %0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %1 = nn.transpose %wte {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
    %2 = nn.matmul %0, %1 : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    %3 = nn.reshape %2 : tensor<2x3x5xf32> -> tensor<6x5xf32>
    %4 = nn.reshape %targets : tensor<2x3xi64> -> tensor<6xi64>
    %5 = nn.softmax_cross_entropy %3, %4 reduction(mean) : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    return %5 : tensor<f32>
  }
}

// -----

// With tp = 2 each rank's part is a multiple of 4: 7 classes become 8
// (4 per rank), 9 become 16; 8 stay 8.

// CHECK-LABEL: func.func @over_tp
// CHECK-SAME: %arg0: tensor<4x8xf32> {nn.logical_type = tensor<4x7xf32>, nn.param = "head7"}
// CHECK-SAME: %arg1: tensor<4x16xf32> {nn.logical_type = tensor<4x9xf32>, nn.param = "head9"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {nn.param = "head8"}
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} reduction(mean) : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} reduction(mean) : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK: nn.softmax_cross_entropy %{{.*}}, %{{.*}} reduction(mean) : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @over_tp(%head7: tensor<4x7xf32> {nn.param = "head7"},
                     %head9: tensor<4x9xf32> {nn.param = "head9"},
                     %head8: tensor<4x8xf32> {nn.param = "head8"},
                     %x: tensor<6x4xf32> {nn.input = "x"},
                     %t: tensor<6xi64> {nn.input = "targets"}) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
    %0 = nn.matmul %x, %head7 : (tensor<6x4xf32>, tensor<4x7xf32>) -> tensor<6x7xf32>
    %1 = nn.softmax_cross_entropy %0, %t reduction(mean) : (tensor<6x7xf32>, tensor<6xi64>) -> tensor<f32>
    %2 = nn.matmul %x, %head9 : (tensor<6x4xf32>, tensor<4x9xf32>) -> tensor<6x9xf32>
    %3 = nn.softmax_cross_entropy %2, %t reduction(mean) : (tensor<6x9xf32>, tensor<6xi64>) -> tensor<f32>
    %4 = nn.matmul %x, %head8 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
    %5 = nn.softmax_cross_entropy %4, %t reduction(mean) : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %1, %3, %5 : tensor<f32>, tensor<f32>, tensor<f32>
  }
}
