// The forward cut into the plan's pipeline stages (the pass's options:
// mesh.pp as ranks, pipeline.chunks, pipeline.split); one case per file
// of split-file.
// RUN: split-file %s %t
// RUN: autopar-opt %t/balanced.mlir --autopar-dist-pipeline-split='ranks=2' --verify-diagnostics | FileCheck %t/balanced.mlir
// RUN: autopar-opt %t/split.mlir --autopar-dist-pipeline-split='ranks=3 split=1,4' --verify-diagnostics | FileCheck %t/split.mlir
// RUN: autopar-opt %t/one-stage.mlir --autopar-dist-pipeline-split --verify-diagnostics | FileCheck %t/one-stage.mlir
// RUN: autopar-opt %t/too-many.mlir --autopar-dist-pipeline-split='ranks=3 chunks=2' --verify-diagnostics
// RUN: autopar-opt %t/outside.mlir --autopar-dist-pipeline-split='ranks=3 split=2,5' --verify-diagnostics
// RUN: autopar-opt %t/split-count.mlir --autopar-dist-pipeline-split='ranks=3 split=2' --verify-diagnostics
// RUN: autopar-opt %t/split-order.mlir --autopar-dist-pipeline-split='ranks=3 split=3,2' --verify-diagnostics

//--- balanced.mlir
// Five layers (a residual block around an attention-like softmax each),
// an embedding before them and a head and loss after, over mesh.pp = 2:
// stages begin where one activation (the residual stream) crosses and an
// attention follows. Balanced by predicted cost, the first stage takes the
// embedding and layers 0-2, the second layers 3-4 and the head. The buffer
// (a mask) and what is computed from it alone belong to no stage (each
// stage computes them). What the split balanced is recorded (each layer's
// cost, the embedding's and the head's: the planner predicts other meshes'
// splits from them).

// CHECK-LABEL: func.func @forward
// CHECK-SAME: dist.pipeline = {embedding_cost = 4.608000e+03 : f64, head_cost = 4.672000e+03 : f64, layer_cost = array<f64: 3.276800e+04, 3.276800e+04, 3.276800e+04, 3.276800e+04, 4.710400e+04>, layers = 5 : i64, stage_cost = array<i64: {{[0-9]+}}, {{[0-9]+}}>, stage_first_layer = array<i64: 0, 3>, uniform_layers = true}
// CHECK: nn.exp %arg1 : tensor<4x8xf32>
// CHECK-NEXT: nn.gather {{.*}}dist.stage = 0
// CHECK-COUNT-15: dist.stage = 0
// CHECK-NEXT: nn.matmul %{{.*}}, %arg8 {dist.stage = 1 : i64}
// CHECK-COUNT-9: dist.stage = 1
// CHECK-NEXT: nn.matmul %{{.*}}, %arg12 {dist.stage = 1 : i64}
// CHECK-NEXT: nn.softmax_cross_entropy {{.*}}dist.stage = 1
module {
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
      %bias: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
      %wq0: tensor<8x8xf32> {nn.param = "h.0.q"},
      %wo0: tensor<8x8xf32> {nn.param = "h.0.o"},
      %wq1: tensor<8x8xf32> {nn.param = "h.1.q"},
      %wo1: tensor<8x8xf32> {nn.param = "h.1.o"},
      %wq2: tensor<8x8xf32> {nn.param = "h.2.q"},
      %wo2: tensor<8x8xf32> {nn.param = "h.2.o"},
      %wq3: tensor<8x8xf32> {nn.param = "h.3.q"},
      %wo3: tensor<8x8xf32> {nn.param = "h.3.o"},
      %wq4: tensor<8x8xf32> {nn.param = "h.4.q"},
      %wo4: tensor<8x8xf32> {nn.param = "h.4.o"},
      %head: tensor<8x16xf32> {nn.param = "head"},
      %ids: tensor<4xi64> {nn.input = "ids"},
      %t: tensor<4xi64> {nn.input = "targets"}) -> tensor<f32> {
    %m = nn.exp %bias : tensor<4x8xf32>
    %x0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x0, %wq0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s0 = nn.softmax %b0 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o0 = nn.matmul %s0, %wo0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x0, %o0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %wq1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s1 = nn.softmax %b1 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o1 = nn.matmul %s1, %wo1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %o1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2 = nn.matmul %x2, %wq2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b2 = nn.add %a2, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s2 = nn.softmax %b2 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o2 = nn.matmul %s2, %wo2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x3 = nn.add %x2, %o2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a3 = nn.matmul %x3, %wq3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b3 = nn.add %a3, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s3 = nn.softmax %b3 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o3 = nn.matmul %s3, %wo3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x4 = nn.add %x3, %o3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a4 = nn.matmul %x4, %wq4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b4 = nn.add %a4, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s4 = nn.softmax %b4 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o4 = nn.matmul %s4, %wo4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x5 = nn.add %x4, %o4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x5, %head : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- split.mlir
// The plan's boundaries: three stages beginning at layers 0, 1 and 4.
// Layer 2 costs more than the others (an exp): not uniform.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: stage_first_layer = array<i64: 0, 1, 4>, uniform_layers = false
// CHECK: nn.matmul %{{.*}}, %arg2 {dist.stage = 0 : i64}
// CHECK: nn.matmul %{{.*}}, %arg4 {dist.stage = 1 : i64}
// CHECK: nn.matmul %{{.*}}, %arg10 {dist.stage = 2 : i64}
// CHECK: nn.softmax_cross_entropy {{.*}}dist.stage = 2
module {
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
      %bias: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
      %wq0: tensor<8x8xf32> {nn.param = "h.0.q"},
      %wo0: tensor<8x8xf32> {nn.param = "h.0.o"},
      %wq1: tensor<8x8xf32> {nn.param = "h.1.q"},
      %wo1: tensor<8x8xf32> {nn.param = "h.1.o"},
      %wq2: tensor<8x8xf32> {nn.param = "h.2.q"},
      %wo2: tensor<8x8xf32> {nn.param = "h.2.o"},
      %wq3: tensor<8x8xf32> {nn.param = "h.3.q"},
      %wo3: tensor<8x8xf32> {nn.param = "h.3.o"},
      %wq4: tensor<8x8xf32> {nn.param = "h.4.q"},
      %wo4: tensor<8x8xf32> {nn.param = "h.4.o"},
      %head: tensor<8x16xf32> {nn.param = "head"},
      %ids: tensor<4xi64> {nn.input = "ids"},
      %t: tensor<4xi64> {nn.input = "targets"}) -> tensor<f32> {
    %m = nn.exp %bias : tensor<4x8xf32>
    %x0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x0, %wq0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s0 = nn.softmax %b0 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o0 = nn.matmul %s0, %wo0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x0, %o0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %wq1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s1 = nn.softmax %b1 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o1 = nn.matmul %s1, %wo1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %o1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2 = nn.matmul %x2, %wq2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %e2 = nn.exp %a2 : tensor<4x8xf32>
    %b2 = nn.add %e2, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s2 = nn.softmax %b2 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o2 = nn.matmul %s2, %wo2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x3 = nn.add %x2, %o2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a3 = nn.matmul %x3, %wq3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b3 = nn.add %a3, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s3 = nn.softmax %b3 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o3 = nn.matmul %s3, %wo3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x4 = nn.add %x3, %o3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a4 = nn.matmul %x4, %wq4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b4 = nn.add %a4, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s4 = nn.softmax %b4 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o4 = nn.matmul %s4, %wo4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x5 = nn.add %x4, %o4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x5, %head : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- one-stage.mlir
// One stage: nothing to do.

// CHECK-LABEL: func.func @forward
// CHECK-NOT: dist.stage
module {
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
      %bias: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
      %wq0: tensor<8x8xf32> {nn.param = "h.0.q"},
      %wo0: tensor<8x8xf32> {nn.param = "h.0.o"},
      %wq1: tensor<8x8xf32> {nn.param = "h.1.q"},
      %wo1: tensor<8x8xf32> {nn.param = "h.1.o"},
      %wq2: tensor<8x8xf32> {nn.param = "h.2.q"},
      %wo2: tensor<8x8xf32> {nn.param = "h.2.o"},
      %wq3: tensor<8x8xf32> {nn.param = "h.3.q"},
      %wo3: tensor<8x8xf32> {nn.param = "h.3.o"},
      %wq4: tensor<8x8xf32> {nn.param = "h.4.q"},
      %wo4: tensor<8x8xf32> {nn.param = "h.4.o"},
      %head: tensor<8x16xf32> {nn.param = "head"},
      %ids: tensor<4xi64> {nn.input = "ids"},
      %t: tensor<4xi64> {nn.input = "targets"}) -> tensor<f32> {
    %m = nn.exp %bias : tensor<4x8xf32>
    %x0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x0, %wq0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s0 = nn.softmax %b0 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o0 = nn.matmul %s0, %wo0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x0, %o0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %wq1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s1 = nn.softmax %b1 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o1 = nn.matmul %s1, %wo1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %o1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2 = nn.matmul %x2, %wq2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b2 = nn.add %a2, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s2 = nn.softmax %b2 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o2 = nn.matmul %s2, %wo2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x3 = nn.add %x2, %o2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a3 = nn.matmul %x3, %wq3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b3 = nn.add %a3, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s3 = nn.softmax %b3 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o3 = nn.matmul %s3, %wo3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x4 = nn.add %x3, %o3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a4 = nn.matmul %x4, %wq4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b4 = nn.add %a4, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s4 = nn.softmax %b4 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o4 = nn.matmul %s4, %wo4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x5 = nn.add %x4, %o4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x5, %head : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- too-many.mlir
// More stages than layers: 3 ranks x 2 chunks of the interleaved schedule.

module {
  // expected-error @+1 {{mesh.pp = 3 x 2 chunks makes 6 pipeline stages, but the model has 5 layers (where one activation crosses) to put in them}}
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
      %bias: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
      %wq0: tensor<8x8xf32> {nn.param = "h.0.q"},
      %wo0: tensor<8x8xf32> {nn.param = "h.0.o"},
      %wq1: tensor<8x8xf32> {nn.param = "h.1.q"},
      %wo1: tensor<8x8xf32> {nn.param = "h.1.o"},
      %wq2: tensor<8x8xf32> {nn.param = "h.2.q"},
      %wo2: tensor<8x8xf32> {nn.param = "h.2.o"},
      %wq3: tensor<8x8xf32> {nn.param = "h.3.q"},
      %wo3: tensor<8x8xf32> {nn.param = "h.3.o"},
      %wq4: tensor<8x8xf32> {nn.param = "h.4.q"},
      %wo4: tensor<8x8xf32> {nn.param = "h.4.o"},
      %head: tensor<8x16xf32> {nn.param = "head"},
      %ids: tensor<4xi64> {nn.input = "ids"},
      %t: tensor<4xi64> {nn.input = "targets"}) -> tensor<f32> {
    %m = nn.exp %bias : tensor<4x8xf32>
    %x0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x0, %wq0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s0 = nn.softmax %b0 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o0 = nn.matmul %s0, %wo0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x0, %o0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %wq1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s1 = nn.softmax %b1 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o1 = nn.matmul %s1, %wo1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %o1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2 = nn.matmul %x2, %wq2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b2 = nn.add %a2, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s2 = nn.softmax %b2 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o2 = nn.matmul %s2, %wo2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x3 = nn.add %x2, %o2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a3 = nn.matmul %x3, %wq3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b3 = nn.add %a3, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s3 = nn.softmax %b3 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o3 = nn.matmul %s3, %wo3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x4 = nn.add %x3, %o3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a4 = nn.matmul %x4, %wq4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b4 = nn.add %a4, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s4 = nn.softmax %b4 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o4 = nn.matmul %s4, %wo4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x5 = nn.add %x4, %o4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x5, %head : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- outside.mlir
// A stage beginning at a layer the model does not have.

module {
  // expected-error @+1 {{pipeline.split[1]: stage 2 would begin at layer 5, but the model has 5 layers}}
  func.func @forward(%wte: tensor<16x8xf32> {nn.param = "wte"},
      %bias: tensor<4x8xf32> {nn.param = "mask", nn.buffer},
      %wq0: tensor<8x8xf32> {nn.param = "h.0.q"},
      %wo0: tensor<8x8xf32> {nn.param = "h.0.o"},
      %wq1: tensor<8x8xf32> {nn.param = "h.1.q"},
      %wo1: tensor<8x8xf32> {nn.param = "h.1.o"},
      %wq2: tensor<8x8xf32> {nn.param = "h.2.q"},
      %wo2: tensor<8x8xf32> {nn.param = "h.2.o"},
      %wq3: tensor<8x8xf32> {nn.param = "h.3.q"},
      %wo3: tensor<8x8xf32> {nn.param = "h.3.o"},
      %wq4: tensor<8x8xf32> {nn.param = "h.4.q"},
      %wo4: tensor<8x8xf32> {nn.param = "h.4.o"},
      %head: tensor<8x16xf32> {nn.param = "head"},
      %ids: tensor<4xi64> {nn.input = "ids"},
      %t: tensor<4xi64> {nn.input = "targets"}) -> tensor<f32> {
    %m = nn.exp %bias : tensor<4x8xf32>
    %x0 = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %a0 = nn.matmul %x0, %wq0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b0 = nn.add %a0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s0 = nn.softmax %b0 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o0 = nn.matmul %s0, %wo0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x1 = nn.add %x0, %o0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a1 = nn.matmul %x1, %wq1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b1 = nn.add %a1, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s1 = nn.softmax %b1 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o1 = nn.matmul %s1, %wo1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x2 = nn.add %x1, %o1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2 = nn.matmul %x2, %wq2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b2 = nn.add %a2, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s2 = nn.softmax %b2 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o2 = nn.matmul %s2, %wo2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x3 = nn.add %x2, %o2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a3 = nn.matmul %x3, %wq3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b3 = nn.add %a3, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s3 = nn.softmax %b3 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o3 = nn.matmul %s3, %wo3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x4 = nn.add %x3, %o3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %a4 = nn.matmul %x4, %wq4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %b4 = nn.add %a4, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s4 = nn.softmax %b4 {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %o4 = nn.matmul %s4, %wo4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %x5 = nn.add %x4, %o4 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %l = nn.matmul %x5, %head : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- split-count.mlir
// expected-error @+1 {{split: 3 stages are cut at 2 layer boundaries, got 1}}
module {
}

//--- split-order.mlir
// expected-error @+1 {{split: layer boundaries must increase from 1}}
module {
}
