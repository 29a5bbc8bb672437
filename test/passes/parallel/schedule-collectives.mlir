// RUN: autopar-opt %s --autopar-dist-schedule-collectives --split-input-file | FileCheck %s

// Buckets of 64 bytes: %g1 (64 bytes) fills bucket 0 and is issued right
// after it is computed; %g2 and %g3 (32 bytes each) share bucket 1, issued
// after %g3. The loss's all-reduce is not a gradient and stays put.

// CHECK-LABEL: func.func @buckets
// CHECK: %[[G1:.*]] = nn.exp %arg0 : tensor<16xf32>
// CHECK-NEXT: dist.all_reduce sum %[[G1]] on @mesh axes = [dp] {dist.bucket = 0 : i64}
// CHECK-NEXT: %[[G2:.*]] = nn.exp %arg1 : tensor<8xf32>
// CHECK-NEXT: %[[G3:.*]] = nn.tanh %arg1 : tensor<8xf32>
// CHECK-NEXT: dist.all_reduce sum %[[G2]] on @mesh axes = [dp] {dist.bucket = 1 : i64}
// CHECK-NEXT: dist.all_reduce sum %[[G3]] on @mesh axes = [dp] {dist.bucket = 1 : i64}
// CHECK-NEXT: nn.reduce_sum
// CHECK-NEXT: dist.all_reduce sum %{{.*}} on @mesh axes = [dp] : tensor<f32>
module attributes {dist.bucket_bytes = 64 : i64} {
  dist.mesh @mesh axes = [dp = 2]
  func.func @buckets(%a: tensor<16xf32>, %b: tensor<8xf32>)
      -> (tensor<f32> {nn.output = "loss"}, tensor<16xf32> {nn.grad = "a"},
          tensor<8xf32> {nn.grad = "b"}, tensor<8xf32> {nn.grad = "c"}) {
    %g1 = nn.exp %a : tensor<16xf32>
    %g2 = nn.exp %b : tensor<8xf32>
    %g3 = nn.tanh %b : tensor<8xf32>
    %l = nn.reduce_sum %a {axes = array<i64: 0>, keepdims = false} : tensor<16xf32> -> tensor<f32>
    %r0 = dist.all_reduce sum %l on @mesh axes = [dp] : tensor<f32>
    %r1 = dist.all_reduce sum %g1 on @mesh axes = [dp] : tensor<16xf32>
    %r2 = dist.all_reduce sum %g2 on @mesh axes = [dp] : tensor<8xf32>
    %r3 = dist.all_reduce sum %g3 on @mesh axes = [dp] : tensor<8xf32>
    return %r0, %r1, %r2, %r3 : tensor<f32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Negative: a gradient collective with another user is not moved (moving
// it would not change its value, but it is not a pure gradient reduction).

// CHECK-LABEL: func.func @shared
// CHECK: nn.exp
// CHECK-NEXT: nn.tanh
// CHECK-NEXT: dist.all_reduce
// CHECK-NOT: dist.bucket
module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @shared(%a: tensor<4xf32>) -> (tensor<4xf32> {nn.grad = "a"}, tensor<4xf32>) {
    %g = nn.exp %a : tensor<4xf32>
    %t = nn.tanh %a : tensor<4xf32>
    %r = dist.all_reduce sum %g on @mesh axes = [dp] : tensor<4xf32>
    return %r, %r : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A gradient already pending over dp (reduced by the runtime once per step)
// and all-reduced over tp here (a replicated parameter under sequence
// parallelism) joins the once-per-step reduction: the all-reduce goes and
// the result is pending over dp and tp. Not deferred: a gradient not left
// pending (%b's, reduced here every micro-batch), one whose all-reduce is
// over an axis it is already pending over, a max, and a ZeRO gradient.

// CHECK-LABEL: func.func @deferred
// CHECK-SAME: -> (tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp, tp]>, nn.grad = "a"}
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]]>, nn.grad = "b"}
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, nn.grad = "c"}
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, nn.grad = "d"}
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, dist.zero, nn.grad = "e"}
// CHECK: %[[GA:.*]] = nn.exp %arg0
// CHECK-NOT: dist.all_reduce sum %[[GA]]
// CHECK: dist.all_reduce sum %{{.*}} on @mesh axes = [tp]
// CHECK: dist.all_reduce sum %{{.*}} on @mesh axes = [dp]
// CHECK: dist.all_reduce max %{{.*}} on @mesh axes = [tp]
// CHECK: dist.all_reduce sum %{{.*}} on @mesh axes = [tp]
// CHECK: return %[[GA]],
module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @deferred(%a: tensor<4xf32>)
      -> (tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]], partial = [dp]>, nn.grad = "a"},
          tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]]>, nn.grad = "b"},
          tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]], partial = [dp]>, nn.grad = "c"},
          tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]], partial = [dp]>, nn.grad = "d"},
          tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [[]], partial = [dp]>, dist.zero, nn.grad = "e"}) {
    %ga = nn.exp %a : tensor<4xf32>
    %gb = nn.tanh %a : tensor<4xf32>
    %gc = nn.neg %a : tensor<4xf32>
    %gd = nn.sqrt %a : tensor<4xf32>
    %ge = nn.relu %a : tensor<4xf32>
    %ra = dist.all_reduce sum %ga on @mesh axes = [tp] : tensor<4xf32>
    %rb = dist.all_reduce sum %gb on @mesh axes = [tp] : tensor<4xf32>
    %rc = dist.all_reduce sum %gc on @mesh axes = [dp] : tensor<4xf32>
    %rd = dist.all_reduce max %gd on @mesh axes = [tp] : tensor<4xf32>
    %re = dist.all_reduce sum %ge on @mesh axes = [tp] : tensor<4xf32>
    return %ra, %rb, %rc, %rd, %re : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
