// RUN: autopar-opt %s | autopar-opt | FileCheck %s
// RUN: autopar-opt %s --mlir-print-op-generic | autopar-opt | FileCheck %s
// RUN: autopar-opt %s --cse --canonicalize | FileCheck %s --check-prefix=EFFECTS

// Round trip of every dist op and of every form of #dist.sharding (custom and
// generic form), and the effects that keep communication from being merged
// or dropped.

//===----------------------------------------------------------------------===//
// Meshes
//===----------------------------------------------------------------------===//

// CHECK: dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
// A size-1 axis and an axis name that is not a bare identifier.
// CHECK: dist.mesh @single axes = [dp = 1, "dp-inner" = 4]
dist.mesh @single axes = [dp = 1, "dp-inner" = 4]

//===----------------------------------------------------------------------===//
// Shardings
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @shardings(
func.func @shardings(%x: tensor<8x4x6xf32>, %s: tensor<f32>, %y: tensor<8x16xf32>) {
  // CHECK: dist.shard %{{.*}} : tensor<8x4x6xf32> to #dist.sharding<@m, [{{\[}}dp], [], [tp]]>
  %0 = dist.shard %x : tensor<8x4x6xf32> to #dist.sharding<@m, [[dp], [], [tp]]>
  // CHECK: dist.shard %{{.*}} {priority = 2 : i64} : tensor<8x4x6xf32> to #dist.sharding<@m, [{{\[}}], [tp], []]>
  %p = dist.shard %x {priority = 2 : i64} : tensor<8x4x6xf32> to #dist.sharding<@m, [[], [tp], []]>
  // Fully replicated.
  // CHECK: dist.shard %{{.*}} : tensor<8x4x6xf32> to #dist.sharding<@m, [{{\[}}], [], []]>
  %1 = dist.shard %x : tensor<8x4x6xf32> to #dist.sharding<@m, [[], [], []]>
  // Two axes on one dim, major to minor.
  // CHECK: dist.shard %{{.*}} : tensor<8x4x6xf32> to #dist.sharding<@m, [{{\[}}dp, tp], [], []]>
  %2 = dist.shard %x : tensor<8x4x6xf32> to #dist.sharding<@m, [[dp, tp], [], []]>
  // Partial sums (the kind `sum` is implied and not printed).
  // CHECK: dist.shard %{{.*}} : tensor<8x16xf32> to #dist.sharding<@m, [{{\[}}dp], []], partial = [tp]>
  %3 = dist.shard %y : tensor<8x16xf32> to #dist.sharding<@m, [[dp], []], partial = [tp]>
  // CHECK: dist.shard %{{.*}} : tensor<8x16xf32> to #dist.sharding<@m, [{{\[}}dp], []], partial = [tp]>
  %4 = dist.shard %y : tensor<8x16xf32> to #dist.sharding<@m, [[dp], []], partial sum = [tp]>
  // CHECK: dist.shard %{{.*}} : tensor<8x16xf32> to #dist.sharding<@m, [{{\[}}], []], partial max = [pp, tp]>
  %5 = dist.shard %y : tensor<8x16xf32> to #dist.sharding<@m, [[], []], partial max = [pp, tp]>
  // An empty partial list is no partial axis.
  // CHECK: dist.shard %{{.*}} : tensor<8x16xf32> to #dist.sharding<@m, [{{\[}}dp], []]>
  %6 = dist.shard %y : tensor<8x16xf32> to #dist.sharding<@m, [[dp], []], partial = []>
  // A scalar: no dims, partial only.
  // CHECK: dist.shard %{{.*}} : tensor<f32> to #dist.sharding<@m, [], partial = [dp]>
  %7 = dist.shard %s : tensor<f32> to #dist.sharding<@m, [], partial = [dp]>
  // Quoted axis names; a size-1 axis splits anything.
  // CHECK: dist.shard %{{.*}} : tensor<8x16xf32> to #dist.sharding<@single, [{{\[}}"dp-inner"], [dp]]>
  %8 = dist.shard %y : tensor<8x16xf32> to #dist.sharding<@single, [["dp-inner"], [dp]]>
  return
}

// The attribute on its own (e.g. as a discardable attribute).
// CHECK-LABEL: func.func @sharding_attribute()
// CHECK-SAME: test.sharding = #dist.sharding<@m, [{{\[}}tp], []], partial max = [dp]>
func.func @sharding_attribute() attributes {test.sharding = #dist.sharding<@m, [[tp], []], partial max = [dp]>} {
  return
}

//===----------------------------------------------------------------------===//
// Local slicing and collectives
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @collectives(
func.func @collectives(%x: tensor<4x8xf32>, %i: tensor<8x8xi32>) {
  // CHECK: dist.tensor_split %{{.*}} on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %0 = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  // CHECK: dist.tensor_split %{{.*}} on @m axes = [dp, tp] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  %1 = dist.tensor_split %x on @m axes = [dp, tp] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  // CHECK: dist.axis_index on @m axes = [tp] : tensor<i64>
  %idx = dist.axis_index on @m axes = [tp] : tensor<i64>
  // CHECK: dist.axis_index on @m axes = [dp, tp] : tensor<i32>
  %idx2 = dist.axis_index on @m axes = [dp, tp] : tensor<i32>
  // CHECK: dist.all_reduce sum %{{.*}} on @m axes = [tp] : tensor<4x8xf32>
  %2 = dist.all_reduce sum %x on @m axes = [tp] : tensor<4x8xf32>
  // CHECK: dist.all_reduce max %{{.*}} on @m axes = [dp, tp] : tensor<8x8xi32>
  %3 = dist.all_reduce max %i on @m axes = [dp, tp] : tensor<8x8xi32>
  // CHECK: dist.all_gather %{{.*}} on @m axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  %4 = dist.all_gather %0 on @m axes = [tp] dim = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  // CHECK: dist.all_gather %{{.*}} on @m axes = [dp, tp] dim = 0 : tensor<1x8xf32> -> tensor<4x8xf32>
  %5 = dist.all_gather %1 on @m axes = [dp, tp] dim = 0 : tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: dist.reduce_scatter sum %{{.*}} on @m axes = [dp] dim = 0 : tensor<8x8xi32> -> tensor<4x8xi32>
  %6 = dist.reduce_scatter sum %i on @m axes = [dp] dim = 0 : tensor<8x8xi32> -> tensor<4x8xi32>
  // CHECK: dist.reduce_scatter max %{{.*}} on @m axes = [pp, tp] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %7 = dist.reduce_scatter max %x on @m axes = [pp, tp] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  // CHECK: dist.all_to_all %{{.*}} on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  %8 = dist.all_to_all %x on @m axes = [tp] split_dim = 1 concat_dim = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  // CHECK: dist.all_to_all %{{.*}} on @m axes = [dp, tp] split_dim = 0 concat_dim = 1 : tensor<8x8xi32> -> tensor<2x32xi32>
  %9 = dist.all_to_all %i on @m axes = [dp, tp] split_dim = 0 concat_dim = 1 : tensor<8x8xi32> -> tensor<2x32xi32>
  // CHECK: dist.all_to_all %{{.*}} on @m axes = [tp] split_dim = 0 concat_dim = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %10 = dist.all_to_all %x on @m axes = [tp] split_dim = 0 concat_dim = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: dist.shift %{{.*}} on @m axes = [tp] offset = 1 : tensor<4x8xf32>
  %11 = dist.shift %x on @m axes = [tp] offset = 1 : tensor<4x8xf32>
  // CHECK: dist.shift %{{.*}} on @m axes = [dp, tp] offset = -3 : tensor<8x8xi32>
  %12 = dist.shift %i on @m axes = [dp, tp] offset = -3 : tensor<8x8xi32>
  return
}

//===----------------------------------------------------------------------===//
// ZeRO flat shards and offload
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @zero(
func.func @zero(%piece: tensor<5xf32>, %grad: tensor<3x3xf32>, %even: tensor<8x4xbf16>) {
  // 9 elements over 2 ranks: ceil(9 / 2) = 5.
  // CHECK: dist.zero_gather %{{.*}} on @m axes = [dp] : tensor<5xf32> -> tensor<3x3xf32>
  %0 = dist.zero_gather %piece on @m axes = [dp] : tensor<5xf32> -> tensor<3x3xf32>
  // CHECK: dist.zero_scatter sum %{{.*}} on @m axes = [dp] : tensor<3x3xf32> -> tensor<5xf32>
  %1 = dist.zero_scatter sum %grad on @m axes = [dp] : tensor<3x3xf32> -> tensor<5xf32>
  // 32 elements over the 8 ranks of dp x pp x tp.
  // CHECK: dist.zero_scatter max %{{.*}} on @m axes = [dp, pp, tp] : tensor<8x4xbf16> -> tensor<4xbf16>
  %2 = dist.zero_scatter max %even on @m axes = [dp, pp, tp] : tensor<8x4xbf16> -> tensor<4xbf16>
  // CHECK: dist.zero_gather %{{.*}} on @m axes = [dp, pp, tp] : tensor<4xbf16> -> tensor<8x4xbf16>
  %3 = dist.zero_gather %2 on @m axes = [dp, pp, tp] : tensor<4xbf16> -> tensor<8x4xbf16>
  // CHECK: %[[H:.*]] = dist.offload %{{.*}} : tensor<5xf32>
  %h = dist.offload %1 : tensor<5xf32>
  // CHECK: dist.fetch %[[H]] : tensor<5xf32>
  %d = dist.fetch %h : tensor<5xf32>
  return
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @pipeline(
func.func @pipeline(%x: tensor<4x8xf32>, %w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // CHECK: dist.pipeline_stage 0 on @m axis = pp (%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x8xf32>) -> () {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>):
  // CHECK-NEXT: %[[H:.*]] = nn.matmul %[[X]], %[[W]]
  // CHECK-NEXT: dist.send %[[H]] on @m axis = pp to 1 : tensor<4x8xf32>
  // CHECK-NEXT: }
  dist.pipeline_stage 0 on @m axis = pp (%x, %w0) : (tensor<4x8xf32>, tensor<8x8xf32>) -> () {
  ^bb0(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>):
    %h = nn.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    dist.send %h on @m axis = pp to 1 : tensor<4x8xf32>
  }
  // CHECK: %[[Y:.*]] = dist.pipeline_stage 1 on @m axis = pp (%{{.*}}) : (tensor<8x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0(%[[W1:.*]]: tensor<8x8xf32>):
  // CHECK-NEXT: %[[R:.*]] = dist.recv on @m axis = pp from 0 : tensor<4x8xf32>
  // CHECK-NEXT: %[[O:.*]] = nn.matmul %[[R]], %[[W1]]
  // CHECK-NEXT: dist.yield %[[O]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  %y = dist.pipeline_stage 1 on @m axis = pp (%w1) : (tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%w: tensor<8x8xf32>):
    %r = dist.recv on @m axis = pp from 0 : tensor<4x8xf32>
    %o = nn.matmul %r, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    dist.yield %o : tensor<4x8xf32>
  }
  // A stage without operands; a stage may use another's result in the
  // global view.
  // CHECK: dist.pipeline_stage 0 on @m axis = pp () : () -> tensor<f32> {
  %c = dist.pipeline_stage 0 on @m axis = pp () : () -> tensor<f32> {
    %k = nn.constant dense<1.0> : tensor<f32>
    dist.yield %k : tensor<f32>
  }
  // CHECK: dist.pipeline_stage 1 on @m axis = pp (%{{.*}}) : (tensor<f32>) -> () {
  dist.pipeline_stage 1 on @m axis = pp (%c) : (tensor<f32>) -> () {
  ^bb0(%k: tensor<f32>):
  }
  // Send and receive outside any stage.
  // CHECK: dist.send %{{.*}} on @m axis = tp to 1 : tensor<4x8xf32>
  dist.send %x on @m axis = tp to 1 : tensor<4x8xf32>
  // CHECK: dist.recv on @m axis = tp from 0 : tensor<4x8xf32>
  %r = dist.recv on @m axis = tp from 0 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// Effects: CSE and canonicalization keep every communication
//===----------------------------------------------------------------------===//

// Two identical all-reduces are two communications; unused collectives,
// receives, offloads and fetches stay; unused pure ops (shard, tensor_split)
// go.
// EFFECTS-LABEL: func.func @effects(
// EFFECTS-NOT: dist.shard
// EFFECTS-NOT: dist.tensor_split
// EFFECTS: %[[A:.*]] = dist.all_reduce sum %[[X:[^ ]*]] on @m axes = [tp]
// EFFECTS-NEXT: %[[B:.*]] = dist.all_reduce sum %[[X]] on @m axes = [tp]
// EFFECTS-NEXT: dist.all_gather
// EFFECTS-NEXT: dist.reduce_scatter
// EFFECTS-NEXT: dist.all_to_all
// EFFECTS-NEXT: dist.shift
// EFFECTS-NEXT: dist.zero_gather
// EFFECTS-NEXT: dist.zero_scatter
// EFFECTS-NEXT: dist.recv
// EFFECTS-NEXT: %[[H:.*]] = dist.offload
// EFFECTS-NEXT: dist.fetch %[[H]]
// EFFECTS-NEXT: dist.fetch %[[H]]
// EFFECTS-NEXT: dist.pipeline_stage 1
// EFFECTS-NEXT: ^bb0
// EFFECTS-NEXT: dist.send
// EFFECTS-NEXT: }
// EFFECTS-NEXT: nn.add %[[A]], %[[B]]
func.func @effects(%x: tensor<4x8xf32>, %p: tensor<5xf32>) -> tensor<4x8xf32> {
  %s = dist.shard %x : tensor<4x8xf32> to #dist.sharding<@m, [[dp], []]>
  %t = dist.tensor_split %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %a = dist.all_reduce sum %x on @m axes = [tp] : tensor<4x8xf32>
  %b = dist.all_reduce sum %x on @m axes = [tp] : tensor<4x8xf32>
  %g = dist.all_gather %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
  %rs = dist.reduce_scatter sum %x on @m axes = [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %aa = dist.all_to_all %x on @m axes = [tp] split_dim = 0 concat_dim = 1 : tensor<4x8xf32> -> tensor<2x16xf32>
  %sh = dist.shift %x on @m axes = [tp] offset = 1 : tensor<4x8xf32>
  %zg = dist.zero_gather %p on @m axes = [dp] : tensor<5xf32> -> tensor<3x3xf32>
  %zs = dist.zero_scatter sum %x on @m axes = [dp] : tensor<4x8xf32> -> tensor<16xf32>
  %r = dist.recv on @m axis = pp from 0 : tensor<4x8xf32>
  %h = dist.offload %x : tensor<4x8xf32>
  %d0 = dist.fetch %h : tensor<4x8xf32>
  %d1 = dist.fetch %h : tensor<4x8xf32>
  // A stage that only computes and whose result is unused is dropped; one
  // that sends is not.
  %unused = dist.pipeline_stage 0 on @m axis = pp (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%v: tensor<4x8xf32>):
    %n = nn.neg %v : tensor<4x8xf32>
    dist.yield %n : tensor<4x8xf32>
  }
  dist.pipeline_stage 1 on @m axis = pp (%x) : (tensor<4x8xf32>) -> () {
  ^bb0(%v: tensor<4x8xf32>):
    dist.send %v on @m axis = pp to 0 : tensor<4x8xf32>
  }
  %sum = nn.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum : tensor<4x8xf32>
}
