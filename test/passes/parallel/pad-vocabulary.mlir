// RUN: autopar-opt %s --autopar-dist-pad-vocabulary --split-input-file | FileCheck %s

// A tied embedding and LM head over a vocabulary of 5, tp = 2: the table
// is padded to 6 rows (its logical type stays 5 x 4), the logits to 6
// classes, the bias with them; the loss reads the scores with -inf on the
// padded class, and the graph output reads the unpadded logits.

// CHECK-LABEL: func.func @tied
// CHECK-SAME: %arg0: tensor<6x4xf32> {nn.logical_type = tensor<5x4xf32>, nn.param = "wte"}
// CHECK-SAME: %arg1: tensor<6xf32> {nn.logical_type = tensor<5xf32>, nn.param = "b"}
// CHECK-SAME: -> (tensor<f32>, tensor<2x3x5xf32>)
// CHECK: %[[E:.*]] = nn.gather %arg0, %arg2 {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[T:.*]] = nn.transpose %arg0 {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK: %[[Y:.*]] = nn.matmul %[[E]], %[[T]] : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
// CHECK: %[[B:.*]] = nn.add %[[Y]], %arg1 : (tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
// CHECK: %[[R:.*]] = nn.reshape %[[B]] : tensor<2x3x6xf32> -> tensor<6x6xf32>
// CHECK-DAG: %[[KEEP:.*]] = nn.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK-DAG: %[[DROP:.*]] = nn.constant dense<0xFF800000> : tensor<1xf32>
// CHECK: %[[M:.*]] = nn.concat %[[KEEP]], %[[DROP]] {axis = 0 : i64} : (tensor<5xf32>, tensor<1xf32>) -> tensor<6xf32>
// CHECK: %[[S:.*]] = nn.add %[[R]], %[[M]] : (tensor<6x6xf32>, tensor<6xf32>) -> tensor<6x6xf32>
// CHECK: %[[L:.*]] = nn.softmax_cross_entropy %[[S]], %{{.*}} reduction(mean) : (tensor<6x6xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK: %[[O:.*]] = nn.slice %[[B]] {offsets = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x3x6xf32> -> tensor<2x3x5xf32>
// CHECK: return %[[L]], %[[O]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @tied(%wte: tensor<5x4xf32> {nn.param = "wte"},
                  %b: tensor<5xf32> {nn.param = "b"},
                  %ids: tensor<2x3xi64> {nn.input = "ids"},
                  %targets: tensor<2x3xi64> {nn.input = "targets"})
      -> (tensor<f32>, tensor<2x3x5xf32>) {
    %0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %1 = nn.transpose %wte {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
    %2 = nn.matmul %0, %1 : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    %3 = nn.add %2, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
    %4 = nn.reshape %3 : tensor<2x3x5xf32> -> tensor<6x5xf32>
    %5 = nn.reshape %targets : tensor<2x3xi64> -> tensor<6xi64>
    %6 = nn.softmax_cross_entropy %4, %5 reduction(mean) : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    return %6, %3 : tensor<f32>, tensor<2x3x5xf32>
  }
}

// -----

// An untied head over 7 classes, tp = 4: the embedding table (7 rows) and
// the head's [4, 7] weight are padded apart, each to 8; the scores of an
// [N, C, d] loss get a [8, 1] mask.

// CHECK-LABEL: func.func @untied
// CHECK-SAME: %arg0: tensor<8x4xf32> {nn.logical_type = tensor<7x4xf32>, nn.param = "wte"}
// CHECK-SAME: %arg1: tensor<4x8xf32> {nn.logical_type = tensor<4x7xf32>, nn.param = "head"}
// CHECK: nn.matmul %{{.*}}, %arg1 : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// CHECK: nn.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : tensor<2x3x8xf32> -> tensor<2x8x3xf32>
// CHECK: %[[M:.*]] = nn.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<7x1xf32>, tensor<1x1xf32>) -> tensor<8x1xf32>
// CHECK: %[[S:.*]] = nn.add %{{.*}}, %[[M]] : (tensor<2x8x3xf32>, tensor<8x1xf32>) -> tensor<2x8x3xf32>
// CHECK: nn.softmax_cross_entropy %[[S]], %arg3 reduction(mean) : (tensor<2x8x3xf32>, tensor<2x3xi64>) -> tensor<f32>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 4]
  func.func @untied(%wte: tensor<7x4xf32> {nn.param = "wte"},
                    %head: tensor<4x7xf32> {nn.param = "head"},
                    %ids: tensor<2x3xi64> {nn.input = "ids"},
                    %targets: tensor<2x3xi64> {nn.input = "targets"}) -> tensor<f32> {
    %0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %1 = nn.matmul %0, %head : (tensor<2x3x4xf32>, tensor<4x7xf32>) -> tensor<2x3x7xf32>
    %2 = nn.transpose %1 {perm = array<i64: 0, 2, 1>} : tensor<2x3x7xf32> -> tensor<2x7x3xf32>
    %3 = nn.softmax_cross_entropy %2, %targets reduction(mean) : (tensor<2x7x3xf32>, tensor<2x3xi64>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// -----

// Nothing to pad: tp divides the vocabulary (6 over tp = 2), and where it
// does not, the vocabulary reaches a graph input (a one-hot bias added to
// the logits) or a reshape that merges it with other dims: the model
// stays as it is (its vocabulary whole on every rank).

// CHECK-LABEL: func.func @divisible
// CHECK-SAME: %arg0: tensor<6x4xf32> {nn.param = "wte"}
// CHECK-NOT: nn.concat
// CHECK-LABEL: func.func @input_bias
// CHECK-SAME: %arg0: tensor<5x4xf32> {nn.param = "wte"}
// CHECK-SAME: %arg1: tensor<4x5xf32> {nn.param = "head"}
// CHECK-NOT: nn.concat
// CHECK-LABEL: func.func @merged
// CHECK-SAME: %arg0: tensor<5x4xf32> {nn.param = "wte"}
// CHECK-NOT: nn.concat
// CHECK: return
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @divisible(%wte: tensor<6x4xf32> {nn.param = "wte"},
                       %ids: tensor<2x3xi64> {nn.input = "ids"}) -> tensor<2x3x4xf32> {
    %0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    return %0 : tensor<2x3x4xf32>
  }
  func.func @input_bias(%wte: tensor<5x4xf32> {nn.param = "wte"},
                        %head: tensor<4x5xf32> {nn.param = "head"},
                        %x: tensor<6x4xf32> {nn.input = "x"},
                        %bias: tensor<6x5xf32> {nn.input = "bias"},
                        %targets: tensor<6xi64> {nn.input = "targets"}) -> tensor<f32> {
    %0 = nn.matmul %x, %head : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
    %1 = nn.add %0, %bias : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
    %2 = nn.softmax_cross_entropy %1, %targets reduction(mean) : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    return %2 : tensor<f32>
  }
  func.func @merged(%wte: tensor<5x4xf32> {nn.param = "wte"},
                    %ids: tensor<2x3xi64> {nn.input = "ids"}) -> (tensor<2x3x4xf32>, tensor<20xf32>) {
    %0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %1 = nn.reshape %wte : tensor<5x4xf32> -> tensor<20xf32>
    return %0, %1 : tensor<2x3x4xf32>, tensor<20xf32>
  }
}
