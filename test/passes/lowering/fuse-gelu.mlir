// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-gelu))' --split-input-file | FileCheck %s

// nn.GELU() as torch.onnx.export writes it: (x * (1 + erf(x / sqrt(2)))) * 0.5.

// CHECK-LABEL: func.func @erf_export
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[X]] approximate(none) : tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @erf_export(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = nn.constant dense<1.41421354> : tensor<f32>
  %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %y = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The other groupings and operand orders: 0.5 * x first, x * 0.7071...,
// 1 + erf with the constant on the left, constants of shape [1, 1].

// CHECK-LABEL: func.func @erf_half_first
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[X]] approximate(none) : tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @erf_half_first(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = nn.constant dense<0.5> : tensor<1x1xf32>
  %h = nn.mul %half, %x : (tensor<1x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = nn.constant dense<0.707106769> : tensor<1x1xf32>
  %d = nn.mul %x, %c : (tensor<4x8xf32>, tensor<1x1xf32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %one, %e : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = nn.mul %a, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @erf_half_on_sum
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[X]] approximate(none) : tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @erf_half_on_sum(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = nn.constant dense<1.41421354> : tensor<f32>
  %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %m = nn.mul %half, %a : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = nn.mul %x, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// nn.GELU(approximate="tanh") as exported (x^3 as x * (x * x)), and
// Hugging Face's gelu_new (Pow(x, 3)), one applied to the other's result.

// CHECK-LABEL: func.func @tanh_forms
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[G:.*]] = nn.gelu %[[X]] approximate(tanh) : tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.gelu %[[G]] approximate(tanh) : tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @tanh_forms(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sq = nn.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %cube = nn.mul %x, %sq : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %kappa = nn.constant dense<4.471500e-02> : tensor<f32>
  %t = nn.mul %kappa, %cube : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %in = nn.add %x, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %beta = nn.constant dense<0.797884583> : tensor<f32>
  %u = nn.mul %beta, %in : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %th = nn.tanh %u : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %one, %th : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %g = nn.mul %half, %m : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>

  %h2 = nn.mul %g, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %three = nn.constant dense<3.0> : tensor<f32>
  %p = nn.pow %g, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t2 = nn.mul %p, %kappa : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %in2 = nn.add %t2, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u2 = nn.mul %in2, %beta : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %th2 = nn.tanh %u2 : tensor<4x8xf32>
  %a2 = nn.add %th2, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = nn.mul %h2, %a2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Left as they are: an intermediate with another use (1 + erf returned
// too), a wrong constant (x / 2), and x * sigmoid(1.702 x) (another
// function).

// CHECK-LABEL: func.func @shared_intermediate
// CHECK-NOT: nn.gelu
// CHECK: nn.erf
func.func @shared_intermediate(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = nn.constant dense<1.41421354> : tensor<f32>
  %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %y = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y, %a : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @wrong_constant
// CHECK-NOT: nn.gelu
// CHECK: nn.erf
func.func @wrong_constant(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = nn.constant dense<2.0> : tensor<f32>
  %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %y = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @wrong_input
// CHECK-NOT: nn.gelu
// CHECK: nn.erf
func.func @wrong_input(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = nn.constant dense<1.41421354> : tensor<f32>
  %d = nn.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : tensor<4x8xf32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %z, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %y = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @quick_gelu
// CHECK-NOT: nn.gelu
// CHECK: nn.sigmoid
func.func @quick_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = nn.constant dense<1.702> : tensor<f32>
  %s = nn.mul %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g = nn.sigmoid %s : tensor<4x8xf32>
  %y = nn.mul %x, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
