//===- Buffers.h - which float initializers are not parameters --*- C++ -*-===//
//
// ONNX does not say which float initializers PyTorch trains (parameters) and
// which it never does (buffers registered with register_buffer). The importer
// treats every float initializer as a parameter except those this analysis
// finds to be buffers; docs/importer.md ("Parameters and buffers") states
// the rule.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_BUFFERS_H
#define AUTOPAR_FRONTENDS_ONNX_BUFFERS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <string>
#include <vector>

namespace onnx {
class GraphProto;
} // namespace onnx

namespace autopar::onnx_import {

/// A float initializer that is a buffer, and why.
struct FloatBuffer {
  std::string name;
  std::string reason;
};

/// The float initializers of `graph` that are buffers:
///  - computed with positions: every way the initializer's values reach the
///    values computed at run time passes through a product (MatMul, Gemm,
///    Einsum, Mul, Div) with positions (a value computed from a Range, or
///    from a constant holding 0, 1, ..., n-1: torch.arange as the exporter
///    folds it; comparisons of positions are masks, not positions), all of
///    it known at import (a rotary table's `inv_freq`, whose cos/sin tables
///    are then folded at import; ALiBi slopes);
///  - a mask: an initializer holding an infinity or NaN (an additive mask
///    table, which no optimizer can train), or an additive causal mask (0
///    on and below the diagonal, -1e9 or below above, in every square
///    matrix: masked_fill's -1e9 table).
/// A value is known at import when it derives only from initializers,
/// Constant nodes, the shapes of values (Shape, Size) and the graph inputs in
/// `fixedInputs`. Only initializers that take part in such an import-time
/// computation or are summed into run-time values are read (for the
/// non-finite test; an initializer whose bytes cannot be read, or is in
/// external data when `shapesOnly`, is left a parameter).
std::vector<FloatBuffer> findFloatBuffers(const onnx::GraphProto &graph,
                                          const llvm::StringSet<> &fixedInputs,
                                          llvm::StringRef modelDir,
                                          bool shapesOnly);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_BUFFERS_H
