// RUN: autopar-opt %s --autopar-restore-untrained-precision --split-input-file --verify-diagnostics | FileCheck %s

// After mixed precision and autodiff: %w has a gradient and stays bf16
// (its f32 master is the optimizer's); %m gets none (the loss only
// compares against it), so it is stored in its logical f32 type and cast
// down where it is used, in every function. An f32 parameter and a graph
// input are left alone.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4xbf16> {nn.logical_type = tensor<4xf32>, nn.param = "w"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4xf32> {nn.logical_type = tensor<4xf32>, nn.param = "m"}
// CHECK-SAME: %[[F:[a-z0-9]+]]: tensor<4xf32> {nn.frozen, nn.logical_type = tensor<4xf32>, nn.param = "f"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xbf16> {nn.input = "x"}
// CHECK-NEXT: %[[C:.*]] = nn.cast %[[M]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: nn.compare gt, %[[X]], %[[C]]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4xf32> {nn.logical_type = tensor<4xf32>, nn.param = "m"}
// CHECK-NEXT: nn.cast %{{.*}} : tensor<4xf32> to tensor<4xbf16>
func.func @forward(%w: tensor<4xbf16> {nn.param = "w", nn.logical_type = tensor<4xf32>},
                   %m: tensor<4xbf16> {nn.param = "m", nn.logical_type = tensor<4xf32>},
                   %f: tensor<4xf32> {nn.param = "f", nn.frozen, nn.logical_type = tensor<4xf32>},
                   %x: tensor<4xbf16> {nn.input = "x"}) -> tensor<4xi1> {
  %0 = nn.compare gt, %x, %m : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
func.func @train_step(%w: tensor<4xbf16> {nn.param = "w", nn.logical_type = tensor<4xf32>},
                      %m: tensor<4xbf16> {nn.param = "m", nn.logical_type = tensor<4xf32>},
                      %x: tensor<4xbf16> {nn.input = "x"})
    -> (tensor<4xi1>, tensor<4xbf16> {nn.grad = "w"}) {
  %0 = nn.compare gt, %x, %m : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xi1>
  return %0, %w : tensor<4xi1>, tensor<4xbf16>
}

// -----

// A parameter without a logical type (the pass runs after
// autopar-apply-plan) is left as it is.
// CHECK-LABEL: func.func @no_logical_type
// CHECK-SAME: tensor<4xbf16> {nn.param = "m"}
// CHECK-NOT: nn.cast
func.func @no_logical_type(%m: tensor<4xbf16> {nn.param = "m"}) -> tensor<4xbf16> {
  return %m : tensor<4xbf16>
}

// -----

// A padded vocabulary (autopar-dist-pad-vocabulary): the argument keeps its
// padded shape in the logical type's precision.
// CHECK-LABEL: func.func @padded
// CHECK-SAME: %arg0: tensor<6x2xf32> {nn.logical_type = tensor<5x2xf32>, nn.param = "wte"}
// CHECK: nn.cast %arg0 : tensor<6x2xf32> to tensor<6x2xbf16>
func.func @padded(%wte: tensor<6x2xbf16> {nn.param = "wte", nn.logical_type = tensor<5x2xf32>}) -> tensor<6x2xbf16> {
  return %wte : tensor<6x2xbf16>
}

// -----

// expected-error @+1 {{parameter 'm' of type 'tensor<4xbf16>' cannot hold its logical type 'tensor<8xf32>'}}
func.func @sharded(%m: tensor<4xbf16> {nn.param = "m", nn.logical_type = tensor<8xf32>}) -> tensor<4xbf16> {
  return %m : tensor<4xbf16>
}
