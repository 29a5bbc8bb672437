// PEFT's LoRA beside each projection of a targeted weight
// (autopar-lora; compiler/plan/Pipeline.cpp gives it the plan's lora):
// a Linear weight [out, in] through its transpose, a Conv1D weight
// [in, out] read directly, and a gemm (its alpha kept in the update's);
// every other parameter frozen but also-train's. Error cases in
// lora-invalid.mlir.
// RUN: autopar-opt %s --autopar-lora='targets=q.weight,c_attn.weight,fc.weight rank=2 alpha=4 dropout=0.1' | FileCheck %s
// RUN: autopar-opt %s --autopar-lora='targets=q.weight rank=2 alpha=4 also-train=fc.bias' | FileCheck %s --check-prefix=ALSO
// RUN: autopar-opt %s --autopar-lora='targets=q.weight rank=2 alpha=4' --mlir-print-op-generic | autopar-opt -o /dev/null

// The adapters follow their weight: A [r, in], B [out, r], named after the
// module; the weights frozen, and every other parameter too.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<6x4xf32> {nn.frozen, nn.logical_type = tensor<6x4xf32>, nn.param = "q.weight"}
// CHECK-SAME: %arg1: tensor<2x4xf32> {nn.logical_type = tensor<2x4xf32>, nn.lora_a = "q.weight", nn.param = "q.lora_A.weight"}
// CHECK-SAME: %arg2: tensor<6x2xf32> {nn.logical_type = tensor<6x2xf32>, nn.lora_b = "q.weight", nn.param = "q.lora_B.weight"}
// CHECK-SAME: %arg3: tensor<4x6xf32> {nn.frozen, nn.logical_type = tensor<4x6xf32>, nn.param = "c_attn.weight"}
// CHECK-SAME: %arg4: tensor<2x4xf32> {nn.logical_type = tensor<2x4xf32>, nn.lora_a = "c_attn.weight", nn.lora_in_out, nn.param = "c_attn.lora_A.weight"}
// CHECK-SAME: %arg5: tensor<6x2xf32> {nn.logical_type = tensor<6x2xf32>, nn.lora_b = "c_attn.weight", nn.param = "c_attn.lora_B.weight"}
// CHECK-SAME: %arg7: tensor<2x4xf32> {{{.*}}nn.lora_in_out, nn.param = "fc.lora_A.weight"}
// CHECK-SAME: %arg9: tensor<6xf32> {nn.frozen, nn.logical_type = tensor<6xf32>, nn.param = "fc.bias"}
// CHECK-SAME: %arg10: tensor<4xf32> {nn.frozen, nn.logical_type = tensor<4xf32>, nn.param = "ln.weight"}
// y + dropout(x) A^T B^T * alpha / r, the dropout sites from 2^31 in op
// order.
// CHECK:      %[[X:.*]] = nn.mul %arg11, %arg10
// CHECK:      %[[Y:.*]] = nn.matmul %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
// CHECK-NEXT: %[[D:.*]] = nn.dropout %[[X]] ratio(1.000000e-01) site(2147483648) {nn.lora}
// CHECK-NEXT: %[[AT:.*]] = nn.transpose %arg1 {nn.lora, perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[H:.*]] = nn.matmul %[[D]], %[[AT]] {nn.lora} : (tensor<2x3x4xf32>, tensor<4x2xf32>) -> tensor<2x3x2xf32>
// CHECK-NEXT: %[[BT:.*]] = nn.transpose %arg2 {nn.lora, perm = array<i64: 1, 0>} : tensor<6x2xf32> -> tensor<2x6xf32>
// CHECK-NEXT: %[[U:.*]] = nn.matmul %[[H]], %[[BT]] {nn.lora}
// CHECK-NEXT: %[[S:.*]] = nn.constant {nn.lora} dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[SU:.*]] = nn.mul %[[U]], %[[S]] {nn.lora}
// CHECK-NEXT: %[[Q:.*]] = nn.add %[[Y]], %[[SU]] {nn.lora}
// CHECK:      %[[C:.*]] = nn.matmul %[[X]], %arg3
// CHECK-NEXT: nn.dropout %[[X]] ratio(1.000000e-01) site(2147483649) {nn.lora}
// CHECK:      %[[CA:.*]] = nn.add %[[C]], %{{.*}} {nn.lora}
// The gemm's update: gemm(gemm(x, A^T), B^T) with alpha 0.5 * 4 / 2.
// CHECK:      %[[G:.*]] = nn.gemm %[[R:.*]], %arg6, %arg9 {alpha = 5.000000e-01 : f64}
// CHECK-NEXT: %[[GD:.*]] = nn.dropout %[[R]] ratio(1.000000e-01) site(2147483650) {nn.lora}
// CHECK-NEXT: %[[GH:.*]] = nn.gemm %[[GD]], %arg7 {nn.lora, trans_b = true} : (tensor<6x4xf32>, tensor<2x4xf32>) -> tensor<6x2xf32>
// CHECK-NEXT: %[[GU:.*]] = nn.gemm %[[GH]], %arg8 {nn.lora, trans_b = true} : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x6xf32>
// CHECK-NEXT: %[[GA:.*]] = nn.add %[[G]], %[[GU]] {nn.lora}
// The projections' users read the sums.
// CHECK-NEXT: nn.reduce_sum %[[Q]]
// CHECK-NEXT: nn.reduce_sum %[[CA]]
// CHECK-NEXT: nn.reduce_sum %[[GA]]

// also-train keeps a parameter trained; its module is one of PEFT's
// modules_to_save, whose every parameter (trained or not) names it; without
// dropout the update reads x itself.
// ALSO-LABEL: func.func @forward
// ALSO-SAME: %arg3: tensor<4x6xf32> {nn.frozen, nn.logical_type = tensor<4x6xf32>, nn.param = "c_attn.weight"}
// ALSO-SAME: %arg4: tensor<4x6xf32> {nn.frozen, nn.logical_type = tensor<4x6xf32>, nn.lora_save = "fc", nn.param = "fc.weight"}
// ALSO-SAME: %arg5: tensor<6xf32> {nn.logical_type = tensor<6xf32>, nn.lora_save = "fc", nn.param = "fc.bias"}
// ALSO-SAME: %arg6: tensor<4xf32> {nn.frozen, nn.logical_type = tensor<4xf32>, nn.param = "ln.weight"}
// ALSO-NOT: nn.dropout
// ALSO: %[[X:.*]] = nn.mul
// ALSO: nn.matmul %[[X]], %{{.*}} {nn.lora}
module {
  func.func @forward(%w: tensor<6x4xf32> {nn.param = "q.weight", nn.logical_type = tensor<6x4xf32>},
                     %c: tensor<4x6xf32> {nn.param = "c_attn.weight", nn.logical_type = tensor<4x6xf32>},
                     %g: tensor<4x6xf32> {nn.param = "fc.weight", nn.logical_type = tensor<4x6xf32>},
                     %gb: tensor<6xf32> {nn.param = "fc.bias", nn.logical_type = tensor<6xf32>},
                     %ln: tensor<4xf32> {nn.param = "ln.weight", nn.logical_type = tensor<4xf32>},
                     %x: tensor<2x3x4xf32> {nn.input = "x"}) -> tensor<f32> {
    %0 = nn.mul %x, %ln : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    %t = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
    %1 = nn.matmul %0, %t : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
    %2 = nn.matmul %0, %c : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
    %3 = nn.reshape %0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %4 = nn.gemm %3, %g, %gb {alpha = 5.000000e-01 : f64} : (tensor<6x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<6x6xf32>
    %5 = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x6xf32> -> tensor<f32>
    %6 = nn.reduce_sum %2 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x6xf32> -> tensor<f32>
    %7 = nn.reduce_sum %4 {axes = array<i64: 0, 1>, keepdims = false} : tensor<6x6xf32> -> tensor<f32>
    %8 = nn.add %5, %6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %9 = nn.add %8, %7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %9 : tensor<f32>
  }
}
