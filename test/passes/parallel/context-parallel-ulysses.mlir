// RUN: autopar-opt %s --autopar-dist-context-parallel=mode=ulysses --split-input-file --verify-diagnostics | FileCheck %s

// Ulysses (cp = 2): every attention and attention gradient is marked
// dist.context_parallel = "ulysses" (spmdization exchanges its sequence block for a block of the
// heads); no positions are added (each rank attends over the whole
// sequence), a mask that broadcasts over the heads is fine.

// CHECK-LABEL: func.func @marked
// CHECK-NOT: nn.constant
// CHECK: nn.attention %arg0, %arg1, %arg2 {causal = true, dist.context_parallel = "ulysses", scale
// CHECK: nn.attention %arg0, %arg1, %arg2 mask %arg3 {causal = false, dist.context_parallel = "ulysses", scale
// CHECK: nn.attention_grad %arg0, %arg1, %arg2, {{.*}} {causal = true, dist.context_parallel = "ulysses", scale
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @marked(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>,
                    %m: tensor<1x1x8x8xi1>, %g: tensor<1x2x8x4xf32>)
      -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
    %o, %l = nn.attention %q, %k, %v {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %o2, %l2 = nn.attention %q, %k, %v mask %m {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1x8x8xi1>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %l, %g {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
    return %o2, %dq, %dk : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 4, tp = 1]
  func.func @heads(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
    // expected-error @+1 {{'nn.attention' op cannot run in context_parallel.mode "ulysses": mesh.cp = 4 must divide its 8 query rows and its 2 heads}}
    %o, %l = nn.attention %q, %q, %q {causal = true, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 4, tp = 1]
  func.func @rows(%q: tensor<1x4x6x4xf32>) -> tensor<1x4x6x4xf32> {
    // expected-error @+1 {{mesh.cp = 4 must divide its 6 query rows and its 4 heads}}
    %o, %l = nn.attention %q, %q, %q {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x4x6x4xf32>, tensor<1x4x6x4xf32>, tensor<1x4x6x4xf32>) -> (tensor<1x4x6x4xf32>, tensor<1x4x6xf32>)
    return %o : tensor<1x4x6x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @cross(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32> {
    // expected-error @+1 {{cannot run in context_parallel.mode "ulysses": it attends 4 query rows to 8 keys (the keys are split with the queries: self-attention only)}}
    %o, %l = nn.attention %q, %k, %k {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x4x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
    return %o : tensor<1x2x4x4xf32>
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
  func.func @head_mask(%q: tensor<1x2x8x4xf32>, %m: tensor<2x8x8xi1>) -> tensor<1x2x8x4xf32> {
    // expected-error @+1 {{cannot run in context_parallel.mode "ulysses": its mask differs between heads}}
    %o, %l = nn.attention %q, %q, %q mask %m {causal = false, scale = 5.000000e-01 : f64}
        : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8x8xi1>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8xf32>)
    return %o : tensor<1x2x8x4xf32>
  }
}

// -----

// RUN: not autopar-opt %s --split-input-file --autopar-dist-context-parallel=mode=flash 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: autopar-dist-context-parallel: unknown mode 'flash' (expected all_gather, ulysses or ring)
module {
  dist.mesh @mesh axes = [dp = 1, pp = 1, cp = 2, tp = 1]
}
