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

#endif // AUTOPAR_PASSES_ANALYSIS
