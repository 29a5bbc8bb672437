//===- Validate.h - an ONNX model checked before import ---------*- C++ -*-===//
//
// What the importer checks before it converts anything, so that a malformed
// model is one line naming the node or tensor at fault, never a crash or an
// import with other semantics: the graph's structure (names, definitions,
// initializer data), each node against its op's ONNX schema (input and
// output counts, attribute names and types), and the size of every tensor.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_VALIDATE_H
#define AUTOPAR_FRONTENDS_ONNX_VALIDATE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace onnx {
class GraphProto;
class NodeProto;
class TensorProto;
} // namespace onnx

namespace autopar::onnx_import {

/// `text` as one printable line: control characters and bytes that are not
/// part of valid UTF-8 as \xNN, valid UTF-8 as it is. Every error line of
/// the tools goes through it, and every name of a model in a message (a
/// name may hold a newline or bytes that are not UTF-8).
std::string oneLine(llvm::StringRef text);

/// The graph's structure, or "" when it is sound: every name valid UTF-8;
/// graph inputs, outputs and initializers named; no value defined twice
/// (by two initializers, an input and a node, or two nodes); no node
/// without an op type; an initializer's data in one place (raw_data, a
/// typed field or external data), its dims >= 0.
std::string validateGraph(const onnx::GraphProto &graph);

/// `node` against the ONNX schema of its op at `version` (the op's
/// since_version at the model's opset), or "" when it conforms: the number
/// of inputs and outputs, required inputs given (not ""), attributes known
/// and of their declared type, required attributes present.
std::string validateNode(const onnx::NodeProto &node, int64_t version);

/// Why a tensor of `dims` with elements of `elementBytes` cannot be
/// imported, or "": a negative dim, an element count or byte size beyond
/// int64, or more than `limitBytes`.
std::string tensorSizeError(llvm::ArrayRef<int64_t> dims, int64_t elementBytes,
                            int64_t limitBytes);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_VALIDATE_H
