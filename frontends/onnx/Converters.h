//===- Converters.h - per-op ONNX converters --------------------*- C++ -*-===//
//
// The converter table: keyed by (op type, op version), where the version is
// the op's ONNX since_version at the model's opset. A converter either folds
// the node on the host (all inputs constant) or emits nn ops. The table is
// ConverterTable.cpp; the converters are one file per op family
// (Convert<Family>.cpp), declared for it in ConvertersImpl.h.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_CONVERTERS_H
#define AUTOPAR_FRONTENDS_ONNX_CONVERTERS_H

#include "frontends/onnx/HostTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class AttributeProto;
class GraphProto;
} // namespace onnx

namespace autopar::onnx_import {

/// Who makes and who reads each value of a graph, for converters that look
/// beyond their node (NonZero's dense form checks where its indices go).
struct GraphIndex {
  explicit GraphIndex(const onnx::GraphProto &graph);
  /// Value name -> (consumer, input index).
  llvm::StringMap<std::vector<std::pair<const onnx::NodeProto *, int>>>
      consumers;
  llvm::StringMap<const onnx::NodeProto *> producer;
  llvm::StringSet<> outputs;
};

/// What a converter sees of the node being imported.
class NodeContext {
public:
  virtual ~NodeContext() = default;

  virtual const onnx::NodeProto &node() const = 0;
  /// The op version in effect (ONNX since_version at the model's opset).
  virtual int64_t version() const = 0;
  virtual mlir::OpBuilder &builder() = 0;
  virtual mlir::Location loc() const = 0;
  /// Whether the model is imported for training (ImportOptions::training).
  virtual bool training() const = 0;

  /// Number of declared inputs (trailing optional inputs may be missing).
  virtual unsigned numInputs() const = 0;
  /// Whether input i is given (present and not the empty name).
  virtual bool hasInput(unsigned i) const = 0;
  /// The constant value of input i, or null if it is not known at import.
  virtual const HostTensor *constInput(unsigned i) = 0;
  /// Input i as an IR value (materializing a constant or parameter).
  virtual mlir::FailureOr<mlir::Value> input(unsigned i) = 0;
  /// The static type of input i.
  virtual mlir::RankedTensorType inputType(unsigned i) = 0;

  /// Whether output i is consumed by a later node or a graph output.
  virtual bool outputUsed(unsigned i) const = 0;
  virtual unsigned numOutputs() const = 0;
  virtual void setOutput(unsigned i, mlir::Value v) = 0;
  virtual void setOutput(unsigned i, HostTensor v) = 0;
  /// Makes output `out` the value of input `in`. With `aliasParam`, an input
  /// that is a parameter gives a parameter of its own named by the output,
  /// initialized from the same bytes: torch.onnx.export deduplicates
  /// equal-valued initializers into Identity aliases although they are
  /// different trainable tensors in the source model.
  virtual void forwardInput(unsigned out, unsigned in, bool aliasParam) = 0;

  virtual const onnx::AttributeProto *attr(llvm::StringRef name) const = 0;
  int64_t intAttr(llvm::StringRef name, int64_t dflt) const;
  double floatAttr(llvm::StringRef name, double dflt) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>>
  intsAttr(llvm::StringRef name) const;

  /// The index of the graph being imported (made on first use, once per
  /// import).
  virtual const GraphIndex &graphIndex() = 0;
  /// The value named `name` (a graph input, an initializer or an earlier
  /// node's output) as an IR value; fails if there is none.
  virtual mlir::FailureOr<mlir::Value> valueNamed(llvm::StringRef name) = 0;

  /// Records a one-line error about this node; returns failure.
  virtual mlir::LogicalResult fail(const llvm::Twine &msg) = 0;

  /// Whether every given input is a constant known at import.
  bool allInputsConstant();
  /// Input i as a constant; fails naming `what` if it is not known.
  mlir::FailureOr<const HostTensor *> requireConst(unsigned i,
                                                   llvm::StringRef what);
};

using ConvertFn = std::function<mlir::LogicalResult(NodeContext &)>;

struct OpConverter {
  std::string opType;
  /// The op versions (since_version) this converter implements.
  std::vector<int64_t> versions;
  /// Attributes the converter reads; any other attribute is rejected.
  std::vector<std::string> attributes;
  ConvertFn convert;
  /// One line for docs/ops.md: restrictions and how the op is imported.
  std::string notes;
};

/// The converter table, sorted by op type.
const std::vector<OpConverter> &converterTable();
/// The converter for `opType`, or null.
const OpConverter *findConverter(llvm::StringRef opType);
/// The since_version of `opType` at `opset` per the converter's version list
/// (the largest listed version <= opset), or -1 if none applies.
int64_t opVersionAt(const OpConverter &conv, int64_t opset);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_CONVERTERS_H
