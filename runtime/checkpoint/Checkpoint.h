//===- Checkpoint.h - Logical checkpoints addressed by name -----*- C++ -*-===//
//
// A checkpoint is a directory holding manifest.json and shard-00000.bin:
//
//   {"format":2,"step":100,"model":"<fingerprint>","optimizer":"adamw",
//    "tensors":[{"name":"h.0.attn.c_attn.weight","dtype":"f32",
//                "shape":[64,192],"file":"shard-00000.bin","offset":0,
//                "bytes":49152,"crc32c":"1a2b3c4d"}, ...],
//    "shards":[{"file":"shard-00000.bin","bytes":N}],
//    "checksum":"crc32c:<the CRC32C of the text before ,"checksum">"}
//
// Tensors are logical (full-shape, host byte order) and found by name, so a
// checkpoint written under one parallelism plan loads under any other. Saving
// writes DIR.tmp-<pid> and renames it over DIR, so a crash never leaves a
// half-written checkpoint at DIR.
//
// The manifest is read by the runtime's strict JSON reader (parseJson,
// runtime/support/Json.h); tensors and the manifest carry CRC32Cs
// (runtime/support/Crc32c.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
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
  /// Overflows the scaler still tolerates (hysteresis); 0 where the
  /// checkpoint does not say (written before hysteresis existed).
  int64_t lossScaleHysteresisLeft = 0;
  int64_t skippedSteps = 0;
};

/// Whether a checkpoint can be saved at DIR: DIR absent, or a checkpoint
/// directory (holding nothing else), in a writable directory. Checked
/// before a run starts, so that a run is not lost to a late error.
Status checkSaveTarget(const std::string &dir);

/// Writes every tensor and the manifest into DIR (replacing an older
/// checkpoint there; a DIR holding anything else is refused), with a
/// CRC32C per tensor and the manifest's own. Removes what killed saves
/// into DIR left (DIR.tmp-<pid>, DIR.old-<pid> of processes that are gone).
/// With `keepLast` > 1 the replaced checkpoint stays as DIR.step-<its step>,
/// and only the newest `keepLast - 1` of those are kept.
Status saveCheckpoint(const std::string &dir,
                      const std::vector<TensorRef> &tensors,
                      const CheckpointMeta &meta, int64_t keepLast = 1);

/// Fills every TensorRef's data from the checkpoint in DIR by name. Before
/// reading any tensor it checks the manifest (its checksum, the step, each
/// tensor's shape, byte count and range in its shard, no two overlapping,
/// each shard's size), the optimizer that wrote it (when not empty), each
/// tensor's dtype and shape against `tensors`, and the model fingerprint;
/// each tensor read must match its CRC32C and, for floats, be finite.
/// Fills `meta` from the manifest. Tensors of the checkpoint that
/// `tensors` does not name are ignored. On an error the data read so far
/// is not to be used.
Status loadCheckpoint(const std::string &dir,
                      const std::vector<TensorRef> &tensors,
                      CheckpointMeta &meta,
                      const std::string &expectedFingerprint,
                      const std::string &expectedOptimizer = "");

/// Bytes per element of a dtype name, 0 when unknown.
int64_t dtypeBytes(const std::string &dtype);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_CHECKPOINT_CHECKPOINT_H
