// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-attention))' --split-input-file | FileCheck %s

// The GPT export: scores * scale, a constant causal mask selecting -inf
// (true = masked), softmax, times v. One nn.attention, causal, no mask
// operand; k is k^T transposed back.

// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[KT:.*]]: tensor<2x4x16x8xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>)
// CHECK: %[[K:.*]] = nn.transpose %[[KT]] {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
// CHECK: %[[O:.*]], %{{.*}} = nn.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: nn.softmax
// CHECK-NOT: nn.matmul
// CHECK: return %[[O]]
func.func @causal(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %c = nn.constant dense<0.25> : tensor<f32>
  %y = nn.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %m = nn.constant dense<[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]> : tensor<8x8xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %m, %ninf, %y : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = nn.softmax %z {axis = 3 : i64} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// No mask, the scale as a division (BERT), rank 3: scale = 1 / 4.

// CHECK-LABEL: func.func @unmasked_div
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = false, scale = 2.500000e-01 : f64} : (tensor<3x5x8xf32>, tensor<3x6x8xf32>, tensor<3x6x8xf32>) -> (tensor<3x5x8xf32>, tensor<3x5xf32>)
// CHECK-NOT: nn.softmax
func.func @unmasked_div(%q: tensor<3x5x8xf32>, %kt: tensor<3x8x6xf32>, %v: tensor<3x6x8xf32>) -> tensor<3x5x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<3x5x8xf32>, tensor<3x8x6xf32>) -> tensor<3x5x6xf32>
  %c = nn.constant dense<4.0> : tensor<f32>
  %y = nn.div %s, %c : (tensor<3x5x6xf32>, tensor<f32>) -> tensor<3x5x6xf32>
  %p = nn.softmax %y {axis = 2 : i64} : tensor<3x5x6xf32> -> tensor<3x5x6xf32>
  %o = nn.matmul %p, %v : (tensor<3x5x6xf32>, tensor<3x6x8xf32>) -> tensor<3x5x8xf32>
  return %o : tensor<3x5x8xf32>
}

// -----

// A runtime mask where true means attend (where(c, s, -inf)): the mask is
// the condition itself; no scale (1).

// CHECK-LABEL: func.func @mask_attends
// CHECK-SAME: %[[C:[^:]*]]: tensor<2x1x4xi1>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[C]] {causal = false, scale = 1.000000e+00 : f64}
func.func @mask_attends(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>, %c: tensor<2x1x4xi1>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %c, %s, %ninf : (tensor<2x1x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// A constant mask that is not causal (row 0 attends only j = 1), true =
// masked: the op gets not(mask) as a where of bool constants.

// CHECK-LABEL: func.func @not_causal
// CHECK: %[[M:.*]] = nn.constant dense<{{.*}}> : tensor<2x2xi1>
// CHECK-DAG: %[[F:.*]] = nn.constant dense<false> : tensor<i1>
// CHECK-DAG: %[[T:.*]] = nn.constant dense<true> : tensor<i1>
// CHECK: %[[KEEP:.*]] = nn.where %[[M]], %[[F]], %[[T]] : (tensor<2x2xi1>, tensor<i1>, tensor<i1>) -> tensor<2x2xi1>
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[KEEP]] {causal = false
func.func @not_causal(%q: tensor<1x2x4xf32>, %kt: tensor<1x4x2xf32>, %v: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %s = nn.matmul %q, %kt : (tensor<1x2x4xf32>, tensor<1x4x2xf32>) -> tensor<1x2x2xf32>
  %m = nn.constant dense<[[true, false], [false, false]]> : tensor<2x2xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %m, %ninf, %s : (tensor<2x2xi1>, tensor<f32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<1x2x2xf32> -> tensor<1x2x2xf32>
  %o = nn.matmul %p, %v : (tensor<1x2x2xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %o : tensor<1x2x4xf32>
}

// -----

// The no-constant-folding export: a float `nn.tril` buffer (torch's
// tril(ones) causal mask, 8 x 8), sliced to T = S = 4 and compared with 0
// (true: masked). Causal; the mask computation is left for DCE.

// CHECK-LABEL: func.func @tril_buffer
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
func.func @tril_buffer(%bias: tensor<1x8x8xf32> {nn.param = "h.0.attn.bias", nn.tril}, %q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %b = nn.slice %bias {offsets = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<1x8x8xf32> -> tensor<1x4x4xf32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %m = nn.compare eq, %b, %zero : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %m, %ninf, %s : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// A slice off the diagonal (rows 1..4 of the 8 x 8 triangle over columns
// 0..4, T = 3 queries, S = 4 keys): row i attends j <= i + 1 = i + S - T,
// which is causal for a query block that ends the sequence.

// CHECK-LABEL: func.func @tril_offset
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
func.func @tril_offset(%bias: tensor<8x8xi1> {nn.param = "mask", nn.buffer, nn.tril}, %q: tensor<2x3x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x4xf32>) -> tensor<2x3x4xf32>
  %b = nn.slice %bias {offsets = array<i64: 1, 0>, strides = array<i64: 1, 1>} : tensor<8x8xi1> -> tensor<3x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %b, %s, %ninf : (tensor<3x4xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x4xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// A mask compared from positions: the column arange 0..3 >= the row
// arange 0..3 keeps j <= i. Causal.

// CHECK-LABEL: func.func @arange_ge
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
func.func @arange_ge(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %rows = nn.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %cols = nn.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %keep = nn.compare ge, %rows, %cols : (tensor<4x1xi64>, tensor<4xi64>) -> tensor<4x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The same from `nn.arange` buffers (the importer's mark on positions too
// large to inline), columns first: cols > rows is true where masked, and
// the rows start one later (T = 3 queries ending a sequence of S = 4).

// CHECK-LABEL: func.func @arange_buffers
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
func.func @arange_buffers(%rows: tensor<1x3x1xi64> {nn.param = "rows", nn.buffer, nn.arange = 1 : i64}, %cols: tensor<1x4xi64> {nn.param = "cols", nn.buffer, nn.arange = 0 : i64}, %q: tensor<2x3x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x4xf32>) -> tensor<2x3x4xf32>
  %masked = nn.compare gt, %cols, %rows : (tensor<1x4xi64>, tensor<1x3x1xi64>) -> tensor<1x3x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %masked, %ninf, %s : (tensor<1x3x4xi1>, tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x4xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// Negatives for causality: rows >= columns with the rows starting one
// later keeps j <= i + 1 of a square matrix (one key too many), a step of
// 2 is no arange, and buffers without `nn.arange` are unknown: each stays
// an explicit mask.

// CHECK-LABEL: func.func @arange_shifted
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal = false
func.func @arange_shifted(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %rows = nn.constant dense<[[1], [2], [3], [4]]> : tensor<4x1xi64>
  %cols = nn.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %keep = nn.compare ge, %rows, %cols : (tensor<4x1xi64>, tensor<4xi64>) -> tensor<4x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @arange_step2
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal = false
func.func @arange_step2(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %rows = nn.constant dense<[[0], [2], [4], [6]]> : tensor<4x1xi64>
  %cols = nn.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
  %keep = nn.compare ge, %rows, %cols : (tensor<4x1xi64>, tensor<4xi64>) -> tensor<4x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @unmarked_buffers
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal = false
func.func @unmarked_buffers(%rows: tensor<4x1xi64> {nn.param = "rows", nn.buffer}, %cols: tensor<4xi64> {nn.param = "cols", nn.buffer}, %q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %keep = nn.compare ge, %rows, %cols : (tensor<4x1xi64>, tensor<4xi64>) -> tensor<4x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Negative for causality: the same buffer without `nn.tril` is a mask
// operand (its value is not known at compile time).

// CHECK-LABEL: func.func @unknown_buffer
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal = false
func.func @unknown_buffer(%bias: tensor<8x8xi1> {nn.param = "mask", nn.buffer}, %q: tensor<2x3x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x4xf32>) -> tensor<2x3x4xf32>
  %b = nn.slice %bias {offsets = array<i64: 1, 0>, strides = array<i64: 1, 1>} : tensor<8x8xi1> -> tensor<3x4xi1>
  %ninf = nn.constant dense<0xFF800000> : tensor<f32>
  %z = nn.where %b, %s, %ninf : (tensor<3x4xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x4xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// Negative: the probabilities are also returned (another use), so the
// chain stays as it is.

// CHECK-LABEL: func.func @probs_used_twice
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @probs_used_twice(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %s = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %s {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// Negative: softmax over the query dim, a scale that is not a constant, a
// mask value that is not -inf, and broadcast batch dims: all left alone.

// CHECK-LABEL: func.func @not_attention
// CHECK-NOT: nn.attention
// CHECK-COUNT-4: nn.softmax
func.func @not_attention(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>, %v: tensor<2x4x8xf32>, %scale: tensor<f32>, %c: tensor<4x4xi1>, %q1: tensor<1x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %s0 = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p0 = nn.softmax %s0 {axis = 1 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o0 = nn.matmul %p0, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s1 = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %y1 = nn.mul %s1, %scale : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %p1 = nn.softmax %y1 {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o1 = nn.matmul %p1, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s2 = nn.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %big = nn.constant dense<-1.0e4> : tensor<f32>
  %z2 = nn.where %c, %big, %s2 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p2 = nn.softmax %z2 {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o2 = nn.matmul %p2, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s3 = nn.matmul %q1, %kt : (tensor<1x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p3 = nn.softmax %s3 {axis = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o3 = nn.matmul %p3, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o0, %o1, %o2, %o3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Hugging Face's forms: the masked scores filled with torch.finfo(float32).min
// (not -inf) where the mask is causal; and an additive causal mask (0 on and
// below the diagonal, finfo.min above), as a constant or an `nn.causal_bias`
// buffer, broadcast over the heads.

// CHECK-LABEL: func.func @finite_fill_causal
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f64}
// CHECK-NOT: nn.softmax
func.func @finite_fill_causal(%q: tensor<2x3x8xf32>, %kt: tensor<2x8x3xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x3xf32>) -> tensor<2x3x3xf32>
  %m = nn.constant dense<[[[true, false, false], [true, true, false], [true, true, true]]]> : tensor<1x3x3xi1>
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %z = nn.where %m, %s, %min : (tensor<1x3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// A finite fill with a mask that is not causal (row 0 masked whole: -inf
// would give NaN, finfo.min a uniform row): left alone.

// CHECK-LABEL: func.func @finite_fill_not_causal
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @finite_fill_not_causal(%q: tensor<2x3x8xf32>, %kt: tensor<2x8x3xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x3xf32>) -> tensor<2x3x3xf32>
  %m = nn.constant dense<[[[false, false, false], [true, true, false], [true, true, true]]]> : tensor<1x3x3xi1>
  %min = nn.constant dense<-3.40282347E+38> : tensor<f32>
  %z = nn.where %m, %s, %min : (tensor<1x3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// CHECK-LABEL: func.func @additive_causal_constant
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 5.000000e-01 : f64}
// CHECK-NOT: nn.add
func.func @additive_causal_constant(%q: tensor<2x2x3x8xf32>, %kt: tensor<2x2x8x3xf32>, %v: tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x2x3x8xf32>, tensor<2x2x8x3xf32>) -> tensor<2x2x3x3xf32>
  %c = nn.constant dense<0.5> : tensor<f32>
  %y = nn.mul %s, %c : (tensor<2x2x3x3xf32>, tensor<f32>) -> tensor<2x2x3x3xf32>
  %m = nn.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<2x1x3x3xf32>
  %z = nn.add %y, %m : (tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x2x3x3xf32>
  %p = nn.softmax %z {axis = 3 : i64} : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// masked_fill's -1e9 as the additive table's masked value.

// CHECK-LABEL: func.func @additive_causal_1e9
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f64}
func.func @additive_causal_1e9(%q: tensor<2x3x8xf32>, %kt: tensor<2x8x3xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x3xf32>) -> tensor<2x3x3xf32>
  %m = nn.constant dense<[[[0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0]]]> : tensor<1x3x3xf32>
  %z = nn.add %s, %m : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// An added constant of zeros (BERT's padding mask, all ones, folded): no
// mask.

// CHECK-LABEL: func.func @additive_zeros
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = false, scale = 1.000000e+00 : f64}
// CHECK-NOT: nn.add
func.func @additive_zeros(%q: tensor<2x3x8xf32>, %kt: tensor<2x8x3xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x3xf32>) -> tensor<2x3x3xf32>
  %m = nn.constant dense<-0.0> : tensor<2x1x3xf32>
  %z = nn.add %s, %m : (tensor<2x3x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// An added table that is not a causal mask (a bias of -1 above the
// diagonal): left alone.

// CHECK-LABEL: func.func @additive_not_causal
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @additive_not_causal(%q: tensor<2x3x8xf32>, %kt: tensor<2x8x3xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x3x8xf32>, tensor<2x8x3xf32>) -> tensor<2x3x3xf32>
  %m = nn.constant dense<[[[0.0, -1.0, -1.0], [0.0, 0.0, -1.0], [0.0, 0.0, 0.0]]]> : tensor<1x3x3xf32>
  %z = nn.add %s, %m : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32>
  %p = nn.softmax %z {axis = 2 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// CHECK-LABEL: func.func @additive_causal_buffer
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
func.func @additive_causal_buffer(%m: tensor<2x1x3x3xf32> {nn.param = "mask", nn.buffer, nn.causal_bias}, %q: tensor<2x2x3x8xf32>, %kt: tensor<2x2x8x3xf32>, %v: tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x2x3x8xf32>, tensor<2x2x8x3xf32>) -> tensor<2x2x3x3xf32>
  %z = nn.add %m, %s : (tensor<2x1x3x3xf32>, tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
  %p = nn.softmax %z {axis = 3 : i64} : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// A [T, T] causal buffer (torch.triu(full(-inf), 1) built in forward, folded
// by the exporter) broadcasts over the batch and heads: causal too.

// CHECK-LABEL: func.func @additive_causal_matrix
// CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
// CHECK-NOT: nn.softmax
func.func @additive_causal_matrix(%m: tensor<3x3xf32> {nn.param = "mask", nn.buffer, nn.causal_bias}, %q: tensor<2x2x3x8xf32>, %kt: tensor<2x2x8x3xf32>, %v: tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<2x2x3x8xf32>, tensor<2x2x8x3xf32>) -> tensor<2x2x3x3xf32>
  %z = nn.add %s, %m : (tensor<2x2x3x3xf32>, tensor<3x3xf32>) -> tensor<2x2x3x3xf32>
  %p = nn.softmax %z {axis = 3 : i64} : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<2x2x3x3xf32>, tensor<2x2x3x8xf32>) -> tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-attention{max-head-dim=8}))' --split-input-file | FileCheck %s --check-prefix=LIMIT
// With max-head-dim=8, 16 features per head stay unfused; 8 fuse.

// LIMIT-LABEL: func.func @causal
// LIMIT-NOT: nn.attention
// LIMIT-LABEL: func.func @unmasked_div
// LIMIT: nn.attention
