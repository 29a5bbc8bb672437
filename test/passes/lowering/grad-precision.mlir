// RUN: autopar-opt %s --autopar-grad-precision --split-input-file --verify-diagnostics | FileCheck %s
// RUN: not autopar-opt %s --autopar-grad-precision=dtype=bf16 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: autopar-grad-precision: dtype must be f32, got 'bf16'

// grad_dtype fp32 under mixed precision: the 16-bit gradients a function
// returns (nn.grad) become f32 at the return, in every function (a
// pipeline's stages each return theirs). The loss, a result that is no
// gradient, and a gradient already f32 (a parameter kept in f32) are left
// alone.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32>, tensor<4x4xf32> {nn.grad = "w"}, tensor<4xf32> {nn.grad = "b"}, tensor<4xbf16>, tensor<4xf32> {nn.grad = "h"})
// CHECK: %[[DW:.*]] = nn.cast %{{.*}} : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: return %{{.*}}, %[[DW]], %[[DB]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>
func.func @train_step(%w: tensor<4x4xbf16> {nn.param = "w"}, %b: tensor<4xbf16> {nn.param = "b"},
                      %h: tensor<4xf32> {nn.param = "h"}, %l: tensor<f32>)
    -> (tensor<f32>, tensor<4x4xbf16> {nn.grad = "w"}, tensor<4xbf16> {nn.grad = "b"},
        tensor<4xbf16>, tensor<4xf32> {nn.grad = "h"}) {
  %0 = nn.neg %w : tensor<4x4xbf16>
  %1 = nn.neg %b : tensor<4xbf16>
  return %l, %0, %1, %b, %h : tensor<f32>, tensor<4x4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>
}

// CHECK-LABEL: func.func @train_step_stage1
// CHECK-SAME: -> (tensor<4xf32> {nn.grad = "e"})
// CHECK: nn.cast %{{.*}} : tensor<4xf16> to tensor<4xf32>
func.func @train_step_stage1(%e: tensor<4xf16> {nn.param = "e"}) -> (tensor<4xf16> {nn.grad = "e"}) {
  %0 = nn.neg %e : tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Without 16-bit gradients nothing changes (an fp32 program).

// CHECK-LABEL: func.func @fp32_step
// CHECK-NOT: nn.cast
// CHECK: return
func.func @fp32_step(%w: tensor<4xf32> {nn.param = "w"}) -> (tensor<4xf32> {nn.grad = "w"}) {
  %0 = nn.neg %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}
