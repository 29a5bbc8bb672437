//===- CostAnalysis.cpp - FLOPs, bytes and communication of the IR --------===//

#include "passes/analysis/CostAnalysis.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "runtime/comm/CommBytes.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace autopar;

double autopar::rooflineFlops(Operation *op, double flopsPerByte) {
  return std::max<double>(modelFlops(op), flopsPerByte * movedBytes(op));
}

namespace {

/// The fraction of `x` units of work that tiles of `tile` fill.
double filled(int64_t x, int64_t tile) {
  if (x <= 0)
    return 1;
  return double(x) / double((x + tile - 1) / tile * tile);
}

} // namespace

double autopar::rooflineSeconds(Operation *op, const MachineRates &r) {
  const int64_t flops = modelFlops(op);
  double compute = 0;
  if (flops > 0) {
    double efficiency = isa<nn::AttentionOp, nn::AttentionGradOp>(op)
                            ? r.attentionEfficiency
                            : r.matmulEfficiency;
    if (r.tileQuantization) {
      // Output rows m, columns n, depth k of the product(s).
      int64_t m = 1, n = 1, k = 1;
      if (auto mm = dyn_cast<nn::MatMulOp>(op)) {
        n = mm.getType().getShape().back();
        m = mm.getType().getNumElements() / std::max<int64_t>(1, n);
        k = cast<RankedTensorType>(mm.getLhs().getType()).getShape().back();
      } else if (auto gemm = dyn_cast<nn::GemmOp>(op)) {
        ArrayRef<int64_t> out = gemm.getType().getShape();
        m = out[0];
        n = out[1];
        k = cast<RankedTensorType>(gemm.getA().getType())
                .getDimSize(gemm.getTransA() ? 0 : 1);
      } else {
        // Attention: per head, T x S scores over a head dim of D.
        auto q = cast<RankedTensorType>(op->getOperand(0).getType());
        auto kt = cast<RankedTensorType>(op->getOperand(1).getType());
        m = q.getDimSize(q.getRank() - 2);
        n = kt.getDimSize(kt.getRank() - 2);
        k = q.getShape().back();
      }
      efficiency *= filled(m, 128) * filled(n, 128) * filled(k, 32);
    }
    const bool fp32 = r.fp32FlopsPerSecond > 0 &&
                      getElementTypeOrSelf(op->getOperand(0).getType()).isF32();
    compute = double(flops) /
              ((fp32 ? r.fp32FlopsPerSecond : r.flopsPerSecond) * efficiency);
  }
  const double memory =
      double(movedBytes(op)) / (r.bytesPerSecond * r.memoryEfficiency);
  return std::max(compute, memory);
}

double autopar::rooflineSeconds(func::FuncOp func, const MachineRates &r) {
  double t = 0;
  func.walk([&](Operation *op) {
    if (isa<func::FuncOp, func::ReturnOp>(op) ||
        op->getParentOfType<nn::FusedOp>())
      return;
    t += rooflineSeconds(op, r);
  });
  return t;
}

int64_t autopar::movedBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value v : op->getOperands())
    bytes += isa<nn::GatherOp>(op) && v == op->getOperand(0)
                 ? tensorBytes(op->getResult(0).getType())
                 : tensorBytes(v.getType());
  for (Value v : op->getResults())
    bytes += tensorBytes(v.getType());
  return bytes;
}

int64_t autopar::modelFlops(Operation *op) {
  if (auto mm = dyn_cast<nn::MatMulOp>(op))
    return 2 * mm.getType().getNumElements() *
           cast<RankedTensorType>(mm.getLhs().getType()).getShape().back();
  if (auto gemm = dyn_cast<nn::GemmOp>(op))
    return 2 * gemm.getType().getNumElements() *
           cast<RankedTensorType>(gemm.getA().getType())
               .getDimSize(gemm.getTransA() ? 0 : 1);
  if (isa<nn::AttentionOp, nn::AttentionGradOp>(op)) {
    auto q = cast<RankedTensorType>(op->getOperand(0).getType());
    auto k = cast<RankedTensorType>(op->getOperand(1).getType());
    int64_t perProduct = 2 * q.getNumElements() * k.getDimSize(k.getRank() - 2);
    return (isa<nn::AttentionOp>(op) ? 2 : 4) * perProduct;
  }
  return 0;
}

double FunctionCost::commBytesOfKind(StringRef kind) const {
  double bytes = 0;
  for (const auto &[key, value] : commBytes)
    if (key.first == kind)
      bytes += value;
  return bytes;
}

namespace {

int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

int64_t elementBytes(Value v) {
  return tensorBytes(v.getType()) / std::max<int64_t>(1, numElements(v));
}

} // namespace

std::optional<CollectiveCost> autopar::collectiveCost(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto make = [&](StringRef kind, FlatSymbolRefAttr meshName, ArrayAttr axes,
                  auto bytesOf) {
    auto m = module && meshName ? module.lookupSymbol<dist::MeshOp>(meshName)
                                : dist::MeshOp();
    SmallVector<StringRef> names;
    for (Attribute a : axes)
      names.push_back(cast<StringAttr>(a).getValue());
    CollectiveCost c;
    c.kind = kind.str();
    c.axes = llvm::join(names, ",");
    c.group = m ? m.getGroupSize(names) : 1;
    c.bytes = bytesOf(c.group);
    return std::optional<CollectiveCost>(c);
  };
  if (auto c = dyn_cast<dist::AllReduceOp>(op))
    return make("all_reduce", c.getMeshAttr(), c.getAxes(), [&](int64_t g) {
      return rt::allReduceBytes(numElements(c.getInput()), g,
                                elementBytes(c.getInput()));
    });
  // Ring: (g - 1) of the g pieces (the scattered result, the gathered
  // input) leave each rank.
  auto pieces = [](Value piece, int64_t g) {
    return double(g - 1) * double(tensorBytes(piece.getType()));
  };
  if (auto c = dyn_cast<dist::ReduceScatterOp>(op))
    return make("reduce_scatter", c.getMeshAttr(), c.getAxes(),
                [&](int64_t g) { return pieces(c.getResult(), g); });
  if (auto c = dyn_cast<dist::AllGatherOp>(op))
    return make("all_gather", c.getMeshAttr(), c.getAxes(),
                [&](int64_t g) { return pieces(c.getInput(), g); });
  // (g - 1) of the g blocks leave each rank.
  if (auto c = dyn_cast<dist::AllToAllOp>(op))
    return make("all_to_all", c.getMeshAttr(), c.getAxes(), [&](int64_t g) {
      return rt::allToAllFlatBytes(numElements(c.getInput()), g,
                                   elementBytes(c.getInput()));
    });
  // A ring step: the whole tensor to one peer, unless the offset comes
  // around to this rank.
  if (auto c = dyn_cast<dist::ShiftOp>(op))
    return make("send", c.getMeshAttr(), c.getAxes(), [&](int64_t g) {
      return c.getOffset() % g != 0 ? double(tensorBytes(c.getType())) : 0.0;
    });
  if (auto c = dyn_cast<dist::ZeroScatterOp>(op))
    return make("reduce_scatter", c.getMeshAttr(), c.getAxes(), [&](int64_t g) {
      return rt::reduceScatterFlatBytes(numElements(c.getInput()), g,
                                        elementBytes(c.getInput()));
    });
  if (auto c = dyn_cast<dist::ZeroGatherOp>(op))
    return make("all_gather", c.getMeshAttr(), c.getAxes(), [&](int64_t g) {
      return rt::allGatherFlatBytes(numElements(c.getResult()), g,
                                    elementBytes(c.getResult()));
    });
  if (auto c = dyn_cast<dist::SendOp>(op))
    return make(
        "send", c.getMeshAttr(),
        ArrayAttr::get(op->getContext(), {c.getAxisAttr()}),
        [&](int64_t) { return double(tensorBytes(c.getInput().getType())); });
  return std::nullopt;
}

FunctionCost autopar::analyzeCost(func::FuncOp func) {
  FunctionCost cost;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    int64_t bytes = tensorBytes(func.getArgument(i).getType());
    (func.getArgAttr(i, nn::NNDialect::kParamAttr) ? cost.paramBytes
                                                   : cost.inputBytes) += bytes;
  }
  for (Type t : func.getResultTypes())
    cost.resultBytes += tensorBytes(t);
  if (auto arena = func->getAttrOfType<IntegerAttr>(nn::NNDialect::kArenaBytesAttr))
    cost.arenaBytes = arena.getInt();
  func.walk([&](Operation *op) {
    cost.flops += modelFlops(op);
    if (std::optional<CollectiveCost> c = collectiveCost(op))
      cost.commBytes[{c->kind, c->axes}] += c->bytes;
  });
  return cost;
}

