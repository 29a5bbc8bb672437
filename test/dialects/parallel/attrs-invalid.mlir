// RUN: autopar-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the dist.* attribute verifiers
// (dialects/parallel/DistDialectAttrs.cpp): a wrong kind or value, the
// wrong place, an unknown name.

// expected-error @+1 {{'dist.zero_stage' must be an i64 ZeRO stage in [0, 3], got 4 : i64}}
module attributes {dist.zero_stage = 4 : i64} {
}

// -----

// expected-error @+1 {{'dist.offload' must be "none" or "cpu", got "nvme"}}
module attributes {dist.offload = "nvme"} {
}

// -----

// expected-error @+1 {{'dist.bucket_bytes' must be an i64 >= 1, got 0 : i64}}
module attributes {dist.bucket_bytes = 0 : i64} {
}

// -----

// expected-error @+1 {{'dist.model_flops' must be an i64 >= 0, got 1.000000e+00 : f64}}
module attributes {dist.model_flops = 1.0 : f64} {
}

// -----

// expected-error @+1 {{dist.pipeline_schedule: 'actions' must be one array<i32> of (op, stage, micro) triples per rank}}
module attributes {dist.pipeline_schedule = {ranks = 2 : i64, actions = [array<i32: 0, 0, 0>], transfers = [array<i32>, array<i32>]}} {
}

// -----

// expected-error @+1 {{dist.pipeline_schedule: 'actions' and 'transfers' need 'ranks'}}
module attributes {dist.pipeline_schedule = {actions = [array<i32: 0, 0, 0>]}} {
}

// -----

module {
  // expected-error @+1 {{'dist.zero_stage' belongs on the module}}
  func.func @f() attributes {dist.zero_stage = 1 : i64} {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'dist.phase' must be "forward", "backward", "input" or "weight", got "both"}}
  func.func @f() attributes {dist.phase = "both"} {
    return
  }
}

// -----

// expected-error @+1 {{'dist.pipeline' belongs on a function}}
module attributes {dist.pipeline = {}} {
}

// -----

module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.shardings' must be one #dist.sharding per result}}
    %0 = nn.neg %x {dist.shardings = []} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.stage' must be an i64 >= 0, got -1 : i64}}
    %0 = nn.neg %x {dist.stage = -1 : i64} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.sharding' belongs on function arguments and results}}
    %0 = nn.neg %x {dist.sharding = 1 : i64} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.context_parallel' belongs on nn.attention and nn.attention_grad}}
    %0 = nn.neg %x {dist.context_parallel = "ring"} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  func.func @f(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
    // expected-error @+1 {{'dist.context_parallel' must be "ulysses" or "ring", got "all_gather"}}
    %o, %l = nn.attention %q, %q, %q {causal = true, scale = 0.5 : f64, dist.context_parallel = "all_gather"} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
    return %o : tensor<1x2x4x8xf32>
  }
}

// -----

// expected-error @+1 {{unknown dist attribute 'dist.zero_stages'}}
module attributes {dist.zero_stages = 1 : i64} {
}

// -----

module {
  // expected-error @+1 {{'dist.sharding' of argument #0 must be a #dist.sharding, got "dp"}}
  func.func @f(%x: tensor<4xf32> {dist.sharding = "dp"}) {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'dist.block_type' of argument #0 must be a type, got 2 : i64}}
  func.func @f(%x: tensor<4xf32> {dist.block_type = 2 : i64}) {
    return
  }
}

// -----

module {
  // expected-error @+1 {{unknown dist argument attribute 'dist.zeros'}}
  func.func @f(%x: tensor<4xf32> {dist.zeros}) {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'dist.zero' of result #0 must be a unit attribute, got true}}
  func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {dist.zero = true}) {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{unknown dist result attribute 'dist.block_type'}}
  func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {dist.block_type = tensor<4xf32>}) {
    return %x : tensor<4xf32>
  }
}
