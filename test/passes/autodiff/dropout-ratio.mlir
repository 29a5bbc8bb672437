// RUN: autopar-opt %s --autopar-dropout-ratio=ratio=0.25 | FileCheck %s --check-prefix=SET
// RUN: autopar-opt %s --autopar-dropout-ratio=ratio=0 | FileCheck %s --check-prefix=NONE
// RUN: autopar-opt %s --autopar-dropout-ratio | FileCheck %s --check-prefix=KEEP
// RUN: not autopar-opt %s --autopar-dropout-ratio=ratio=1 2>&1 | FileCheck %s --check-prefix=BAD

// The plan's dropout.ratio: every site's ratio set (sites unchanged), or
// every dropout removed (ratio 0), or each its own (the default).

// SET-LABEL: func.func @forward
// SET: nn.dropout %arg0 ratio(2.500000e-01) site(0)
// SET: nn.dropout %{{.*}} ratio(2.500000e-01) site(1)
// NONE-LABEL: func.func @forward
// NONE-NOT: nn.dropout
// NONE: %[[T:.*]] = nn.tanh %arg0
// NONE: nn.reduce_mean %[[T]]
// KEEP: nn.dropout %arg0 ratio(1.000000e-01) site(0)
// KEEP: nn.dropout %{{.*}} ratio(5.000000e-01) site(1)
// BAD: autopar-dropout-ratio: ratio must be in [0, 1), got 1
func.func @forward(%x: tensor<2x4xf32> {nn.input = "x"}) -> (tensor<f32> {nn.output = "loss"}) {
  %d = nn.dropout %x ratio(0.1) site(0) : tensor<2x4xf32>
  %t = nn.tanh %d : tensor<2x4xf32>
  %e = nn.dropout %t ratio(0.5) site(1) : tensor<2x4xf32>
  %l = nn.reduce_mean %e {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
