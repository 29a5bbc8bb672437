// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-legalize-precision))' --split-input-file | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-legalize-precision{target=cuda}))' --split-input-file | FileCheck %s --check-prefix=CUDA
// RUN: not autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-legalize-precision{target=tpu}))' --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: autopar-legalize-precision: unknown target 'tpu' (expected cpu or cuda)

// A bf16 matmul and layernorm compute in f32 between casts; the
// elementwise add, the gather and the transpose read bf16 directly.

// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xbf16>, %[[W:.*]]: tensor<4x4xbf16>, %[[G:.*]]: tensor<4xbf16>, %[[I:.*]]: tensor<2xi64>)
// CHECK: %[[E:.*]] = nn.gather %[[W]], %[[I]] {{.*}} -> tensor<2x4xbf16>
// CHECK: %[[T:.*]] = nn.transpose %[[W]] {{.*}} : tensor<4x4xbf16> -> tensor<4x4xbf16>
// CHECK: %[[X32:.*]] = nn.cast %[[X]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: %[[T32:.*]] = nn.cast %[[T]] : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK: %[[Y32:.*]] = nn.matmul %[[X32]], %[[T32]] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[Y:.*]] = nn.cast %[[Y32]] : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK: %[[S:.*]] = nn.add %[[Y]], %[[E]] : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[S32:.*]] = nn.cast %[[S]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: %[[G32:.*]] = nn.cast %[[G]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: %[[N32:.*]] = nn.layer_norm %[[S32]], %[[G32]] {{.*}} -> tensor<2x4xf32>
// CHECK: %[[N:.*]] = nn.cast %[[N32]] : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK: return %[[N]] : tensor<2x4xbf16>
func.func @linear(%x: tensor<2x4xbf16>, %w: tensor<4x4xbf16>, %g: tensor<4xbf16>, %i: tensor<2xi64>) -> tensor<2x4xbf16> {
  %e = nn.gather %w, %i {axis = 0 : i64} : (tensor<4x4xbf16>, tensor<2xi64>) -> tensor<2x4xbf16>
  %t = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<4x4xbf16> -> tensor<4x4xbf16>
  %y = nn.matmul %x, %t : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %s = nn.add %y, %e : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  %n = nn.layer_norm %s, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  return %n : tensor<2x4xbf16>
}

// -----

// f32 ops are left alone, and the f32 log-sum-exp of a bf16 attention
// needs no cast.

// CHECK-LABEL: func.func @untouched
// CHECK-NOT: nn.cast
// CHECK: nn.matmul %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
func.func @untouched(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = nn.cast %arg0 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = nn.attention %[[Q]], %[[Q]], %[[Q]] {{.*}} -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK: %[[O16:.*]] = nn.cast %[[O]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: return %[[O16]], %[[LSE]]
func.func @attention(%q: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>) {
  %o, %lse = nn.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
  return %o, %lse : tensor<2x4x8xbf16>, tensor<2x4xf32>
}

// -----

// The CUDA target's GEMMs take a bf16 matmul, and a bf16 gemm without C
// (a weight gradient X^T dY), as they are (cuBLASLt, f32 accumulation),
// and its layernorm kernels a bf16 layernorm and its gradient; a matmul
// whose operands have two types, and a gemm with C (added in f32 after
// the product), are computed in f32.

// CUDA-LABEL: func.func @cuda
// CUDA: %[[Y:.*]] = nn.matmul %arg0, %arg1 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// CUDA-NEXT: %[[N:.*]] = nn.layer_norm %[[Y]], %arg2 {{.*}} -> tensor<2x4xbf16>
// CUDA-NEXT: nn.layer_norm_grad %[[Y]], %arg2, %[[N]] {{.*}} -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CUDA-NEXT: nn.gemm %arg0, %[[Y]] {trans_a = true} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
// CUDA-NEXT: %[[XC:.*]] = nn.cast %arg0 : tensor<2x4xbf16> to tensor<2x4xf32>
// CUDA-NEXT: %[[YC:.*]] = nn.cast %[[Y]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CUDA-NEXT: %[[GC:.*]] = nn.cast %arg2 : tensor<4xbf16> to tensor<4xf32>
// CUDA-NEXT: %[[C:.*]] = nn.gemm %[[XC]], %[[YC]], %[[GC]] {trans_a = true} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CUDA-NEXT: nn.cast %[[C]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CUDA: nn.cast %arg0 : tensor<2x4xbf16> to tensor<2x4xf32>
// CUDA: nn.matmul {{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
func.func @cuda(%x: tensor<2x4xbf16>, %w: tensor<4x4xbf16>, %g: tensor<4xbf16>, %w32: tensor<4x4xf32>) -> (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<4x4xbf16>, tensor<4x4xbf16>) {
  %y = nn.matmul %x, %w : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %n = nn.layer_norm %y, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %dx, %dg, %db = nn.layer_norm_grad %y, %g, %n {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x4xbf16>, tensor<4xbf16>, tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  %dw = nn.gemm %x, %y {trans_a = true} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
  %dc = nn.gemm %x, %y, %g {trans_a = true} : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<4x4xbf16>
  %x32 = nn.cast %x : tensor<2x4xbf16> to tensor<2x4xf32>
  %z = nn.matmul %x32, %w32 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %n, %z, %dw, %dc : tensor<2x4xbf16>, tensor<2x4xf32>, tensor<4x4xbf16>, tensor<4x4xbf16>
}

// -----

// The CUDA target's tensor-core attention takes 16-bit q, k, v, out, dout,
// dq, dk, dv (one type) with an f32 log-sum-exp and a bool mask as they
// are (the CPU target computes them in f32: @attention above).

// CUDA-LABEL: func.func @cuda_attention
// CUDA-NOT: nn.cast
// CUDA: %[[O:.*]], %[[LSE:.*]] = nn.attention %arg0, %arg1, %arg1 mask %arg3 {{.*}} -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
// CUDA-NEXT: nn.attention_grad %arg0, %arg1, %arg1 mask %arg3, %[[O]], %[[LSE]], %arg2 {{.*}} -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
// CUDA-NEXT: nn.attention %arg4, %arg4, %arg4 {{.*}} -> (tensor<2x4x8xf16>, tensor<2x4xf32>)
// CUDA-NOT: nn.cast
func.func @cuda_attention(%q: tensor<2x4x8xbf16>, %k: tensor<2x4x8xbf16>, %g: tensor<2x4x8xbf16>, %m: tensor<4x4xi1>, %h: tensor<2x4x8xf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xf16>) {
  %o, %lse = nn.attention %q, %k, %k mask %m {causal = false, scale = 0.35 : f64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<4x4xi1>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k mask %m, %o, %lse, %g {causal = false, scale = 0.35 : f64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<4x4xi1>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
  %o2, %lse2 = nn.attention %h, %h, %h {causal = true, scale = 0.35 : f64} : (tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x4x8xf16>) -> (tensor<2x4x8xf16>, tensor<2x4xf32>)
  return %dq, %dk, %dv, %o2 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xf16>
}

// -----

// Cross-entropy of bf16 logits with an f32 loss (mixed precision): the CPU
// kernels read the logits cast to f32, the CUDA kernels the bf16 logits;
// the loss and its gradient stay f32 and dscores is bf16 either way.

// CHECK-LABEL: func.func @cross_entropy
// CHECK: %[[S:.*]] = nn.cast %arg0 : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK: %[[L:.*]] = nn.softmax_cross_entropy %[[S]], %arg1 {{.*}} -> tensor<f32>
// CHECK: %[[D:.*]] = nn.softmax_cross_entropy_grad {{.*}}, %arg1, %[[L]] {{.*}} -> tensor<8x16xf32>
// CHECK: nn.cast %[[D]] : tensor<8x16xf32> to tensor<8x16xbf16>
// CUDA-LABEL: func.func @cross_entropy
// CUDA-NOT: nn.cast
// CUDA: %[[L:.*]] = nn.softmax_cross_entropy %arg0, %arg1 reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
// CUDA-NEXT: nn.softmax_cross_entropy_grad %arg0, %arg1, %[[L]] reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xbf16>
// CUDA-NOT: nn.cast
func.func @cross_entropy(%s: tensor<8x16xbf16>, %l: tensor<8xi64>) -> (tensor<f32>, tensor<8x16xbf16>) {
  %loss = nn.softmax_cross_entropy %s, %l reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>) -> tensor<f32>
  %d = nn.softmax_cross_entropy_grad %s, %l, %loss reduction(mean) : (tensor<8x16xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xbf16>
  return %loss, %d : tensor<f32>, tensor<8x16xbf16>
}

// -----

// The CUDA target reduces bf16 tensors (accumulating in double, as in f32);
// the CPU target computes the reduction in f32 between casts.

// CHECK-LABEL: func.func @reduce
// CHECK: nn.cast %arg0 : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK: nn.reduce_sum {{.*}} -> tensor<16xf32>
// CHECK: nn.cast {{.*}} : tensor<16xf32> to tensor<16xbf16>
// CUDA-LABEL: func.func @reduce
// CUDA-NOT: nn.cast
// CUDA: nn.reduce_sum %arg0 {{.*}} : tensor<8x16xbf16> -> tensor<16xbf16>
func.func @reduce(%x: tensor<8x16xbf16>) -> tensor<16xbf16> {
  %r = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<8x16xbf16> -> tensor<16xbf16>
  return %r : tensor<16xbf16>
}

// -----

// Softmax and its gradient on 16-bit tensors (an unfused attention's
// scores under bf16-mixed): the CUDA kernels read and write them directly
// (f32 inside, as Megatron's fused softmax); the CPU target computes in
// f32 between casts.

// CHECK-LABEL: func.func @softmax
// CHECK: %[[X:.*]] = nn.cast %arg0 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK: %[[Y:.*]] = nn.softmax %[[X]] {axis = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: nn.softmax_grad {{.*}} : tensor<2x4x8xf32>
// CHECK: nn.cast {{.*}} : tensor<2x4x8xf32> to tensor<2x4x8xf16>
// CUDA-LABEL: func.func @softmax
// CUDA-NOT: nn.cast
// CUDA: %[[Y:.*]] = nn.softmax %arg0 {axis = 2 : i64} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
// CUDA-NEXT: nn.softmax_grad %[[Y]], %arg1 {axis = 2 : i64} : tensor<2x4x8xbf16>
// CUDA-NEXT: nn.softmax_grad %arg2, %arg2 {axis = 1 : i64} : tensor<2x4x8xf16>
// CUDA-NOT: nn.cast
func.func @softmax(%x: tensor<2x4x8xbf16>, %g: tensor<2x4x8xbf16>, %h: tensor<2x4x8xf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xf16>) {
  %y = nn.softmax %x {axis = 2 : i64} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  %dx = nn.softmax_grad %y, %g {axis = 2 : i64} : tensor<2x4x8xbf16>
  %dh = nn.softmax_grad %h, %h {axis = 1 : i64} : tensor<2x4x8xf16>
  return %dx, %dh : tensor<2x4x8xbf16>, tensor<2x4x8xf16>
}
