//===- ParamSwap.h - ZeRO-3 parameter shards on local storage ---*- C++ -*-===//
//
// ZeRO-Infinity's parameter offload (plan zero.offload_params "nvme"): each
// ZeRO-3 parameter shard of a rank lives in the swap file (SwapFile.h)
// beside its optimizer state. Its place in the parameter blob holds no
// memory (its pages are given back to the kernel); a step's gather of the
// shard asks for it (StepIO::paramSource) and gets a buffer of its own,
// read ahead: each fetch queues the reads of the next shards the last call
// of the same step function fetched (DeepSpeed's trace of the first
// iteration, here kept current), so a gather waits only for the disk's
// backlog. The buffer is freed when the gather is complete. Host memory is
// the read-ahead window, not the shards.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_OFFLOAD_PARAMSWAP_H
#define AUTOPAR_RUNTIME_OFFLOAD_PARAMSWAP_H

#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/offload/SwapFile.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace autopar::rt {

class ParamSwap final : public ParamSource {
public:
  /// Shards read ahead of the one fetched (DeepSpeed's buffer_count, 5,
  /// less the one in use).
  static constexpr int kReadAhead = 4;

  explicit ParamSwap(SwapFile &file) : file(file) {}

  /// A shard of `bytes` at `place` (in the parameter blob), stored at
  /// `offset` of the swap file (a multiple of kSwapAlign, swapAligned(bytes)
  /// reserved).
  void add(char *place, int64_t bytes, int64_t offset);
  bool empty() const { return regions.empty(); }

  /// A call of the step function `function` starts: its fetches follow
  /// (and re-record) the trace of its last call.
  void beginPass(const void *function);
  const void *fetch(const void *shard) override;
  void release(const void *shard) override;
  /// The first failed read of a fetch since the last call (the step that
  /// saw it computed with zeros), cleared.
  Status takeFailure();

  /// The update rewrote the shard at `place` with `bytes` (which it writes
  /// to the file next): a read ahead of it takes the new values.
  void updated(const void *place, const char *bytes);
  /// Completes every read ahead and frees the buffers no gather holds.
  Status settle();
  /// Every shard into its place in the blob (for a save, a load, an
  /// export), or from its place into the file (`write`) and the place's
  /// pages given back; without `write` the pages alone.
  Status load();
  Status store(bool write);
  /// store(true) of the shard at `place` alone (as the initial weights
  /// come in: the blob is never resident whole).
  Status storeOne(const void *place);

private:
  /// Pages of their own (mmap): freed, they go back to the kernel at once
  /// (malloc would keep them for its next allocations).
  class Pages {
  public:
    Pages() = default;
    explicit Pages(int64_t bytes);
    Pages(Pages &&other) noexcept { *this = std::move(other); }
    Pages &operator=(Pages &&other) noexcept;
    ~Pages() { reset(); }
    void reset();
    char *get() const { return data; }
    explicit operator bool() const { return data != nullptr; }

  private:
    char *data = nullptr;
    size_t size = 0;
  };
  struct Region {
    char *place = nullptr;
    int64_t bytes = 0, offset = 0;
    /// The shard read or being read (ticket: its request, -1 when done).
    Pages buffer;
    int64_t ticket = -1;
    int users = 0;
  };
  SwapFile &file;
  std::vector<Region> regions;
  std::unordered_map<const void *, int> byPlace;
  /// The regions each step function's last call fetched, in order; the
  /// call in progress (its function, its fetches so far, and where it is
  /// in its function's last trace).
  std::unordered_map<const void *, std::vector<int>> traces;
  const void *function = nullptr;
  std::vector<int> recording;
  size_t position = 0;
  Status failure = Status::ok();
  /// Queues region r's read into a new buffer (if it has none).
  bool queue(int r);
  /// Waits for region g's read if one is in flight (a failure recorded).
  void finishRead(Region &g);
  /// Frees region r's buffer when no gather holds it and its read is done.
  void drop(Region &g);
  /// Gives the pages wholly inside region r's place back to the kernel.
  void givePagesBack(const Region &g);
  /// Writes region g's place to the file through `bounce` (swapAligned(
  /// g.bytes) bytes, aligned) and gives its pages back.
  Status writePlace(const Region &g, char *bounce);
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_OFFLOAD_PARAMSWAP_H
