//===- ScheduleCollectives.cpp - gradient buckets issued during backward --===//

#include "passes/parallel/Passes.h"

#include "passes/lowering/Passes.h"
#include "passes/parallel/ShardingRules.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-schedule-collectives"

namespace autopar::dist {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct ScheduleCollectivesPass
    : public dist::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto bucketAttr = module->getAttrOfType<IntegerAttr>(DistDialect::kBucketBytesAttr);
    int64_t bucketBytes = bucketAttr ? bucketAttr.getInt() : 25 << 20;
    MeshOp mesh = findMesh(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal()) {
        if (mesh)
          deferReductions(func, mesh);
        schedule(func, bucketBytes);
      }
  }

  /// A gradient whose sum is already left pending over some axes (dp:
  /// reduced by the runtime once per step, after the last micro-batch)
  /// and all-reduced over others here (tp: a replicated parameter, a layer
  /// norm's under sequence parallelism) joins the once-per-step reduction:
  /// the all-reduce goes and the result's sum is pending over both. Sums
  /// commute, so the step reduces the accumulated gradient once instead
  /// of each micro-batch's.
  static void deferReductions(func::FuncOp func, MeshOp mesh) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned r = operand.getOperandNumber();
      auto attr = func.getResultAttrOfType<ShardingAttr>(r, DistDialect::kShardingAttr);
      auto reduce = operand.get().getDefiningOp<AllReduceOp>();
      if (!attr || !reduce || !reduce->hasOneUse() ||
          !func.getResultAttr(r, nn::NNDialect::kGradAttr) ||
          func.getResultAttr(r, DistDialect::kZeroAttr) ||
          reduce.getKind() != ReductionKind::sum)
        continue;
      Layout layout = Layout::fromAttr(attr);
      if (layout.partial.empty() || layout.partialKind != ReductionKind::sum)
        continue;
      SmallVector<StringRef> axes;
      for (Attribute a : reduce.getAxes())
        axes.push_back(cast<StringAttr>(a).getValue());
      if (llvm::any_of(axes, [&](StringRef a) {
            return llvm::is_contained(layout.partial, a);
          }))
        continue;
      // Pending over both, in the mesh's order.
      SmallVector<StringRef, 2> partial;
      for (Attribute a : mesh.getAxisNames()) {
        StringRef name = cast<StringAttr>(a).getValue();
        if (llvm::is_contained(layout.partial, name) ||
            llvm::is_contained(axes, name))
          partial.push_back(name);
      }
      layout.partial.assign(partial.begin(), partial.end());
      func.setResultAttr(r, DistDialect::kShardingAttr,
                         layout.toAttr(func.getContext(), mesh.getSymName()));
      operand.set(reduce.getInput());
      reduce->erase();
    }
  }

  void schedule(func::FuncOp func, int64_t bucketBytes) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // Gradient collectives, in the order their gradients are complete.
    DenseMap<Operation *, unsigned> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = i;
    auto readyAt = [&](Operation *c) -> unsigned {
      Operation *def = c->getOperand(0).getDefiningOp();
      return def ? position[def] + 1 : 0;
    };
    SmallVector<Operation *> grads;
    for (OpOperand &operand : ret->getOpOperands()) {
      if (!func.getResultAttr(operand.getOperandNumber(),
                              nn::NNDialect::kGradAttr))
        continue;
      Operation *c = operand.get().getDefiningOp();
      if (c && isa<AllReduceOp, ZeroScatterOp>(c) && c->hasOneUse())
        grads.push_back(c);
    }
    llvm::stable_sort(grads, [&](Operation *a, Operation *b) {
      return readyAt(a) < readyAt(b);
    });
    // Buckets of about bucketBytes; each is issued after its last gradient.
    int64_t bucket = 0, bytes = 0;
    SmallVector<Operation *> members;
    auto flush = [&]() {
      if (members.empty())
        return;
      Operation *anchor = nullptr;
      for (Operation *c : members)
        if (Operation *def = c->getOperand(0).getDefiningOp())
          if (!anchor || position[def] > position[anchor])
            anchor = def;
      Builder b(func.getContext());
      Operation *after = anchor;
      for (Operation *c : members) {
        if (after)
          c->moveAfter(after);
        else
          c->moveBefore(&body.front());
        after = c;
        c->setAttr(DistDialect::kBucketAttr, b.getI64IntegerAttr(bucket));
      }
      ++bucket;
      bytes = 0;
      members.clear();
    };
    for (Operation *c : grads) {
      members.push_back(c);
      bytes += tensorBytes(c->getOperand(0).getType());
      if (bytes >= bucketBytes)
        flush();
    }
    flush();
  }
};

} // namespace
