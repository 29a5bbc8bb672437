// RUN: autopar-opt %s --autopar-dist-context-parallel=mode=ring --split-input-file --verify-diagnostics | FileCheck %s

// Ring (cp = 2): a causal attention gets its positions (as in all_gather
// mode) and every attention and gradient is marked
// dist.context_parallel = "ring" (spmdization passes the blocks of keys
// and values around the cp ring); a non-causal one needs no positions.

// CHECK-LABEL: func.func @marked
// CHECK: %[[P:.*]] = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK: nn.attention %arg0, %arg1, %arg2 positions %[[P]] {causal = true, dist.context_parallel = "ring", scale
// CHECK: nn.attention %arg0, %arg1, %arg2 {causal = false, dist.context_parallel = "ring", scale
// CHECK: nn.attention_grad %arg0, %arg1, %arg2 positions %arg4, {{.*}} {causal = true, dist.context_parallel = "ring", scale
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @marked(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>,
                    %g: tensor<1x2x8x4xf32>, %p: tensor<8xi64>)
      -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %o2, %l2 = nn.attention %q, %k, %v {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v positions %p, %o, %l, %g {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<8xi64>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
    return %o2, %dq, %dk : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @masked(%q: tensor<1x2x8x4xf32>, %m: tensor<1x1x8x8xi1>) -> tensor<1x2x8x4xf32> {
    // expected-error @+1 {{'nn.attention' op cannot run in context_parallel.mode "ring": it has a mask, which its blocks of keys would have to carry (ring attention takes causal or unmasked ones)}}
    %o, %l = nn.attention %q, %q, %q mask %m {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1x8x8xi1>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @no_positions(%q: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x8x4xf32> {
    // expected-error @+1 {{'nn.attention_grad' op cannot run in context_parallel.mode "ring": it is causal without positions (give them before autodiff: mode all_gather)}}
    %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %q, %l, %q {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
    return %dq : tensor<1x2x8x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @cross(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32> {
    // expected-error @+1 {{cannot run in context_parallel.mode "ring": it attends 4 query rows to 8 keys (the keys are split with the queries: self-attention only)}}
    %o, %l = nn.attention %q, %k, %k {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x4x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
    return %o : tensor<1x2x4x4xf32>
  }
}
