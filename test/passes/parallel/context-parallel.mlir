// RUN: autopar-opt %s --autopar-dist-context-parallel --split-input-file --verify-diagnostics | FileCheck %s

// cp = 2: the causal attention gets the key position of each query row
// (S = T: 0..7); the non-causal one needs none.

// CHECK-LABEL: func.func @causal
// CHECK: %[[P:.*]] = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK: nn.attention %arg0, %arg1, %arg2 positions %[[P]] {causal = true
// CHECK: nn.attention %arg0, %arg1, %arg2 {causal = false
// CHECK-NOT: positions
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @causal(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>)
      -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %o2, %l2 = nn.attention %q, %k, %v {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o, %o2 : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  }
}

// -----

// Fewer queries than keys (a suffix of the sequence): positions S - T on.

// CHECK-LABEL: func.func @suffix
// CHECK: nn.constant dense<[4, 5, 6, 7]> : tensor<4xi64>
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @suffix(%q: tensor<1x1x4x4xf32>, %k: tensor<1x1x8x4xf32>, %v: tensor<1x1x8x4xf32>)
      -> tensor<1x1x4x4xf32> {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x1x4x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4xf32>)
    return %o : tensor<1x1x4x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 4, tp = 1]
  func.func @indivisible(%q: tensor<1x1x6x4xf32>, %k: tensor<1x1x6x4xf32>, %v: tensor<1x1x6x4xf32>)
      -> tensor<1x1x6x4xf32> {
    // expected-error @+1 {{'nn.attention' op has 6 query rows, which mesh.cp = 4 does not divide}}
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> (tensor<1x1x6x4xf32>, tensor<1x1x6xf32>)
    return %o : tensor<1x1x6x4xf32>
  }
}

// -----

// expected-error @+1 {{the mesh has no axis 'cp'}}
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
}

// -----

// With zig-zag chunks (the pass's zigzag option) the query rows come in 2 x
// cp chunks: 4 rows at cp = 4 are enough without it, not with it.
// RUN: not autopar-opt %s --split-input-file --autopar-dist-context-parallel=zigzag=true 2>&1 | FileCheck %s --check-prefix=ZIGZAG
// ZIGZAG: 'nn.attention' op has 6 query rows, which 2 x mesh.cp = 8 does not divide (zig-zag chunks; context_parallel.load_balance "none" needs mesh.cp to)
// ZIGZAG: 'nn.attention' op has 4 query rows, which 2 x mesh.cp = 8 does not divide
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 4, tp = 1]
  func.func @zigzag_rows(%q: tensor<1x1x4x4xf32>, %k: tensor<1x1x4x4xf32>, %v: tensor<1x1x4x4xf32>)
      -> tensor<1x1x4x4xf32> {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4xf32>)
    return %o : tensor<1x1x4x4xf32>
  }
}
