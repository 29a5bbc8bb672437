//===- ShardingRule.cpp - the sharding rule of an op ----------------------===//

#include "dialects/parallel/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace autopar::dist;

#include "dialects/parallel/ShardingInterface.cpp.inc"

namespace {

/// i, j, ..., z, then z1, z2, ... as Shardy names factors.
std::string factorName(int64_t f) {
  if (f < 18)
    return std::string(1, static_cast<char>('i' + f));
  return "z" + std::to_string(f - 17);
}

} // namespace

void OpShardingRule::print(llvm::raw_ostream &os, Operation *op) const {
  // The dim sizes each factor indexes, distinct, in order of appearance (a
  // reshape's major factor spans dims of different sizes).
  SmallVector<SmallVector<int64_t, 1>> sizes(splittable.size());
  auto list = [&](ArrayRef<SmallVector<int64_t>> all, ValueRange values) {
    os << "(";
    for (auto [k, factors] : llvm::enumerate(all)) {
      os << (k ? ", " : "") << "[";
      auto shape = k < values.size()
                       ? cast<ShapedType>(values[k].getType()).getShape()
                       : ArrayRef<int64_t>();
      for (auto [d, f] : llvm::enumerate(factors)) {
        os << (d ? ", " : "");
        if (f < 0) {
          os << "1";
          continue;
        }
        os << factorName(f);
        if (d < shape.size() && !llvm::is_contained(sizes[f], shape[d]))
          sizes[f].push_back(shape[d]);
      }
      os << "]";
    }
    os << ")";
  };
  list(operandFactors, op->getOperands());
  os << "->";
  list(resultFactors, op->getResults());
  os << " {";
  for (size_t f = 0; f < splittable.size(); ++f) {
    os << (f ? ", " : "") << factorName(f) << "=";
    llvm::interleave(sizes[f], os, "/");
  }
  os << "}";
  auto factorSet = [&](StringRef key, auto keep) {
    SmallVector<std::string> names;
    for (size_t f = 0; f < splittable.size(); ++f)
      if (keep(f))
        names.push_back(factorName(f));
    if (names.empty())
      return;
    os << " " << key << "={";
    llvm::interleave(names, os, ", ");
    os << "}";
  };
  auto indexed = [&](int64_t f) {
    return llvm::any_of(resultFactors, [&](const SmallVector<int64_t> &r) {
      return llvm::is_contained(r, f);
    });
  };
  factorSet("need_replication", [&](size_t f) { return !splittable[f]; });
  factorSet("reduction", [&](size_t f) {
    return splittable[f] && !indexed(f) && reduction[f] == Reduction::Sum;
  });
  factorSet("mean", [&](size_t f) {
    return splittable[f] && !indexed(f) && reduction[f] == Reduction::Mean;
  });
  factorSet("within", [&](size_t f) {
    return splittable[f] && !indexed(f) && reduction[f] == Reduction::Within;
  });
  factorSet("placeable",
            [&](size_t f) { return llvm::is_contained(placeable, f); });
  factorSet("mean_scaled",
            [&](size_t f) { return llvm::is_contained(meanScaled, f); });
  if (linearity != Linearity::None) {
    os << " linear=" << (linearity == Linearity::OneOf ? "one_of" : "all_of")
       << "(";
    bool first = true;
    for (auto [i, linear] : llvm::enumerate(linearOperand))
      if (linear && i < op->getNumOperands()) {
        os << (first ? "" : ", ") << i;
        first = false;
      }
    os << ")";
  }
}
