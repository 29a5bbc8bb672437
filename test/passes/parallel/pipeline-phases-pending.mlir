// RUN: autopar-opt %s --autopar-autodiff="forward=stage loss=stage_output train-step=step" --autopar-annotate-sharding="defer-reduction=true" --autopar-propagate-sharding --autopar-dist-pipeline-phases="split-weight-gradients=true" --autopar-dist-spmdize | FileCheck %s

// ZB-H1's phases over dp = 2 (the samples split): the layer norm's
// backward gives the input's gradient and its weights' together, so the
// input phase computes the weights' gradients and saves them for the
// weight phase. They are sums over dp still pending: saved so (the step
// reduces them once, with the other gradients), not all-reduced every
// micro-batch; the weight phase reads them pending and returns them so.

// CHECK-LABEL: func.func @step_w(
// CHECK-SAME: %arg0: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, nn.saved = "i0"}
// CHECK-SAME: -> (tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, nn.grad = "ln.weight"}
// CHECK-NOT: dist.all_reduce
// CHECK-LABEL: func.func @step_i(
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}]], partial = [dp]>, nn.saved = "i0"}
// CHECK-NOT: dist.all_reduce
// CHECK: nn.layer_norm_grad
// CHECK-NOT: dist.all_reduce
// CHECK: return %input_grad, %scale_grad, %bias_grad
module {
  dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 1]
  func.func @stage(%g: tensor<4xf32> {nn.param = "ln.weight"},
                   %b: tensor<4xf32> {nn.param = "ln.bias"},
                   %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, nn.stage_input})
      -> (tensor<8x4xf32> {nn.output = "stage_output"}) attributes {dist.stage = 1 : i64} {
    %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
