//===- Checkpoint.h - Logical checkpoints addressed by name -----*- C++ -*-===//
//
// A checkpoint is a directory holding manifest.json and shard-00000.bin:
//
//   {"format":1,"step":100,"model":"<fingerprint>","optimizer":"adamw",
//    "tensors":[{"name":"h.0.attn.c_attn.weight","dtype":"f32",
//                "shape":[64,192],"file":"shard-00000.bin","offset":0,
//                "bytes":49152}, ...]}
//
// Tensors are logical (full-shape, host byte order) and found by name, so a
// checkpoint written under one parallelism plan loads under any other. Saving
// writes DIR.tmp-<pid> and renames it over DIR, so a crash never leaves a
// half-written checkpoint at DIR.
//
// The manifest is read by a small strict JSON reader (parseJson), which the
// runtime's other JSON readers and the tests share.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autopar::rt {

struct TensorRef {
  std::string name;
  /// "f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", ...
  std::string dtype;
  std::vector<int64_t> shape;
  void *data;
  int64_t numBytes;
};

struct CheckpointMeta {
  /// Optimizer steps taken when the checkpoint was written.
  int64_t step = 0;
  std::string modelFingerprint;
  std::string optimizer;
  /// fp16-mixed's loss scaler (0: the run has none), the steps since its
  /// last change, and the steps skipped for inf / NaN gradients (AdamW's
  /// step count is step - skippedSteps).
  double lossScale = 0;
  int64_t lossScaleGoodSteps = 0;
  int64_t skippedSteps = 0;
};

/// Writes every tensor and the manifest into DIR (replacing an older
/// checkpoint there; a DIR holding anything else is refused).
Status saveCheckpoint(const std::string &dir,
                      const std::vector<TensorRef> &tensors,
                      const CheckpointMeta &meta);

/// Fills every TensorRef's data from the checkpoint in DIR by name, checking
/// dtype, shape and size, and (when not empty) the optimizer that wrote it,
/// first, and the model fingerprint; fills `meta` from the manifest.
/// Tensors of the checkpoint that `tensors` does not name are ignored.
Status loadCheckpoint(const std::string &dir,
                      const std::vector<TensorRef> &tensors,
                      CheckpointMeta &meta,
                      const std::string &expectedFingerprint,
                      const std::string &expectedOptimizer = "");

/// Bytes per element of a dtype name, 0 when unknown.
int64_t dtypeBytes(const std::string &dtype);

//===----------------------------------------------------------------------===//
// Minimal JSON
//===----------------------------------------------------------------------===//

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// True when the number was written without fraction or exponent and fits
  /// int64; `integer` then holds it exactly.
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  /// Members in document order (keys are unique).
  std::vector<std::pair<std::string, JsonValue>> object;

  /// The member named `key` of an object, or null.
  const JsonValue *find(const std::string &key) const;
};

/// Parses one JSON document (RFC 8259: no comments, no trailing commas, no
/// duplicate keys, nesting up to 256 deep). Error: "bad JSON at byte N
/// (reason)"; callers prefix the file name.
Status parseJson(const std::string &text, JsonValue &out);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &text);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H
