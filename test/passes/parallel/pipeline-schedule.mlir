// The plan's pipeline schedule (the pass's options) over the stages'
// phases; one case per file of split-file.
// RUN: split-file %s %t
// RUN: autopar-opt %t/1f1b.mlir --autopar-dist-pipeline-schedule='link-bytes-per-second=1e30 ranks=2 micro-batches=4' --verify-diagnostics | FileCheck %t/1f1b.mlir
// RUN: autopar-opt %t/no-phases.mlir --autopar-dist-pipeline-schedule='link-bytes-per-second=1e30 ranks=2' --verify-diagnostics
// RUN: autopar-opt %t/bad-counts.mlir --autopar-dist-pipeline-schedule='ranks=2 schedule=interleaved micro-batches=3' --verify-diagnostics

//--- 1f1b.mlir
// Two stages' phases (forward and backward), 4 micro-batches, 1F1B: the
// first rank keeps 2 micro-batches in flight, the second 1 (min(p - i,
// m)); a micro-batch in flight keeps the saved values and the received
// activation (stage 1: 2 x 64 bytes). With equal stages and no transfer
// cost (a link of 1e30 B/s) the bubble is (p - 1) / (m + p - 1) = 1 / 5.

// Each phase's time (the simulation's input, which the report draws the
// predicted timeline from) is kept: equal forward and backward times, no
// weight phase.

// The schedule itself is recorded for the program writer: every rank's
// actions as (op, stage, micro-batch) triples, op 0 a forward and 1 a
// backward (rank 0: F0 F1 B0 F2 B1 F3 B2 B3; rank 1: F0 B0 F1 B1 ...), and
// its transfer groups as (before, receives, sends) then (gradient, stage,
// micro-batch) each: rank 0 sends F0's activation before its action 1.

// CHECK: dist.pipeline_schedule = {actions = [array<i32: 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 2, 1, 0, 1, 0, 0, 3, 1, 0, 2, 1, 0, 3>, array<i32: 0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 2, 1, 1, 2, 0, 1, 3, 1, 1, 3>], activation_bytes = array<i64: 128, 128>, backward_seconds = [[[T:.*]], [[T]]], bubble_fraction = {{0\.2000000[0-9]*|0\.1999999[0-9]*}} : f64, chunks = 1 : i64, forward_seconds = [[[T]], [[T]]], in_flight = array<i64: 2, 1>, micro_batches = 4 : i64, ranks = 2 : i64, schedule = "1f1b"
// CHECK-SAME: stash_bytes = array<i64: 64, 128>
// CHECK-SAME: transfers = [array<i32: 1, 0, 1, 0, 0, 0, 2, 1, 1, 1, 1, 0, 0, 0, 1,
// CHECK-SAME: weight_seconds = [0.000000e+00, 0.000000e+00]
module {
  func.func @s0_f(%w: tensor<4x4xf32> {nn.param = "w0"}, %x: tensor<4x4xf32> {nn.input = "x"})
      -> (tensor<4x4xf32> {nn.output = "stage_output"}, tensor<4x4xf32> {nn.saved = "f0"})
      attributes {dist.phase = "forward", dist.stage = 0 : i64} {
    %0 = nn.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = nn.tanh %0 : tensor<4x4xf32>
    return %1, %1 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func @s0_b(%g: tensor<4x4xf32> {nn.output_grad}, %t: tensor<4x4xf32> {nn.saved = "f0"})
      -> (tensor<4x4xf32> {nn.grad = "w0"})
      attributes {dist.phase = "backward", dist.stage = 0 : i64} {
    %0 = nn.mul %g, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = nn.tanh %0 : tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
  func.func @s1_f(%w: tensor<4x4xf32> {nn.param = "w1"}, %x: tensor<4x4xf32> {nn.stage_input})
      -> (tensor<4x4xf32> {nn.output = "loss"}, tensor<4x4xf32> {nn.saved = "f0"})
      attributes {dist.phase = "forward", dist.stage = 1 : i64} {
    %0 = nn.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = nn.tanh %0 : tensor<4x4xf32>
    return %1, %1 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.func @s1_b(%x: tensor<4x4xf32> {nn.stage_input}, %t: tensor<4x4xf32> {nn.saved = "f0"})
      -> (tensor<4x4xf32> {nn.grad = "w1"}, tensor<4x4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 1 : i64} {
    %0 = nn.mul %x, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = nn.tanh %0 : tensor<4x4xf32>
    return %1, %0 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

//--- no-phases.mlir
// A stage without its phases.

// expected-error @+1 {{pipeline stage 1 has no forward and backward phases (run autopar-dist-pipeline-phases)}}
module {
  func.func @s0_f(%x: tensor<4xf32> {nn.input = "x"}) -> (tensor<4xf32> {nn.output = "stage_output"})
      attributes {dist.phase = "forward", dist.stage = 0 : i64} {
    return %x : tensor<4xf32>
  }
  func.func @s0_b(%g: tensor<4xf32> {nn.output_grad}) -> (tensor<4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 0 : i64} {
    return %g : tensor<4xf32>
  }
}

//--- bad-counts.mlir
// The interleaved schedule needs chunks >= 2.
// expected-error @+1 {{interleaved}}
module {
  func.func @s0_f(%x: tensor<4xf32> {nn.input = "x"}) -> (tensor<4xf32> {nn.output = "stage_output"})
      attributes {dist.phase = "forward", dist.stage = 0 : i64} {
    return %x : tensor<4xf32>
  }
  func.func @s0_b(%g: tensor<4xf32> {nn.output_grad}) -> (tensor<4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 0 : i64} {
    return %g : tensor<4xf32>
  }
  func.func @s1_f(%x: tensor<4xf32> {nn.stage_input}) -> (tensor<4xf32> {nn.output = "loss"})
      attributes {dist.phase = "forward", dist.stage = 1 : i64} {
    return %x : tensor<4xf32>
  }
  func.func @s1_b(%x: tensor<4xf32> {nn.stage_input}) -> (tensor<4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 1 : i64} {
    return %x : tensor<4xf32>
  }
}
