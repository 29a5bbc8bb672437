//===- ParamSwap.cpp - ZeRO-3 parameter shards on local storage -----------===//

#include "runtime/offload/ParamSwap.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace autopar::rt {

ParamSwap::Pages::Pages(int64_t bytes) {
  const size_t want =
      static_cast<size_t>(swapAligned(std::max<int64_t>(bytes, 1)));
  void *p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    data = static_cast<char *>(p);
    size = want;
  }
}

ParamSwap::Pages &ParamSwap::Pages::operator=(Pages &&other) noexcept {
  if (this != &other) {
    reset();
    data = other.data;
    size = other.size;
    other.data = nullptr;
    other.size = 0;
  }
  return *this;
}

void ParamSwap::Pages::reset() {
  if (data)
    ::munmap(data, size);
  data = nullptr;
  size = 0;
}

void ParamSwap::add(char *place, int64_t bytes, int64_t offset) {
  byPlace[place] = static_cast<int>(regions.size());
  Region g;
  g.place = place;
  g.bytes = bytes;
  g.offset = offset;
  regions.push_back(std::move(g));
}

Status ParamSwap::takeFailure() {
  Status status = failure;
  failure = Status::ok();
  return status;
}

bool ParamSwap::queue(int r) {
  Region &g = regions[r];
  if (g.buffer)
    return true;
  g.buffer = Pages(g.bytes);
  if (!g.buffer) {
    if (failure.isOk())
      failure = Status::error("out of memory for a parameter shard read "
                              "from the swap file");
    return false;
  }
  g.ticket = file.read(g.offset, g.buffer.get(), swapAligned(g.bytes));
  return true;
}

void ParamSwap::beginPass(const void *fn) {
  if (function)
    traces[function] = std::move(recording);
  recording.clear();
  function = fn;
  position = 0;
}

const void *ParamSwap::fetch(const void *shard) {
  auto it = byPlace.find(shard);
  if (it == byPlace.end())
    return shard; // not swapped
  const int r = it->second;
  recording.push_back(r);
  // Where this fetch is in the last call's trace: next, or a few ahead
  // (a pass that skipped some), else off the trace (no read-ahead).
  auto known = traces.find(function);
  const std::vector<int> *trace =
      known == traces.end() ? nullptr : &known->second;
  bool onTrace = false;
  for (size_t p = position; trace && p < trace->size() && p < position + 8; ++p)
    if ((*trace)[p] == r) {
      position = p + 1;
      onTrace = true;
      break;
    }
  queue(r);
  // Read ahead: the trace's next shards, into the start of the next call
  // of the same function past its end (the update refreshes what it
  // rewrites, updated()).
  if (onTrace)
    for (size_t n = 0; n < size_t{kReadAhead} && n < trace->size(); ++n)
      queue((*trace)[(position + n) % trace->size()]);
  file.submit();
  Region &g = regions[r];
  if (!g.buffer)
    return g.place; // out of memory: recorded, the step reads zeros
  finishRead(g);
  ++g.users;
  return g.buffer.get();
}

void ParamSwap::finishRead(Region &g) {
  if (g.ticket < 0)
    return;
  Status status = file.waitFor(g.ticket);
  if (!status.isOk() && failure.isOk())
    failure = status;
  g.ticket = -1;
}

void ParamSwap::drop(Region &g) {
  if (g.users > 0 || !g.buffer)
    return;
  finishRead(g);
  g.buffer.reset();
}

void ParamSwap::release(const void *shard) {
  auto it = byPlace.find(shard);
  if (it == byPlace.end())
    return;
  Region &g = regions[it->second];
  if (g.users > 0 && --g.users == 0)
    drop(g);
}

void ParamSwap::updated(const void *place, const char *bytes) {
  auto it = byPlace.find(place);
  if (it == byPlace.end())
    return;
  Region &g = regions[it->second];
  if (!g.buffer)
    return;
  finishRead(g); // the read of the old values, before the copy
  std::memcpy(g.buffer.get(), bytes, static_cast<size_t>(g.bytes));
}

Status ParamSwap::settle() {
  for (Region &g : regions)
    drop(g);
  return takeFailure();
}

void ParamSwap::givePagesBack(const Region &g) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(g.place);
  const uintptr_t from = (begin + page - 1) / page * page;
  const uintptr_t to = (begin + static_cast<uintptr_t>(g.bytes)) / page * page;
  // Anonymous memory: the pages read as zeros if touched again. Advice
  // only: where the kernel refuses, the memory stays (and nothing else).
  if (to > from)
    ::madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED);
}

Status ParamSwap::load() {
  AUTOPAR_RT_RETURN_IF_ERROR(settle());
  for (size_t r = 0; r < regions.size(); ++r) {
    Region &g = regions[r];
    if (!queue(static_cast<int>(r)))
      return takeFailure();
    file.submit();
    AUTOPAR_RT_RETURN_IF_ERROR(file.waitFor(g.ticket));
    g.ticket = -1;
    std::memcpy(g.place, g.buffer.get(), static_cast<size_t>(g.bytes));
    g.buffer.reset();
  }
  return Status::ok();
}

Status ParamSwap::store(bool write) {
  // Buffers read before the places changed are stale.
  AUTOPAR_RT_RETURN_IF_ERROR(settle());
  int64_t largest = 0;
  for (const Region &g : regions)
    largest = std::max(largest, g.bytes);
  Pages bounce;
  if (write && !regions.empty()) {
    bounce = Pages(largest);
    if (!bounce)
      return Status::error("out of memory writing the parameter shards to "
                           "the swap file");
  }
  for (const Region &g : regions) {
    if (write)
      AUTOPAR_RT_RETURN_IF_ERROR(writePlace(g, bounce.get()));
    else
      givePagesBack(g);
  }
  return Status::ok();
}

Status ParamSwap::writePlace(const Region &g, char *bounce) {
  std::memcpy(bounce, g.place, static_cast<size_t>(g.bytes));
  std::memset(bounce + g.bytes, 0,
              static_cast<size_t>(swapAligned(g.bytes) - g.bytes));
  AUTOPAR_RT_RETURN_IF_ERROR(
      file.waitFor(file.write(g.offset, bounce, swapAligned(g.bytes))));
  givePagesBack(g);
  return Status::ok();
}

Status ParamSwap::storeOne(const void *place) {
  auto it = byPlace.find(place);
  if (it == byPlace.end())
    return Status::ok();
  Region &g = regions[it->second];
  drop(g);
  if (g.buffer)
    return Status::error("a parameter shard in use was rewritten");
  Pages bounce(g.bytes);
  if (!bounce)
    return Status::error("out of memory writing a parameter shard to the "
                         "swap file");
  return writePlace(g, bounce.get());
}

} // namespace autopar::rt
