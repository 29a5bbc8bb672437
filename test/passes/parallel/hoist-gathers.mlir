// RUN: autopar-opt %s --autopar-dist-hoist-gathers --split-input-file | FileCheck %s

// Grouped-query keys expanded over the query heads, then gathered over cp
// on the sequence: the gather moves to the keys before the expand (a
// quarter of the bytes) and the chain is rebuilt on the whole sequence.

// CHECK-LABEL: func.func @gqa_keys
// CHECK-NEXT: %[[U:.*]] = nn.unsqueeze %arg0 {axes = array<i64: 2>} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[U]] on @mesh axes = [cp] dim = 3 : tensor<1x2x1x8x4xf32> -> tensor<1x2x1x16x4xf32>
// CHECK-NEXT: %[[E:.*]] = nn.expand %[[G]] : tensor<1x2x1x16x4xf32> -> tensor<1x2x4x16x4xf32>
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[E]] : tensor<1x2x4x16x4xf32> -> tensor<1x8x16x4xf32>
// CHECK-NEXT: return %[[R]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @gqa_keys(%k: tensor<1x2x8x4xf32>) -> tensor<1x8x16x4xf32> {
    %u = nn.unsqueeze %k {axes = array<i64: 2>} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
    %e = nn.expand %u : tensor<1x2x1x8x4xf32> -> tensor<1x2x4x8x4xf32>
    %r = nn.reshape %e : tensor<1x2x4x8x4xf32> -> tensor<1x8x8x4xf32>
    %g = dist.all_gather %r on @mesh axes = [cp] dim = 2 : tensor<1x8x8x4xf32> -> tensor<1x8x16x4xf32>
    return %g : tensor<1x8x16x4xf32>
  }
}

// -----

// Through a transpose and a squeeze to the smallest tensor of the chain:
// the expand's input; the transpose maps dim 0 back to dim 1.

// CHECK-LABEL: func.func @through_transpose
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %arg0 on @mesh axes = [cp] dim = 1 : tensor<2x4x1xf32> -> tensor<2x8x1xf32>
// CHECK-NEXT: %[[E:.*]] = nn.expand %[[G]] : tensor<2x8x1xf32> -> tensor<2x8x3xf32>
// CHECK-NEXT: %[[T:.*]] = nn.transpose %[[E]] {perm = array<i64: 1, 0, 2>} : tensor<2x8x3xf32> -> tensor<8x2x3xf32>
// CHECK-NEXT: return %[[T]]
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @through_transpose(%x: tensor<2x4x1xf32>) -> tensor<8x2x3xf32> {
    %e = nn.expand %x : tensor<2x4x1xf32> -> tensor<2x4x3xf32>
    %t = nn.transpose %e {perm = array<i64: 1, 0, 2>} : tensor<2x4x3xf32> -> tensor<4x2x3xf32>
    %g = dist.all_gather %t on @mesh axes = [cp] dim = 0 : tensor<4x2x3xf32> -> tensor<8x2x3xf32>
    return %g : tensor<8x2x3xf32>
  }
}

// -----

// Left alone: a chain that does not shrink (a transpose alone), an expand
// that broadcasts the gathered dim, a reshape that merges the gathered dim
// with another, and an enlarged value with another use.

// CHECK-LABEL: func.func @stays
// CHECK: nn.transpose %arg0
// CHECK-NEXT: dist.all_gather %{{.*}} dim = 0 : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: nn.expand %arg1
// CHECK-NEXT: dist.all_gather %{{.*}} dim = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK: nn.expand %arg2
// CHECK-NEXT: nn.reshape
// CHECK-NEXT: dist.all_gather %{{.*}} dim = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[E:.*]] = nn.expand %arg3
// CHECK-NEXT: dist.all_gather %[[E]] on @mesh axes = [cp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @stays(%a: tensor<2x4xf32>, %b: tensor<2x1xf32>, %c: tensor<2x1xf32>, %d: tensor<4x1xf32>)
      -> (tensor<8x2xf32>, tensor<2x8xf32>, tensor<16xf32>, tensor<8x3xf32>, tensor<4x3xf32>) {
    %t = nn.transpose %a {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %0 = dist.all_gather %t on @mesh axes = [cp] dim = 0 : tensor<4x2xf32> -> tensor<8x2xf32>
    %e = nn.expand %b : tensor<2x1xf32> -> tensor<2x4xf32>
    %1 = dist.all_gather %e on @mesh axes = [cp] dim = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
    %f = nn.expand %c : tensor<2x1xf32> -> tensor<2x4xf32>
    %r = nn.reshape %f : tensor<2x4xf32> -> tensor<8xf32>
    %2 = dist.all_gather %r on @mesh axes = [cp] dim = 0 : tensor<8xf32> -> tensor<16xf32>
    %h = nn.expand %d : tensor<4x1xf32> -> tensor<4x3xf32>
    %3 = dist.all_gather %h on @mesh axes = [cp] dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
    return %0, %1, %2, %3, %h : tensor<8x2xf32>, tensor<2x8xf32>, tensor<16xf32>, tensor<8x3xf32>, tensor<4x3xf32>
  }
}
