//===- Passes.td - analysis passes -------------------------*- tablegen -*-===//

#ifndef AUTOPAR_PASSES_ANALYSIS
#define AUTOPAR_PASSES_ANALYSIS

include "mlir/Pass/PassBase.td"

def ModelSummaryPass : Pass<"autopar-model-summary", "mlir::ModuleOp"> {
  let summary = "Print a summary of each function: I/O, parameters, ops, FLOPs";
  let description = [{
    Prints, for every function of the module, to standard output: the graph
    inputs and outputs (`nn.input` / `nn.output`), the parameters
    (`nn.param` arguments: count, elements, bytes, how many are floating
    point), a histogram of its ops and the FLOPs of its matmul and gemm ops
    (2 M N K each). The IR is left unchanged.

    ```mlir
    func.func @forward(%w: tensor<4x4xf32> {nn.param = "w"},
                       %x: tensor<2x4xf32> {nn.input = "x"})
        -> (tensor<2x4xf32> {nn.output = "y"}) {
      %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
    ```
    prints
    ```
    func @forward
      inputs: x tensor<2x4xf32>
      outputs: y tensor<2x4xf32>
      parameters: 1 tensors, 16 elements, 64 bytes (1 floating-point)
      ops: 2
        func.return 1
        nn.matmul 1
      matmul FLOPs: 64
    ```
  }];
}

def CostReportPass : Pass<"autopar-cost-report", "mlir::ModuleOp"> {
  let summary = "Print each function's FLOPs, bytes and communication per rank";
  let description = [{
    Prints, for every function of the module, to standard output, what the
    cost analysis (passes/analysis/CostAnalysis.h) finds for one run on one
    rank: the model FLOPs (matmul, gemm, attention), the bytes of the
    parameters, of the other arguments, of the results and of the arena,
    and the bytes each kind of collective sends, per group of mesh axes
    (ring algorithms, as the runtime counts them). report.json is made from
    the same analysis. The IR is left unchanged.

    ```mlir
    dist.mesh @mesh axes = [dp = 4]
    func.func @f(%x: tensor<8x4xf32> {nn.input = "x"}) -> tensor<8x4xf32> {
      %0 = dist.all_reduce sum %x on @mesh axes = [dp] : tensor<8x4xf32>
      return %0 : tensor<8x4xf32>
    }
    ```
    prints
    ```
    func @f
      flops: 0
      bytes: params 0, inputs 128, results 128, arena 0
      all_reduce [dp]: 192 bytes
    ```
  }];
}

#endif // AUTOPAR_PASSES_ANALYSIS
