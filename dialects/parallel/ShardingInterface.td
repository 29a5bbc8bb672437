//===- ShardingInterface.td - the sharding rule of an op ---*- tablegen -*-===//

#ifndef AUTOPAR_DIST_SHARDING_INTERFACE
#define AUTOPAR_DIST_SHARDING_INTERFACE

include "mlir/IR/OpBase.td"

def Dist_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let description = [{
    How shardings flow through an op (dialects/parallel/ShardingRule.h,
    after Shardy's OpShardingRule): its iteration space as factors, the
    factor each operand and result dim indexes, the factors that may not be
    split, the reduction over factors a result does not index, and how a
    pending sum passes through. Sharding propagation and spmdization read
    every op's rule through this interface: the nn ops get theirs from
    passes/parallel (registerShardingRuleModels), another dialect's ops
    attach their own model.
  }];
  let cppNamespace = "::autopar::dist";
  let methods = [
    InterfaceMethod<
      "The op's sharding rule, or failure if it has none (its operands and "
      "results are then kept whole).",
      "::mlir::FailureOr<::autopar::dist::OpShardingRule>", "getShardingRule">,
  ];
}

#endif // AUTOPAR_DIST_SHARDING_INTERFACE
