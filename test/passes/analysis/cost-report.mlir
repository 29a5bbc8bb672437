// RUN: autopar-opt %s --autopar-cost-report --split-input-file -o /dev/null | FileCheck %s

// FLOPs: 2 M N K per product (matmul 2 x 8 x 16 x 4, gemm with a transposed
// a: 2 x 4 x 16 x 8). Bytes: parameters and inputs apart. Collectives, per
// rank, over the group their axes name (ring algorithms): an all-reduce of
// S bytes over g ranks sends 2 (g-1)/g S; a reduce-scatter or all-gather
// (g-1) pieces; a flat ZeRO scatter or gather (g-1) ceil(n/g) elements; a
// send its tensor.

// CHECK-LABEL: func @f
// CHECK-NEXT: flops: 2048
// CHECK-NEXT: bytes: params 256, inputs 128, results 128, arena 0
// CHECK-NEXT: all_gather [tp]: 128 bytes
// CHECK-NEXT: all_reduce [dp]: 192 bytes
// CHECK-NEXT: all_reduce [dp,tp]: 224 bytes
// CHECK-NEXT: reduce_scatter [dp]: 24 bytes
// CHECK-NEXT: send [pp]: 128 bytes
dist.mesh @m axes = [dp = 4, pp = 2, tp = 2]
func.func @f(%w: tensor<4x16xf32> {nn.param = "w"},
             %x: tensor<8x4xf32> {nn.input = "x"}) -> tensor<8x4xf32> {
  %0 = nn.matmul %x, %w : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %1 = nn.gemm %x, %0 {trans_a = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %2 = dist.all_reduce sum %x on @m axes = [dp] : tensor<8x4xf32>
  %3 = dist.all_reduce sum %x on @m axes = [dp, tp] : tensor<8x4xf32>
  %4 = dist.all_gather %x on @m axes = [tp] dim = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
  // 6 elements over 4 ranks: chunks of 2, 3 of them sent, 4 bytes each.
  %c = nn.constant dense<1.0> : tensor<6xf32>
  %5 = dist.zero_scatter sum %c on @m axes = [dp] : tensor<6xf32> -> tensor<2xf32>
  dist.send %x on @m axis = pp to 1 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}

// -----

// Without collectives or products: zero FLOPs, no communication; the arena
// after memory planning.
// CHECK-LABEL: func @g
// CHECK-NEXT: flops: 0
// CHECK-NEXT: bytes: params 0, inputs 16, results 16, arena 64
// CHECK-NOT: bytes
func.func @g(%x: tensor<4xf32> {nn.input = "x"}) -> tensor<4xf32> attributes {nn.arena_bytes = 64 : i64} {
  return %x : tensor<4xf32>
}
