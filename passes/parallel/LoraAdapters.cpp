//===- LoraAdapters.cpp - the plan's LoRA adapters ------------------------===//
//
// Adds PEFT's low-rank update beside every projection of a matching weight
// and freezes the rest of the model. See Passes.td (autopar-lora).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "passes/parallel/Globs.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "autopar-lora"

namespace autopar::dist {
#define GEN_PASS_DEF_LORAPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// One use of a weight as a projection's: the op, and whether the weight
/// enters it as [in, out] (else [out, in], transposed there or by gemm's
/// trans_b).
struct ProjectionUse {
  Operation *op;
  bool inOut;
};

/// The module name of a weight: its name less ".weight" (PEFT's lora_A and
/// lora_B hang off the module).
std::string moduleOf(StringRef weight) {
  return weight.ends_with(".weight") ? weight.drop_back(7).str() : weight.str();
}

struct LoraPass : public dist::impl::LoraPassBase<LoraPass> {
  using LoraPassBase::LoraPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (targets.empty())
      return;
    if (rank < 1)
      return fail("lora.r: expected an integer >= 1, got " +
                  std::to_string(rank));
    if (!(alpha > 0))
      return fail("lora.alpha: expected a number > 0");
    if (!(dropout >= 0 && dropout < 1))
      return fail("lora.dropout: expected a number in [0, 1)");
    std::vector<std::string> targetGlobs(targets.begin(), targets.end()),
        alsoTrainGlobs(alsoTrain.begin(), alsoTrain.end());
    for (std::string why : {globsProblem("lora.targets", targetGlobs),
                            globsProblem("lora.also_train", alsoTrainGlobs)})
      if (!why.empty())
        return fail(why);
    std::vector<bool> targetUsed(targets.size()),
        alsoTrainUsed(alsoTrain.size());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // The weights to adapt, before any argument is added.
      SmallVector<BlockArgument> weights;
      for (BlockArgument arg : func.getArguments()) {
        auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::NNDialect::kParamAttr);
        if (!name)
          continue;
        if (globMatchMarking(targetGlobs, name.getValue(), targetUsed))
          weights.push_back(arg);
      }
      for (BlockArgument w : weights)
        if (failed(adapt(func, w)))
          return signalPassFailure();
      // The adapters' dropout sites, 2^31 + k in op order: apart from the
      // model's (numbered from 0), the same whatever else the plan says.
      int64_t site = kFirstSite;
      func.walk([&](nn::DropoutOp d) {
        if (d->hasAttr(nn::NNDialect::kLoraAttr))
          d.setSiteAttr(OpBuilder(d).getI64IntegerAttr(site++));
      });
      // As PEFT: only the adapters (and modules_to_save) train. The module
      // of a parameter also-train matches ("M" of "M.weight") is one of
      // PEFT's modules_to_save: every parameter of it gets nn.lora_save.
      llvm::StringSet<> savedModules;
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name || func.getArgAttr(i, nn::NNDialect::kLoraAAttr) ||
            func.getArgAttr(i, nn::NNDialect::kLoraBAttr))
          continue;
        if (globMatchMarking(alsoTrainGlobs, name.getValue(), alsoTrainUsed)) {
          // A name of no module ("onnx::Add_7"): "" says so to the export.
          if (name.getValue().contains('.'))
            savedModules.insert(name.getValue().rsplit('.').first);
          else
            func.setArgAttr(i, nn::NNDialect::kLoraSaveAttr,
                            StringAttr::get(&getContext(), ""));
          continue;
        }
        func.setArgAttr(i, nn::NNDialect::kFrozenAttr,
                        UnitAttr::get(&getContext()));
        func.removeArgAttr(i, nn::NNDialect::kFrozenRowsAttr);
      }
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name =
            func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
        if (!name || func.getArgAttr(i, nn::NNDialect::kBufferAttr))
          continue;
        // The longest saved module the name lies in.
        for (StringRef m = name.getValue(); m.contains('.');) {
          m = m.rsplit('.').first;
          if (savedModules.contains(m)) {
            func.setArgAttr(i, nn::NNDialect::kLoraSaveAttr,
                            StringAttr::get(&getContext(), m));
            break;
          }
        }
      }
    }
    for (auto [k, used] : llvm::enumerate(targetUsed))
      if (!used)
        return fail("lora.targets[" + std::to_string(k) + "]: \"" + targets[k] +
                    "\" matches no initializer of the model");
    for (auto [k, used] : llvm::enumerate(alsoTrainUsed))
      if (!used)
        return fail("lora.also_train[" + std::to_string(k) + "]: \"" +
                    alsoTrain[k] + "\" matches no initializer of the model");
  }

  /// The uses of `w` as a projection weight, or failure (one line) where it
  /// has another.
  FailureOr<SmallVector<ProjectionUse>>
  projectionUses(func::FuncOp func, BlockArgument w, StringRef name) {
    SmallVector<ProjectionUse> uses;
    auto describe = [&](Operation *user) {
      fail("lora.targets: '" + name.str() +
           "' is not a projection weight: it is used by " +
           user->getName().getStringRef().str() +
           " (LoRA adapts the weights of MatMul and Gemm)");
      return failure();
    };
    auto type = dyn_cast<RankedTensorType>(w.getType());
    if (!type || type.getRank() != 2 ||
        !isa<FloatType>(type.getElementType()) ||
        func.getArgAttr(w.getArgNumber(), nn::NNDialect::kBufferAttr)) {
      fail("lora.targets: '" + name.str() +
           "' is not a projection weight (a float matrix parameter)");
      return failure();
    }
    for (Operation *user : w.getUsers()) {
      if (auto mm = dyn_cast<nn::MatMulOp>(user)) {
        if (mm.getRhs() != w || mm.getLhs() == w)
          return describe(user);
        uses.push_back({user, true});
      } else if (auto gemm = dyn_cast<nn::GemmOp>(user)) {
        if (gemm.getB() != w || gemm.getA() == w || gemm.getC() == w)
          return describe(user);
        uses.push_back({user, !gemm.getTransB()});
      } else if (auto t = dyn_cast<nn::TransposeOp>(user)) {
        if (t.getPerm() != ArrayRef<int64_t>{1, 0})
          return describe(user);
        for (Operation *tu : t->getUsers()) {
          auto mm = dyn_cast<nn::MatMulOp>(tu);
          if (!mm || mm.getRhs() != t.getResult() ||
              mm.getLhs() == t.getResult())
            return describe(tu);
          uses.push_back({tu, false});
        }
      } else {
        return describe(user);
      }
    }
    if (uses.empty()) {
      fail("lora.targets: '" + name.str() + "' is not used by the model");
      return failure();
    }
    return uses;
  }

  LogicalResult adapt(func::FuncOp func, BlockArgument w) {
    MLIRContext *ctx = &getContext();
    const unsigned index = w.getArgNumber();
    StringRef name =
        func.getArgAttrOfType<StringAttr>(index, nn::NNDialect::kParamAttr)
            .getValue();
    FailureOr<SmallVector<ProjectionUse>> uses = projectionUses(func, w, name);
    if (failed(uses))
      return failure();
    auto type = cast<RankedTensorType>(w.getType());
    // Every use sees the weight the same way (one A and one B per weight).
    const bool inOut = uses->front().inOut;
    if (llvm::any_of(*uses, [&](auto &u) { return u.inOut != inOut; })) {
      fail("lora.targets: '" + name.str() +
           "' is used both as [in, out] and as [out, in]");
      return failure();
    }
    const int64_t in = type.getDimSize(inOut ? 0 : 1),
                  out = type.getDimSize(inOut ? 1 : 0);
    Type element = type.getElementType();
    auto aType = RankedTensorType::get({rank, in}, element);
    auto bType = RankedTensorType::get({out, rank}, element);
    std::string module = moduleOf(name);
    Builder b(ctx);
    auto attrs = [&](RankedTensorType t, StringRef role, StringRef which) {
      SmallVector<NamedAttribute> list = {
          b.getNamedAttr(
              nn::NNDialect::kParamAttr,
              b.getStringAttr(module + "." + which.str() + ".weight")),
          b.getNamedAttr(nn::NNDialect::kLogicalTypeAttr, TypeAttr::get(t)),
          b.getNamedAttr(role, b.getStringAttr(name))};
      if (which == "lora_A" && inOut)
        list.push_back(
            b.getNamedAttr(nn::NNDialect::kLoraInOutAttr, b.getUnitAttr()));
      return b.getDictionaryAttr(list);
    };
    if (failed(func.insertArgument(
            index + 1, aType, attrs(aType, nn::NNDialect::kLoraAAttr, "lora_A"),
            w.getLoc())) ||
        failed(func.insertArgument(
            index + 2, bType, attrs(bType, nn::NNDialect::kLoraBAttr, "lora_B"),
            w.getLoc()))) {
      fail("lora: cannot add the adapters of '" + name.str() + "'");
      return failure();
    }
    func.setArgAttr(index, nn::NNDialect::kFrozenAttr, b.getUnitAttr());
    func.removeArgAttr(index, nn::NNDialect::kFrozenRowsAttr);
    Value a = func.getArgument(index + 1),
          bWeight = func.getArgument(index + 2);
    const double scale = alpha / static_cast<double>(rank);
    for (const ProjectionUse &use : *uses) {
      OpBuilder ob(ctx);
      ob.setInsertionPointAfter(use.op);
      Location loc = use.op->getLoc();
      Value y = use.op->getResult(0);
      auto mark = [&](Value v) {
        v.getDefiningOp()->setAttr(nn::NNDialect::kLoraAttr, ob.getUnitAttr());
        return v;
      };
      Value x = use.op->getOperand(0);
      if (dropout > 0)
        x = mark(nn::DropoutOp::create(ob, loc, x, dropout, kFirstSite));
      Value update;
      if (auto gemm = dyn_cast<nn::GemmOp>(use.op)) {
        // alpha op(a) W: op(a) [M, in] A^T B^T, the gemm's alpha with the
        // scale.
        auto yType = cast<RankedTensorType>(gemm.getType());
        auto hType = RankedTensorType::get({yType.getDimSize(0), rank},
                                           yType.getElementType());
        Value h = mark(
            nn::GemmOp::create(ob, loc, hType, x, a, Value(),
                               ob.getF64FloatAttr(1.0), ob.getF64FloatAttr(1.0),
                               gemm.getTransAAttr(), ob.getBoolAttr(true)));
        update = mark(nn::GemmOp::create(
            ob, loc, yType, h, bWeight, Value(),
            ob.getF64FloatAttr(gemm.getAlpha().convertToDouble() * scale),
            ob.getF64FloatAttr(1.0), ob.getBoolAttr(false),
            ob.getBoolAttr(true)));
      } else {
        Value at = mark(nn::TransposeOp::create(ob, loc, a, {1, 0}));
        Value h = mark(nn::MatMulOp::create(ob, loc, x, at));
        Value bt = mark(nn::TransposeOp::create(ob, loc, bWeight, {1, 0}));
        Value d = mark(nn::MatMulOp::create(ob, loc, h, bt));
        auto scalar = RankedTensorType::get({}, element);
        Value s = mark(nn::ConstantOp::create(
            ob, loc,
            DenseElementsAttr::get(scalar, ob.getFloatAttr(element, scale))));
        update = mark(nn::MulOp::create(ob, loc, d, s));
      }
      Value sum = mark(nn::AddOp::create(ob, loc, y, update));
      y.replaceAllUsesExcept(sum, sum.getDefiningOp());
    }
    return success();
  }

  void fail(const std::string &message) {
    getOperation().emitError() << message;
    signalPassFailure();
  }

  static constexpr int64_t kFirstSite = int64_t(1) << 31;
};

} // namespace
