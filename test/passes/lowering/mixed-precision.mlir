// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision))' --split-input-file --verify-diagnostics | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{dtype=f16}))' --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=F16
// RUN: not autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{dtype=f8}))' --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: autopar-mixed-precision: unknown dtype 'f8' (expected bf16 or f16)

// Trainable parameters become bf16, the frozen table stays f32 and is cast
// where it meets bf16; x * 0.044715 computes in f32 (the scalar is not
// rounded) and is cast down where it meets bf16 again; layernorm and the
// matmul are bf16; the loss reads the bf16 logits and is f32.

// CHECK-LABEL: func.func @lm
// CHECK-SAME: %[[EMB:[a-z0-9]+]]: tensor<16x8xbf16> {nn.param = "emb"}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<8xbf16> {nn.param = "ln.w"}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x16xbf16> {nn.param = "head.w"}
// CHECK-SAME: %[[ROT:[a-z0-9]+]]: tensor<4x8xf32> {nn.frozen, nn.param = "rot"}
// CHECK-SAME: -> tensor<f32>
// CHECK: %[[X:.*]] = nn.gather %[[EMB]], %{{.*}} : (tensor<16x8xbf16>, tensor<2x4xi64>) -> tensor<2x4x8xbf16>
// CHECK: %[[ROT16:.*]] = nn.cast %[[ROT]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[R:.*]] = nn.mul %[[X]], %[[ROT16]] : (tensor<2x4x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK: %[[C:.*]] = nn.constant dense<4.471500e-02> : tensor<f32>
// CHECK: %[[R32:.*]] = nn.cast %[[R]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = nn.mul %[[R32]], %[[C]] : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// CHECK: %[[S16:.*]] = nn.cast %[[S]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: %[[A:.*]] = nn.add %[[R]], %[[S16]] : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK: %[[N:.*]] = nn.layer_norm %[[A]], %[[G]] {{.*}} : (tensor<2x4x8xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
// CHECK: %[[L:.*]] = nn.matmul %[[N]], %[[W]] : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK: %[[L2:.*]] = nn.reshape %[[L]] : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
// CHECK-NOT: nn.cast
// CHECK: %[[LOSS:.*]] = nn.softmax_cross_entropy %[[L2]], %{{.*}} reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]] : tensor<f32>
// F16-LABEL: func.func @lm
// F16-SAME: tensor<16x8xf16> {nn.param = "emb"}
// F16: nn.matmul {{.*}} : (tensor<2x4x8xf16>, tensor<8x16xf16>) -> tensor<2x4x16xf16>
func.func @lm(%ids: tensor<2x4xi64> {nn.input = "ids"}, %tgt: tensor<2x4xi64> {nn.input = "tgt"},
              %emb: tensor<16x8xf32> {nn.param = "emb"}, %g: tensor<8xf32> {nn.param = "ln.w"},
              %w: tensor<8x16xf32> {nn.param = "head.w"}, %rot: tensor<4x8xf32> {nn.param = "rot", nn.frozen}) -> tensor<f32> {
  %x = nn.gather %emb, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %r = nn.mul %x, %rot : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %c = nn.constant dense<0.044715> : tensor<f32>
  %s = nn.mul %r, %c : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %a = nn.add %r, %s : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = nn.layer_norm %a, %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l = nn.matmul %n, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %l2 = nn.reshape %l : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %t2 = nn.reshape %tgt : tensor<2x4xi64> -> tensor<8xi64>
  %loss = nn.softmax_cross_entropy %l2, %t2 reduction(mean) : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Unfused attention: the scores' scale and mask compute in f32 (splat
// constants), and the softmax of that chain reads it rounded to bf16 and
// writes bf16 (Megatron's fused softmax); the same chain with a non-splat
// f32 operand (a position-bias table) stays f32 into its softmax.

// CHECK-LABEL: func.func @unfused_attention
// CHECK: %[[S:.*]] = nn.matmul {{.*}} -> tensor<2x4x4xbf16>
// CHECK: %[[C:.*]] = nn.cast %[[S]] : tensor<2x4x4xbf16> to tensor<2x4x4xf32>
// CHECK: %[[X:.*]] = nn.mul %[[C]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[W:.*]] = nn.where {{.*}}, %[[X]] : {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[L:.*]] = nn.cast %[[W]] : tensor<2x4x4xf32> to tensor<2x4x4xbf16>
// CHECK: nn.softmax %[[L]] {axis = 2 : i64} : tensor<2x4x4xbf16> -> tensor<2x4x4xbf16>
// CHECK: %[[A:.*]] = nn.add {{.*}} -> tensor<2x4x4xf32>
// CHECK: nn.softmax %[[A]] {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
func.func @unfused_attention(%q: tensor<2x4x8xf32> {nn.param = "q"}, %kt: tensor<2x8x4xf32> {nn.param = "kt"}, %m: tensor<4x4xi1>, %bias: tensor<4x4xf32> {nn.param = "bias", nn.buffer})
    -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %c = nn.constant dense<0.35> : tensor<f32>
  %inf = nn.constant dense<0xFF800000> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %w = nn.where %m, %inf, %x : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %w {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %a = nn.add %x, %bias : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %p2 = nn.softmax %a {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  return %p, %p2 : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Values computed only from constants and frozen buffers (a mask) stay
// f32; the where that meets bf16 scores is bf16, its -inf operand cast;
// attention's output is bf16 and its log-sum-exp f32. Buffers stay f32.

// CHECK-LABEL: func.func @attention
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x4x8xbf16> {nn.param = "q"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<4x4xf32> {nn.buffer, nn.param = "bias"}
// CHECK-SAME: -> (tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<4x4xf32>)
// CHECK: %[[Z:.*]] = nn.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[M:.*]] = nn.compare gt, %[[B]], %[[Z]]
// CHECK: %[[O:.*]], %[[LSE:.*]] = nn.attention %[[Q]], %[[Q]], %[[Q]] mask %[[M]] {{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<4x4xi1>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
// CHECK: %[[D:.*]] = nn.mul %[[B]], %[[B]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: return %[[O]], %[[LSE]], %[[D]]
func.func @attention(%q: tensor<2x4x8xf32> {nn.param = "q"}, %bias: tensor<4x4xf32> {nn.param = "bias", nn.buffer})
    -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<4x4xf32>) {
  %z = nn.constant dense<0.0> : tensor<f32>
  %m = nn.compare gt, %bias, %z : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %o, %lse = nn.attention %q, %q, %q mask %m {causal = false, scale = 0.35 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x4xi1>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %d = nn.mul %bias, %bias : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %o, %lse, %d : tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<4x4xf32>
}
