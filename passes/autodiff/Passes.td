//===- Passes.td - autodiff passes -------------------------*- tablegen -*-===//

#ifndef AUTOPAR_PASSES_AUTODIFF
#define AUTOPAR_PASSES_AUTODIFF

include "mlir/Pass/PassBase.td"

def DropoutRatioPass : Pass<"autopar-dropout-ratio", "mlir::ModuleOp"> {
  let summary = "Set the ratio of every nn.dropout (plan dropout.ratio)";
  let description = [{
    Run before autopar-autodiff. With `ratio` in (0, 1), every nn.dropout
    drops with that ratio (its site, and so its mask's stream, unchanged);
    with 0 each is replaced by its operand, so the model computes what it
    computes without dropout, bit for bit; a negative `ratio` (the
    default, the plan's "model") leaves each its own.

    ```mlir
    %y = nn.dropout %x ratio(1.000000e-01) site(0) : tensor<2x8xf32>
    ```
    with `ratio=0.25` becomes
    ```mlir
    %y = nn.dropout %x ratio(2.500000e-01) site(0) : tensor<2x8xf32>
    ```
    and with `ratio=0` the uses of %y read %x.
  }];
  let options = [
    Option<"ratio", "ratio", "double", "-1.0",
           "The ratio of every dropout (< 0: each its own; 0: no dropout)">,
  ];
}

def AutodiffPass : Pass<"autopar-autodiff", "mlir::ModuleOp"> {
  let summary = "Differentiate the loss of @forward into @train_step";
  let description = [{
    Reverse-mode differentiation of the model function. The loss is the
    scalar floating-point result of `forward` (the one named by `loss` when
    there are several). Every floating-point `nn.param` argument that is
    neither `nn.buffer` nor `nn.frozen` is trainable. The pass adds
    `train_step`: the same arguments, the forward ops, then one gradient
    rule per op in reverse order (gradients of values used several times
    are summed, broadcasts reduced back with reduce_sum), returning the loss
    and one gradient per trainable parameter the loss depends on
    (`nn.grad = "<param>"`; the others, like a torch parameter whose grad
    stays None, get none).

    ```mlir
    func.func @forward(%w: tensor<4xf32> {nn.param = "w"},
                       %x: tensor<4xf32> {nn.input = "x"})
        -> (tensor<f32> {nn.output = "loss"}) {
      %0 = nn.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %1 = nn.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
    gains
    ```mlir
    func.func @train_step(%w: ..., %x: ...)
        -> (tensor<f32> {nn.output = "loss"}, tensor<4xf32> {nn.grad = "w"}) {
      %0 = nn.mul %w, %x ...
      %1 = nn.reduce_sum %0 ...
      %2 = nn.constant dense<1.0> : tensor<f32>
      %3 = nn.reshape %2 : tensor<f32> -> tensor<1xf32>
      %4 = nn.expand %3 : tensor<1xf32> -> tensor<4xf32>
      %5 = nn.mul %4, %x ...
      return %1, %5 : tensor<f32>, tensor<4xf32>
    }
    ```
    With `loss-scale-argument`, `train_step` takes one more argument, last:
    a scalar `%s {nn.loss_scale}` of the loss's type that seeds the
    backward pass in place of the constant 1, so every gradient is
    multiplied by it (fp16 mixed precision's loss scaling). Ops without a
    gradient rule on the path from a trainable parameter to the loss are
    errors naming the op.

    A pipeline stage (autopar-dist-pipeline-stages) is differentiated the
    same way: `loss` may name a float tensor result (`stage_output`), whose
    gradient then comes in as a new last argument (`nn.output_grad`) and
    seeds the backward pass (a vector-Jacobian product), and every
    argument marked `nn.stage_input` (the activation the stage received)
    gets its gradient returned after the parameters' (`nn.input_grad`;
    zeros if the result does not depend on it).
  }];
  let options = [
    Option<"forward", "forward", "std::string", "\"forward\"",
           "Name of the function to differentiate">,
    Option<"loss", "loss", "std::string", "\"\"",
           "nn.output name of the loss (default: the only scalar float result)">,
    Option<"trainStep", "train-step", "std::string", "\"train_step\"",
           "Name of the function to create">,
    Option<"lossScaleArgument", "loss-scale-argument", "bool", "false",
           "Seed the backward pass with a new last argument of the train "
           "step (nn.loss_scale, the loss's type) instead of 1">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

def LossOnlyForwardPass : Pass<"autopar-loss-only-forward", "mlir::ModuleOp"> {
  let summary = "Make the forward function return its loss alone";
  let description = [{
    Run after autopar-autodiff: the forward function becomes the training
    program's evaluation function, which returns the loss (the result
    named `loss`, or the only scalar float result) and nothing else; its
    other results and their attributes are dropped, and the ops that only
    fed them are left for canonicalization to remove.

    ```mlir
    func.func @forward(...) -> (tensor<2x16xf32> {nn.output = "logits"},
                                tensor<f32> {nn.output = "loss"}) {
      ...
      return %logits, %loss : tensor<2x16xf32>, tensor<f32>
    }
    ```
    becomes
    ```mlir
    func.func @forward(...) -> (tensor<f32> {nn.output = "loss"}) {
      ...
      return %loss : tensor<f32>
    }
    ```
    Evaluation runs the model in eval mode: each nn.dropout of the forward
    function is replaced by its operand. A function without a loss is an
    error (autopar-autodiff's).
  }];
  let options = [
    Option<"forward", "forward", "std::string", "\"forward\"",
           "Name of the forward function">,
    Option<"loss", "loss", "std::string", "\"\"",
           "nn.output name of the loss (default: the only scalar float result)">,
  ];
}

def RecomputePass : Pass<"autopar-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute forward activations in the backward pass";
  let description = [{
    Run after autopar-autodiff, on every function that returns gradients.
    Its forward ops are those the non-gradient results (the loss) depend
    on; an activation is a forward value computed from a parameter. A
    backward op that reads an activation chosen for recomputation reads a
    copy instead, made right before the first backward op that needs it
    from the kept values (a copy of each op it needs, once), so the
    forward value dies in the forward pass:

    - `selective`: cheap ops (elementwise, norms, softmax, reductions; not
      views, which the lowering folds) are recomputed from what the expensive ones (matmuls,
      attention, lookups) and the arguments produce, in chains of at most
      6 ops; a longer chain keeps its value (the residual stream is kept
      every few adds). Korthikanti et al.'s attention core is nn.attention
      itself, which keeps only its output and log-sum-exp.
    - `full`: Megatron-LM's full recompute, one checkpoint per layer: each
      layer keeps only its input (the residual stream where a single value
      crosses the forward and an attention follows) and is recomputed whole
      when the backward pass reaches it; the embeddings before the first
      layer and the head and loss after the last are kept. A model without
      attention keeps the residual stream at each block's end instead.

    Copies carry `nn.recomputed`, which keeps CSE from merging them back.
    Losses and gradients are unchanged (the same ops on the same values).
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, selective or full">,
  ];
  let dependentDialects = ["autopar::nn::NNDialect", "mlir::func::FuncDialect"];
}

#endif // AUTOPAR_PASSES_AUTODIFF
