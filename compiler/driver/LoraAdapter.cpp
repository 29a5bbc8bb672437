//===- LoraAdapter.cpp - a PEFT adapter folder as initial adapters --------===//

#include "compiler/driver/LoraAdapter.h"

#include "dialects/nn/NNOps.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <set>

using namespace mlir;
using namespace autopar;
using nlohmann::json;

namespace {

/// A float of `dtype` ("F32", "F16", "BF16") at `p`, little-endian.
float readFloat(const std::string &dtype, const unsigned char *p) {
  uint32_t bits = 0;
  if (dtype == "F32") {
    bits = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
  } else if (dtype == "BF16") {
    bits = static_cast<uint32_t>(p[0] | p[1] << 8) << 16;
  } else {
    // IEEE half to single.
    const uint32_t h = p[0] | p[1] << 8, sign = (h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0x1F) {
      bits = sign | 0x7F800000u | mant << 13;
    } else if (exp) {
      bits = sign | (exp + 112) << 23 | mant << 13;
    } else if (mant) {
      exp = 113;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | exp << 23 | (mant & 0x3FF) << 13;
    } else {
      bits = sign;
    }
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

bool autopar::readLoraAdapter(const LoraPlan &plan, func::FuncOp func,
                              const onnx_import::WeightStore &weights,
                              llvm::StringMap<std::vector<char>> &out,
                              std::string &error) {
  auto fail = [&](const std::string &message) {
    error = message;
    return false;
  };
  auto read = [&](StringRef file, std::unique_ptr<llvm::MemoryBuffer> &buffer,
                  std::string &path) {
    llvm::SmallString<256> p(plan.initAdapter);
    llvm::sys::path::append(p, file);
    path = std::string(p);
    auto b = llvm::MemoryBuffer::getFile(p, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
    if (!b)
      return fail("lora.init_adapter: cannot read " + path + ": " +
                  b.getError().message());
    buffer = std::move(*b);
    return true;
  };
  std::unique_ptr<llvm::MemoryBuffer> configBuffer, tensorsBuffer;
  std::string configPath, tensorsPath;
  if (!read("adapter_config.json", configBuffer, configPath) ||
      !read("adapter_model.safetensors", tensorsBuffer, tensorsPath))
    return false;
  json config = json::parse(configBuffer->getBuffer().begin(),
                            configBuffer->getBuffer().end(), nullptr,
                            /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    return fail(configPath + ": not a JSON object");
  auto peftType = config.find("peft_type");
  if (peftType == config.end() || !peftType->is_string() ||
      peftType->get<std::string>() != "LORA")
    return fail(configPath + ": peft_type is not \"LORA\"");
  auto r = config.find("r");
  if (r == config.end() || !r->is_number_integer() ||
      r->get<int64_t>() != plan.r)
    return fail(configPath + ": r is " +
                (r == config.end() ? std::string("missing") : r->dump()) +
                ", the plan's lora.r is " + std::to_string(plan.r));
  auto alpha = config.find("lora_alpha");
  if (alpha == config.end() || !alpha->is_number() ||
      alpha->get<double>() != plan.alpha)
    return fail(
        configPath + ": lora_alpha is " +
        (alpha == config.end() ? std::string("missing") : alpha->dump()) +
        ", the plan's lora.alpha is " + json(plan.alpha).dump());

  // safetensors: an 8-byte little-endian header size, the JSON header, the
  // data.
  StringRef bytes = tensorsBuffer->getBuffer();
  uint64_t headerSize = 0;
  if (bytes.size() >= 8)
    for (int i = 7; i >= 0; --i)
      headerSize = headerSize << 8 | static_cast<unsigned char>(bytes[i]);
  if (bytes.size() < 8 || headerSize > bytes.size() - 8)
    return fail(tensorsPath + ": not a safetensors file (bad header size)");
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + headerSize,
                            nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return fail(tensorsPath + ": not a safetensors file (bad header)");
  const char *data = bytes.data() + 8 + headerSize;
  const uint64_t dataBytes = bytes.size() - 8 - headerSize;

  std::set<std::string> used;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    // A parameter of modules_to_save (lora.also_train's modules) starts
    // from the folder's value where it holds one, else from the model's.
    const bool saved = func.getArgAttr(i, nn::NNDialect::kLoraSaveAttr) &&
                       !func.getArgAttr(i, nn::NNDialect::kQuantizedAttr);
    if (!name || !(saved || func.getArgAttr(i, nn::NNDialect::kLoraAAttr) ||
                   func.getArgAttr(i, nn::NNDialect::kLoraBAttr)))
      continue;
    std::string param = name.getValue().str();
    if (!StringRef(param).starts_with(plan.modulePrefix))
      return fail("lora.module_prefix: \"" + plan.modulePrefix +
                  "\" does not begin '" + param + "'");
    std::string key =
        "base_model.model." + param.substr(plan.modulePrefix.size());
    auto entry = header.find(key);
    if (saved && entry == header.end())
      continue;
    if (entry == header.end() || !entry->is_object())
      return fail(tensorsPath + ": no tensor '" + key + "' (the adapter '" +
                  param + "' of the plan's lora)");
    std::vector<int64_t> want;
    if (saved) {
      // The model's initializer (the program may hold it padded).
      const onnx_import::ParamInfo *w = weights.lookup(param);
      if (!w || w->dtype != onnx_import::DType::Float)
        return fail(tensorsPath + ": '" + key +
                    "': lora.init_adapter sets only float32 parameters of "
                    "modules_to_save, the model's '" +
                    param + "' is not one");
      want.assign(w->shape.begin(), w->shape.end());
    } else {
      auto typeAttr =
          func.getArgAttrOfType<TypeAttr>(i, nn::NNDialect::kLogicalTypeAttr);
      auto type = cast<RankedTensorType>(
          typeAttr ? typeAttr.getValue() : func.getArgument(i).getType());
      want.assign(type.getShape().begin(), type.getShape().end());
    }
    used.insert(key);
    auto dtype = entry->find("dtype");
    auto shape = entry->find("shape");
    auto offsets = entry->find("data_offsets");
    std::string d = dtype != entry->end() && dtype->is_string()
                        ? dtype->get<std::string>()
                        : "";
    if (d != "F32" && d != "F16" && d != "BF16")
      return fail(tensorsPath + ": '" + key + "' is " +
                  (d.empty() ? std::string("of no dtype") : d) +
                  ", expected F32, F16 or BF16");
    std::vector<int64_t> dims;
    if (shape != entry->end() && shape->is_array())
      for (const json &v : *shape)
        dims.push_back(v.is_number_integer() ? v.get<int64_t>() : -1);
    if (dims != want)
      return fail(tensorsPath + ": '" + key + "' has shape " + shapeText(dims) +
                  (saved ? ", the model's parameter " + shapeText(want)
                         : ", the model's adapter " + shapeText(want) + " (r " +
                               std::to_string(plan.r) + ")"));
    const uint64_t width = d == "F32" ? 4 : 2;
    uint64_t n = 1;
    for (int64_t extent : want)
      n *= static_cast<uint64_t>(extent);
    if (offsets == entry->end() || !offsets->is_array() ||
        offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned() ||
        (*offsets)[1].get<uint64_t>() > dataBytes ||
        (*offsets)[1].get<uint64_t>() < (*offsets)[0].get<uint64_t>() ||
        (*offsets)[1].get<uint64_t>() - (*offsets)[0].get<uint64_t>() !=
            n * width)
      return fail(tensorsPath + ": '" + key +
                  "': data_offsets do not hold its " + std::to_string(n) +
                  " elements");
    const auto *p = reinterpret_cast<const unsigned char *>(data) +
                    (*offsets)[0].get<uint64_t>();
    std::vector<char> f32(n * 4);
    for (uint64_t e = 0; e < n; ++e) {
      float v = readFloat(d, p + e * width);
      std::memcpy(f32.data() + e * 4, &v, 4);
    }
    out[param] = std::move(f32);
  }
  for (const auto &item : header.items())
    if (item.key() != "__metadata__" && !used.count(item.key()))
      return fail(tensorsPath + ": '" + item.key() +
                  "' adapts a module the plan's lora.targets do not match");
  return true;
}
