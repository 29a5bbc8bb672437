//===- ScheduleCollectives.cpp - gradient buckets issued during backward --===//

#include "passes/parallel/Passes.h"

#include "passes/lowering/Passes.h"

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
    auto bucketAttr = module->getAttrOfType<IntegerAttr>(kBucketBytesAttr);
    int64_t bucketBytes = bucketAttr ? bucketAttr.getInt() : 25 << 20;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        schedule(func, bucketBytes);
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
        c->setAttr(kBucketAttr, b.getI64IntegerAttr(bucket));
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
