// RUN: autopar-opt %s --autopar-dist-pipeline-schedule="link-bytes-per-second=1e30" --split-input-file --verify-diagnostics | FileCheck %s

// Two stages' phases (forward and backward), 4 micro-batches, 1F1B: the
// first rank keeps 2 micro-batches in flight, the second 1 (min(p - i,
// m)); a micro-batch in flight keeps the saved values and the received
// activation (stage 1: 2 x 64 bytes). With equal stages and no transfer
// cost (a link of 1e30 B/s) the bubble is (p - 1) / (m + p - 1) = 1 / 5.

// Each phase's time (the simulation's input, which the report draws the
// predicted timeline from) is kept: equal forward and backward times, no
// weight phase.

// CHECK: dist.pipeline_schedule = {activation_bytes = array<i64: 128, 128>, backward_seconds = [[[T:.*]], [[T]]], bubble_fraction = {{0\.2000000[0-9]*|0\.1999999[0-9]*}} : f64, forward_seconds = [[[T]], [[T]]], in_flight = array<i64: 2, 1>, micro_batches = 4 : i64, schedule = "1f1b"
// CHECK-SAME: stash_bytes = array<i64: 64, 128>
// CHECK-SAME: weight_seconds = [0.000000e+00, 0.000000e+00]
module attributes {autopar.plan = {mesh = {pp = 2 : i64}, batch = {micro_batches = 4 : i64}}} {
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

// -----

// A stage without its phases.

// expected-error @+1 {{pipeline stage 1 has no forward and backward phases (run autopar-dist-pipeline-phases)}}
module attributes {autopar.plan = {mesh = {pp = 2 : i64}}} {
  func.func @s0_f(%x: tensor<4xf32> {nn.input = "x"}) -> (tensor<4xf32> {nn.output = "stage_output"})
      attributes {dist.phase = "forward", dist.stage = 0 : i64} {
    return %x : tensor<4xf32>
  }
  func.func @s0_b(%g: tensor<4xf32> {nn.output_grad}) -> (tensor<4xf32> {nn.input_grad})
      attributes {dist.phase = "backward", dist.stage = 0 : i64} {
    return %g : tensor<4xf32>
  }
}
