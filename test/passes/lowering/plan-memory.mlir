// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-plan-memory))' --split-input-file | FileCheck %s

// %0 dies at %1, so %2 reuses its bytes; %1 lives to the end (returned).
// Views (reshape) and folded transposes get -1 and extend their base's
// lifetime; constants and arguments take no arena space.

// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {nn.arena_bytes = 128 : i64}
// CHECK: nn.exp %{{.*}} {nn.offsets = array<i64: 0>}
// CHECK: nn.tanh %{{.*}} {nn.offsets = array<i64: 64>}
// CHECK: nn.reshape %{{.*}} {nn.offsets = array<i64: -1>}
// CHECK: nn.sqrt %{{.*}} {nn.offsets = array<i64: 0>}
func.func @chain(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<4x4xf32>) {
  %0 = nn.exp %x : tensor<16xf32>
  %1 = nn.tanh %0 : tensor<16xf32>
  %r = nn.reshape %1 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = nn.sqrt %x : tensor<16xf32>
  return %2, %r : tensor<16xf32>, tensor<4x4xf32>
}

// -----

// A view keeps its base alive: %0 is read through %v by the last op, so %1
// cannot take its bytes.

// CHECK-LABEL: func.func @view_lifetime
// CHECK-SAME: attributes {nn.arena_bytes = 192 : i64}
// CHECK: nn.exp %{{.*}} {nn.offsets = array<i64: 0>}
// CHECK: nn.reshape %{{.*}} {nn.offsets = array<i64: -1>}
// CHECK: nn.tanh %{{.*}} {nn.offsets = array<i64: 64>}
// CHECK: nn.matmul %{{.*}}, %{{.*}} {nn.offsets = array<i64: 128>}
func.func @view_lifetime(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %0 = nn.exp %x : tensor<16xf32>
  %v = nn.reshape %0 : tensor<16xf32> -> tensor<4x4xf32>
  %1 = nn.tanh %x : tensor<16xf32>
  %w = nn.reshape %1 : tensor<16xf32> -> tensor<4x4xf32>
  %2 = nn.matmul %v, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// A transpose of the last two dims read only by a matmul is folded into it
// (no storage); one read by anything else is materialized.

// CHECK-LABEL: func.func @transposes
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 1, 0>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: {{[0-9]+}}>, perm = array<i64: 1, 0>}
func.func @transposes(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8x4xf32>) {
  %t = nn.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %0 = nn.matmul %t, %b : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %u = nn.transpose %b {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0, %u : tensor<8x8xf32>, tensor<8x4xf32>
}

// -----

// A declaration has nothing to plan.
// CHECK-LABEL: func.func private @external
// CHECK-NOT: nn.arena_bytes
func.func private @external(tensor<4xf32>) -> tensor<4xf32>

// -----

// Attention's head permutes keep the last (contiguous) input dim as a
// matrix dim, so the matmul reads them through strides; a permute that
// moves the last dim into the batch dims is materialized.

// CHECK-LABEL: func.func @head_permutes
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 0, 2, 1, 3>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>, perm = array<i64: 0, 2, 3, 1>}
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: {{[0-9]+}}>, perm = array<i64: 0, 3, 1, 2>}
func.func @head_permutes(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x16x8x4xf32>) {
  %qt = nn.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 3, 1>} : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %s = nn.matmul %qt, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m = nn.transpose %q {perm = array<i64: 0, 3, 1, 2>} : tensor<2x8x4x16xf32> -> tensor<2x16x8x4xf32>
  %r = nn.matmul %m, %w : (tensor<2x16x8x4xf32>, tensor<4x4xf32>) -> tensor<2x16x8x4xf32>
  return %s, %r : tensor<2x4x8x8xf32>, tensor<2x16x8x4xf32>
}

// -----

// The attention output is written straight into its transpose's layout and
// storage (a producer-layout transpose, read again by attention_grad through
// strides): both carry the transpose buffer's offset, which lives from the
// attention on, and no copy is made. So are dq, dk and dv.

// CHECK-LABEL: func.func @producer_layout
// CHECK: nn.attention {{.*}} {causal = true, nn.offsets = array<i64: [[OUT:[0-9]+]], [[LSE:[0-9]+]]>
// CHECK-NEXT: nn.transpose %output {nn.offsets = array<i64: [[OUT]]>
// CHECK-NEXT: nn.exp %{{.*}} {nn.offsets = array<i64: [[E:[0-9]+]]>}
// CHECK-NEXT: nn.attention_grad {{.*}} {causal = true, nn.offsets = array<i64: [[DQ:[0-9]+]], [[DK:[0-9]+]], [[DV:[0-9]+]]>
// CHECK-NEXT: nn.transpose %query_grad {nn.offsets = array<i64: [[DQ]]>
// CHECK-NEXT: nn.transpose %key_grad {nn.offsets = array<i64: [[DK]]>
// CHECK-NEXT: nn.transpose %value_grad {nn.offsets = array<i64: [[DV]]>
func.func @producer_layout(%q: tensor<2x4x16x8xf32>, %g: tensor<2x4x16x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) {
  %o, %lse = nn.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %e = nn.exp %t : tensor<2x16x4x8xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %g {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  %tq = nn.transpose %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tk = nn.transpose %dk {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tv = nn.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %e, %t, %tq, %tk, %tv : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>
}

// -----

// Not when the output has another reader (here an exp) that does not take
// strides, nor for a transpose that moves the last dim: each transpose then
// gets its own bytes and is a copy.

// CHECK-LABEL: func.func @producer_layout_refused
// CHECK: nn.attention {{.*}} {causal = true, nn.offsets = array<i64: 0, 4096>
// CHECK-NEXT: nn.transpose %output {nn.offsets = array<i64: 4096>
// CHECK-NEXT: nn.exp %output {nn.offsets = array<i64: 8192>
// CHECK-NEXT: nn.attention {{.*}} {causal = false, nn.offsets = array<i64: 0, 12288>
// CHECK-NEXT: nn.transpose %output_0 {nn.offsets = array<i64: 12288>, perm = array<i64: 0, 1, 3, 2>}
func.func @producer_layout_refused(%q: tensor<2x4x16x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) {
  %o, %lse = nn.attention %q, %q, %q {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %t = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %e = nn.exp %o : tensor<2x4x16x8xf32>
  %o2, %lse2 = nn.attention %q, %q, %q {causal = false, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %t2 = nn.transpose %o2 {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  return %t, %e, %t2 : tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>
}

// -----

// The fused q/k/v projection split per head: every split result is read,
// through a reshape and a folded transpose, as attention's query, key or
// value, so the split is a strided view of its input (-1: no bytes) and the
// input lives as long as the attention ops read it. When one result has
// another reader (the exp), the split is materialized.

// CHECK-LABEL: func.func @split_view
// CHECK: nn.split %arg0 {axis = 2 : i64, nn.offsets = array<i64: -1, -1, -1>}
// CHECK: nn.attention {{.*}} {causal = true, nn.offsets = array<i64: 0, 16384>
// CHECK: nn.attention_grad
// CHECK-LABEL: func.func @split_materialized
// CHECK: nn.split %arg0 {axis = 2 : i64, nn.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>}
// So is a split whose halves (along T) a reshape would have to merge with
// the batch dim, which no strides express.
// CHECK-LABEL: func.func @split_reshape_not_strided
// CHECK: nn.split %arg0 {axis = 1 : i64, nn.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}>}
func.func @split_view(%qkv: tensor<2x16x96xf32>, %g: tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %q, %k, %v = nn.split %qkv {axis = 2 : i64} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
  %q4 = nn.reshape %q : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %k4 = nn.reshape %k : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %v4 = nn.reshape %v : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %qt = nn.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kt = nn.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %vt = nn.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %o, %lse = nn.attention %qt, %kt, %vt {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = nn.attention_grad %qt, %kt, %vt, %o, %lse, %g {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  return %o, %dq : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}
func.func @split_materialized(%qkv: tensor<2x16x96xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x16x32xf32>) {
  %q, %k, %v = nn.split %qkv {axis = 2 : i64} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
  %q4 = nn.reshape %q : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %k4 = nn.reshape %k : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %v4 = nn.reshape %v : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %qt = nn.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kt = nn.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %vt = nn.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %o, %lse = nn.attention %qt, %kt, %vt {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %e = nn.exp %k : tensor<2x16x32xf32>
  return %o, %e : tensor<2x4x16x8xf32>, tensor<2x16x32xf32>
}
func.func @split_reshape_not_strided(%x: tensor<2x16x32xf32>) -> tensor<4x16x8xf32> {
  %a, %b = nn.split %x {axis = 1 : i64} : (tensor<2x16x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  %a3 = nn.reshape %a : tensor<2x8x32xf32> -> tensor<16x4x8xf32>
  %b3 = nn.reshape %b : tensor<2x8x32xf32> -> tensor<16x4x8xf32>
  %at = nn.transpose %a3 {perm = array<i64: 1, 0, 2>} : tensor<16x4x8xf32> -> tensor<4x16x8xf32>
  %bt = nn.transpose %b3 {perm = array<i64: 1, 0, 2>} : tensor<16x4x8xf32> -> tensor<4x16x8xf32>
  %o, %lse = nn.attention %at, %bt, %bt {causal = false, scale = 0.35 : f64} : (tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>) -> (tensor<4x16x8xf32>, tensor<4x16xf32>)
  return %o : tensor<4x16x8xf32>
}

// -----

// The gradient of the fused q/k/v projection: attention_grad writes dq, dk,
// dv (through their transposes and reshapes) straight into the concat's
// storage, 128 bytes (32 floats) apart; transposes, reshapes and the
// concat are views. When one reshaped gradient has another reader (the
// exp), the concat is a copy and each transpose owns its bytes.

// CHECK-LABEL: func.func @concat_view
// CHECK: nn.attention_grad {{.*}} {causal = true, nn.offsets = array<i64: 0, 128, 256>
// CHECK: nn.transpose %query_grad {nn.offsets = array<i64: -1>
// CHECK: nn.concat {{.*}} {axis = 2 : i64, nn.offsets = array<i64: 0>}
// CHECK-LABEL: func.func @concat_copied
// CHECK: nn.attention_grad {{.*}} {causal = true, nn.offsets = array<i64: [[Q2:[0-9]+]], {{[0-9]+}}, {{[0-9]+}}>
// CHECK: nn.transpose %query_grad {nn.offsets = array<i64: [[Q2]]>
// CHECK: nn.concat {{.*}} {axis = 2 : i64, nn.offsets = array<i64: {{[0-9]+}}>}
func.func @concat_view(%q: tensor<2x4x16x8xf32>, %o: tensor<2x4x16x8xf32>, %lse: tensor<2x4x16xf32>, %g: tensor<2x4x16x8xf32>) -> tensor<2x16x96xf32> {
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %g {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  %tq = nn.transpose %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tk = nn.transpose %dk {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tv = nn.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %rq = nn.reshape %tq : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %rk = nn.reshape %tk : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %rv = nn.reshape %tv : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %c = nn.concat %rq, %rk, %rv {axis = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x96xf32>
  return %c : tensor<2x16x96xf32>
}
func.func @concat_copied(%q: tensor<2x4x16x8xf32>, %o: tensor<2x4x16x8xf32>, %lse: tensor<2x4x16xf32>, %g: tensor<2x4x16x8xf32>) -> (tensor<2x16x96xf32>, tensor<2x16x32xf32>) {
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %o, %lse, %g {causal = true, scale = 0.35 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  %tq = nn.transpose %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tk = nn.transpose %dk {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %tv = nn.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %rq = nn.reshape %tq : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %rk = nn.reshape %tk : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %rv = nn.reshape %tv : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %c = nn.concat %rq, %rk, %rv {axis = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x96xf32>
  %e = nn.exp %rk : tensor<2x16x32xf32>
  return %c, %e : tensor<2x16x96xf32>, tensor<2x16x32xf32>
}

// -----

// A quantized weight only GEMMs read as B (directly, or through a folded
// transpose) is dequantized a panel at a time inside them on the CPU
// target: no buffer. One that another op reads (the add) has its buffer,
// and so has every dequantize on the CUDA target.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-plan-memory{target=cuda}))' --split-input-file | FileCheck %s --check-prefix=CUDA
// RUN: not autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-plan-memory{target=tpu}))' --split-input-file 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: target must be cpu or cuda, got 'tpu'

// CHECK-LABEL: func.func @dequantize
// CHECK-SAME: attributes {nn.arena_bytes = 256 : i64}
// CHECK: nn.dequantize %arg0, %arg1 {{.*}}nn.offsets = array<i64: -1>
// CHECK: nn.transpose %{{.*}} {nn.offsets = array<i64: -1>
// CHECK: nn.matmul
// CHECK: nn.matmul
// CHECK: nn.dequantize %arg0, %arg1 {{.*}}nn.offsets = array<i64: {{[0-9]+}}>
// CUDA-LABEL: func.func @dequantize
// CUDA: nn.dequantize %arg0, %arg1 {{.*}}nn.offsets = array<i64: {{[0-9]+}}>
// CUDA: nn.dequantize %arg0, %arg1 {{.*}}nn.offsets = array<i64: {{[0-9]+}}>
func.func @dequantize(%codes: tensor<8xi8>, %absmax: tensor<1xf32>, %x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) {
  %w = nn.dequantize %codes, %absmax {kind = "nf4", block_size = 64 : i64, axis = 0 : i64} : (tensor<8xi8>, tensor<1xf32>) -> tensor<4x4xf32>
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %0 = nn.matmul %x, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %v = nn.dequantize %codes, %absmax {kind = "nf4", block_size = 64 : i64, axis = 0 : i64} : (tensor<8xi8>, tensor<1xf32>) -> tensor<4x4xf32>
  %2 = nn.add %v, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>
}
