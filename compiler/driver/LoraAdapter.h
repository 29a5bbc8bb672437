//===- LoraAdapter.h - a PEFT adapter folder as initial adapters -*- C++
//-*-===//
//
// The plan's lora.init_adapter: PEFT's adapter_config.json and
// adapter_model.safetensors, checked against the plan and the model's
// adapters (autopar-lora's parameters) and read as their initial values.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_DRIVER_LORAADAPTER_H
#define AUTOPAR_COMPILER_DRIVER_LORAADAPTER_H

#include "compiler/plan/Plan.h"
#include "frontends/onnx/WeightStore.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace autopar {

/// Reads the adapter folder `plan.initAdapter` for the LoRA parameters of
/// `func` (arguments with nn.lora_a / nn.lora_b, at their nn.logical_type):
/// each one's float32 bytes by parameter name into `out`. PEFT names the
/// tensor of parameter "P<M>.lora_A.weight" (P the plan's module_prefix)
/// "base_model.model.<M>.lora_A.weight"; F32, F16 and BF16 tensors are
/// read. The parameters of PEFT's modules_to_save (nn.lora_save) are read
/// too where the folder holds them, at the model's shapes (`weights`).
/// False with a one-line `error` naming the file when it cannot be
/// read, its r or lora_alpha differ from the plan's, an adapter's tensor
/// is missing, a tensor is of another shape, or it adapts a module the
/// plan does not.
bool readLoraAdapter(const LoraPlan &plan, mlir::func::FuncOp func,
                     const onnx_import::WeightStore &weights,
                     llvm::StringMap<std::vector<char>> &out,
                     std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_DRIVER_LORAADAPTER_H
