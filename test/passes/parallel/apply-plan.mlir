// The plan's mesh and per-parameter decisions, as autopar-apply-plan's
// options (compiler/plan/Pipeline.cpp builds them from plan.json): one
// case per file of split-file.
// RUN: split-file %s %t
// RUN: autopar-opt %t/marks.mlir --autopar-apply-plan='dp=2 frozen=wpe.* no-decay=*.bias' | FileCheck %t/marks.mlir
// RUN: autopar-opt %t/empty.mlir --autopar-apply-plan | FileCheck %t/empty.mlir
// RUN: autopar-opt %t/mesh.mlir --autopar-apply-plan='dp=2 pp=3 tp=4' | FileCheck %t/mesh.mlir
// RUN: autopar-opt %t/hybrid.mlir --autopar-apply-plan='dp=8 shard-size=2 tp=2' | FileCheck %t/hybrid.mlir
// RUN: autopar-opt %t/hybrid.mlir --autopar-apply-plan='dp=8 shard-size=8' | FileCheck %t/hybrid.mlir --check-prefix=FLAT
// RUN: autopar-opt %t/padding.mlir --autopar-apply-plan='padding-idx=*embed*=1' | FileCheck %t/padding.mlir
// RUN: autopar-opt %t/rows.mlir --autopar-apply-plan='frozen=wte.weight[0,3:5],wte.*[2,7],h.[01],mask[1],wpe.weight[1,0]' | FileCheck %t/rows.mlir
// RUN: autopar-opt %t/marks.mlir --autopar-apply-plan --mlir-print-op-generic -o /dev/null

//--- marks.mlir
// The plan's mesh, every axis (size 1 included), dp-major; the plan's
// frozen and no_decay globs as argument marks; each parameter's type as
// imported in nn.logical_type. Graph inputs get no logical type.

// CHECK: module {
// CHECK-NEXT: dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<8x4xf32> {nn.logical_type = tensor<8x4xf32>, nn.param = "wte.weight"}
// CHECK-SAME: %arg1: tensor<4x4xf32> {nn.frozen, nn.logical_type = tensor<4x4xf32>, nn.param = "wpe.weight"}
// CHECK-SAME: %arg2: tensor<4xf32> {nn.logical_type = tensor<4xf32>, nn.no_decay, nn.param = "ln.bias"}
// CHECK-SAME: %arg3: tensor<1x1x4x4xi1> {nn.buffer, nn.logical_type = tensor<1x1x4x4xi1>, nn.param = "mask"}
// CHECK-SAME: %arg4: tensor<2x4xi64> {nn.input = "idx"}
module {
  func.func @forward(%wte: tensor<8x4xf32> {nn.param = "wte.weight"},
                     %wpe: tensor<4x4xf32> {nn.param = "wpe.weight"},
                     %b: tensor<4xf32> {nn.param = "ln.bias"},
                     %m: tensor<1x1x4x4xi1> {nn.param = "mask", nn.buffer},
                     %idx: tensor<2x4xi64> {nn.input = "idx"}) -> tensor<8x4xf32> {
    return %wte : tensor<8x4xf32>
  }
}

//--- empty.mlir
// An empty plan is one device: every axis of size 1.
// CHECK: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

//--- mesh.mlir
// A tensor- and pipeline-parallel mesh is written as the plan says
// (autopar-annotate-sharding refuses it until those exist).
// CHECK: dist.mesh @mesh axes = [dp = 2, pp = 3, tp = 4]
module {
  func.func @forward(%w: tensor<4xf32> {nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

//--- padding.mlir
// padding_idx marks the gathers (along axis 0) of the matching tables, not
// other uses of them.
// CHECK: nn.param = "model.embed_tokens.weight"
// CHECK: nn.gather %arg0, %arg1 {axis = 0 : i64, nn.padding_idx = 1 : i64}
// CHECK: nn.transpose %arg0
// CHECK-NOT: nn.padding_idx
module {
  func.func @forward(%wte: tensor<8x4xf32> {nn.param = "model.embed_tokens.weight"},
                     %idx: tensor<2x4xi64> {nn.input = "idx"}) -> (tensor<2x4x4xf32>, tensor<4x8xf32>) {
    %0 = nn.gather %wte, %idx {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
    %1 = nn.transpose %wte {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    return %0, %1 : tensor<2x4x4xf32>, tensor<4x8xf32>
  }
}

//--- rows.mlir
// A frozen entry that matches no initializer as a glob but ends in a row
// list freezes those rows: merged over entries (2 and 3:5 -> [2, 5)) into
// nn.frozen_rows. "h.[01]" matches "h.1" as a glob: that tensor is frozen
// whole. Rows of a buffer change nothing; rows covering a whole tensor
// freeze it.
// CHECK: func.func @forward(%arg0: tensor<8x4xf32> {nn.frozen_rows = array<i64: 0, 1, 2, 5, 7, 8>, nn.logical_type = tensor<8x4xf32>, nn.param = "wte.weight"}
// CHECK-SAME: {nn.frozen, nn.logical_type = tensor<4xf32>, nn.param = "h.1"}
// CHECK-SAME: {nn.buffer, nn.logical_type = tensor<4x4xf32>, nn.param = "mask"}
// CHECK-SAME: {nn.frozen, nn.logical_type = tensor<2x4xf32>, nn.param = "wpe.weight"}
// CHECK-SAME: {nn.logical_type = tensor<4xf32>, nn.param = "h.2"}
module {
  func.func @forward(%wte: tensor<8x4xf32> {nn.param = "wte.weight"},
                     %h1: tensor<4xf32> {nn.param = "h.1"},
                     %m: tensor<4x4xf32> {nn.param = "mask", nn.buffer},
                     %wpe: tensor<2x4xf32> {nn.param = "wpe.weight"},
                     %h2: tensor<4xf32> {nn.param = "h.2"}) -> tensor<8x4xf32> {
    return %wte : tensor<8x4xf32>
  }
}

//--- hybrid.mlir
// Hybrid sharding (zero.shard_size): the dp ranks as dpr = 4 replicas of
// shard groups of dp = 2, the replicas outermost; a shard size of all of dp
// is the flat mesh.

// CHECK: dist.mesh @mesh axes = [dpr = 4, dp = 2, pp = 1, tp = 2]
// FLAT: dist.mesh @mesh axes = [dp = 8, pp = 1, tp = 1]
module {
  func.func @forward(%w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<4x4xf32> {
    return %w : tensor<4x4xf32>
  }
}
