//===- PlanAttr.cpp - the plan as a module attribute ----------------------===//

#include "compiler/plan/PlanAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using json = nlohmann::json;

namespace {

Attribute toAttr(Builder &b, const json &value) {
  switch (value.type()) {
  case json::value_t::object: {
    SmallVector<NamedAttribute> entries;
    for (auto it = value.begin(); it != value.end(); ++it)
      entries.push_back(b.getNamedAttr(it.key(), toAttr(b, it.value())));
    return b.getDictionaryAttr(entries);
  }
  case json::value_t::array: {
    SmallVector<Attribute> elements;
    for (const json &element : value)
      elements.push_back(toAttr(b, element));
    return b.getArrayAttr(elements);
  }
  case json::value_t::string:
    return b.getStringAttr(value.get_ref<const std::string &>());
  case json::value_t::boolean:
    return b.getBoolAttr(value.get<bool>());
  case json::value_t::number_integer:
    return b.getI64IntegerAttr(value.get<int64_t>());
  case json::value_t::number_unsigned:
    return b.getI64IntegerAttr(static_cast<int64_t>(value.get<uint64_t>()));
  case json::value_t::number_float:
    return b.getF64FloatAttr(value.get<double>());
  default:
    return b.getUnitAttr(); // null: toJson never writes one
  }
}

/// The JSON value of an attribute toAttr made; false for any other kind.
bool attrToJson(Attribute attr, json &out) {
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    out = json::object();
    for (NamedAttribute entry : dict)
      if (!attrToJson(entry.getValue(), out[entry.getName().str()]))
        return false;
    return true;
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    out = json::array();
    for (Attribute element : array) {
      out.push_back(json());
      if (!attrToJson(element, out.back()))
        return false;
    }
    return true;
  }
  if (auto s = dyn_cast<StringAttr>(attr)) {
    out = s.getValue().str();
    return true;
  }
  if (auto b = dyn_cast<BoolAttr>(attr)) {
    out = b.getValue();
    return true;
  }
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    if (!i.getType().isInteger(64))
      return false;
    out = i.getInt();
    return true;
  }
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    if (!f.getType().isF64())
      return false;
    out = f.getValueAsDouble();
    return true;
  }
  return false;
}

} // namespace

void autopar::setPlanAttr(ModuleOp module, const Plan &plan) {
  Builder b(module.getContext());
  module->setAttr(kPlanAttr, toAttr(b, autopar::toJson(plan)));
}

bool autopar::readPlanAttr(ModuleOp module, Plan &plan, std::string &error) {
  Attribute attr = module->getAttr(kPlanAttr);
  if (!attr) {
    error = "the module has no '" + kPlanAttr.str() +
            "' attribute (the plan; autopar compile writes it)";
    return false;
  }
  json value;
  if (!isa<DictionaryAttr>(attr) || !attrToJson(attr, value)) {
    error = "'" + kPlanAttr.str() +
            "' must be a dictionary of strings, booleans, i64 and f64 "
            "numbers, arrays and dictionaries";
    return false;
  }
  std::string why;
  if (!parsePlan(value, plan, why)) {
    error = kPlanAttr.str() + ": " + why;
    return false;
  }
  return true;
}
