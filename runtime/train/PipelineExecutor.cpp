//===- PipelineExecutor.cpp - a pipeline-parallel step --------------------===//
//
// An action waits only for the transfers that bring what it reads; a
// stage's outputs wait in an outbox until their group sends them, and a
// micro-batch's buffers go back to the pool after its last phase on the
// stage.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/PipelineExecutor.h"

#include "runtime/support/File.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>
#include <utility>

namespace autopar::rt::train {

PipelineExecutor::PipelineExecutor(const autopar::rt::ModelInfo &info,
                                   autopar::rt::Communicator &comm,
                                   autopar::rt::Device &device,
                                   TensorStore &store)
    : info(info), comm(comm), device(device), store(store) {}

double PipelineExecutor::run(
    bool tracing, const std::function<void(int64_t micro)> &fillInputs,
    const std::function<const RandomKey *(int64_t micro)> &randomKey,
    const std::vector<const void *> &inputPtrs, char *arena, char *lossBuffer) {
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  const autopar::rt::AxisMask ppMask = 1u << pp.ppAxis;
  const int rank = static_cast<int>(comm.coord(pp.ppAxis));
  const int64_t m = info.microBatches;
  // World ranks are row-major over the mesh axes: pipeline rank r of this
  // rank's pipeline.
  int64_t stride = 1;
  for (int a = pp.ppAxis + 1; a < info.numMeshAxes; ++a)
    stride *= info.meshAxisSizes[a];
  auto worldOf = [&](int stage) {
    return static_cast<int>(comm.rank() +
                            (pp.stages[stage].rank - rank) * stride);
  };
  // Gradients accumulate over the phases of the step.
  for (size_t k = 0; k < store.grads.size(); ++k)
    if (store.grads[k])
      device.zero(store.grads[k].get(),
                  store.shards[k].tensor->numElements *
                      store.shards[k].tensor->gradElementBytes);
  // Buffers come from the pool and go back to it after their last use (on
  // a device, uses are ordered on the compute stream, and the transfers
  // after what the compute stream issued before them).
  auto take = [&](int64_t bytes) {
    auto it = pipelineBuffers.find(bytes);
    if (it == pipelineBuffers.end()) {
      DeviceBuffer buffer = device.allocate(bytes);
      if (!buffer) {
        std::fprintf(stderr,
                     "train: rank %d: out of memory on %s for a pipeline "
                     "buffer of %lld bytes\n",
                     comm.rank(), device.name().c_str(),
                     static_cast<long long>(bytes));
        comm.abort(1);
      }
      return buffer;
    }
    DeviceBuffer buffer = std::move(it->second);
    pipelineBuffers.erase(it);
    return buffer;
  };
  auto give = [&](DeviceBuffer &buffer, int64_t bytes) {
    if (buffer)
      pipelineBuffers.emplace(bytes, std::move(buffer));
  };
  // What a micro-batch in flight on a stage keeps until its last phase,
  // and the requests of the groups that receive its input and its output's
  // gradient.
  struct InFlight {
    DeviceBuffer received, outputGrad;
    std::vector<DeviceBuffer> saved;
    autopar::rt::CommRequest receivedBy, outputGradBy;
  };
  std::map<std::pair<int, int>, InFlight> live;
  // What a stage made for micro-batch j, until its group sends it: the
  // activation (false) or its input's gradient (true).
  std::map<std::tuple<bool, int, int>, DeviceBuffer> outbox;
  auto bytesOf = [&](const autopar::rt::PipelineTransfer &t) {
    const autopar::rt::PipelineStage &from = pp.stages[t.stage];
    return t.gradient ? from.inputBytes : from.outputBytes;
  };
  // The rank's transfer groups before its action `before`, each started
  // as one exchange. An action waits only for the transfers that bring what
  // it reads (NCCL: for their group; on a device, the compute stream
  // waits): the groups complete in order on NCCL's stream, the transfers in
  // any order under MPI (which the compiler's replay of the stricter order
  // covers). Sent buffers go back to the pool after the step.
  int group = pp.firstGroup[rank];
  std::vector<autopar::rt::PointToPoint> ops;
  std::vector<autopar::rt::CommRequest> requests;
  std::vector<std::pair<DeviceBuffer, int64_t>> sent;
  auto transfers = [&](int before) {
    for (; group < pp.firstGroup[rank + 1] && pp.groups[group].before == before;
         ++group) {
      const autopar::rt::PipelineGroup &g = pp.groups[group];
      ops.clear();
      for (int i = g.first; i < g.first + g.count; ++i) {
        const autopar::rt::PipelineTransfer &t = pp.transfers[i];
        const int to = t.gradient ? t.stage - 1 : t.stage + 1;
        const int64_t bytes = bytesOf(t);
        // One tag per transfer (the MPI backend matches by tag; NCCL by
        // order, which the compiler made the same on both sides).
        const int tag = t.gradient
                            ? static_cast<int>((to * m + t.micro) * 2 + 1)
                            : static_cast<int>((t.stage * m + t.micro) * 2);
        if (t.send) {
          auto it = outbox.find({t.gradient != 0, t.stage, t.micro});
          sent.emplace_back(std::move(it->second), bytes);
          outbox.erase(it);
          ops.push_back(
              {true, sent.back().first.get(), bytes, worldOf(to), tag});
        } else {
          InFlight &f = live[{to, t.micro}];
          DeviceBuffer &into = t.gradient ? f.outputGrad : f.received;
          into = take(bytes);
          ops.push_back({false, into.get(), bytes, worldOf(t.stage), tag});
        }
      }
      requests.resize(ops.size());
      comm.exchange(ops.data(), static_cast<int>(ops.size()), requests.data());
      for (int i = 0; i < g.count; ++i) {
        const autopar::rt::PipelineTransfer &t = pp.transfers[g.first + i];
        if (t.send)
          continue;
        InFlight &f = live[{t.gradient ? t.stage - 1 : t.stage + 1, t.micro}];
        (t.gradient ? f.outputGradBy : f.receivedBy) = requests[i];
      }
    }
  };
  double lossSum = 0;
  // --trace: microseconds of the monotonic clock (one clock for the ranks
  // of a host), each action from after what it receives has arrived to the
  // end of its computation (before what it sends).
  auto since = [] {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  if (tracing)
    traceTimes.assign(2 * pp.first[pp.numRanks], 0.0);
  for (int a = pp.first[rank]; a < pp.first[rank + 1]; ++a) {
    const autopar::rt::PipelineAction &act = pp.actions[a];
    const autopar::rt::PipelineStage &st = pp.stages[act.stage];
    const bool last = act.stage + 1 == pp.numStages;
    const autopar::rt::PipelinePhase &ph = act.op == 0   ? st.forward
                                           : act.op == 1 ? st.backward
                                           : act.op == 2 ? st.input
                                                         : st.weight;
    fillInputs(act.micro);
    // The activation from the previous stage and the gradient from the
    // next arrive in the groups before the action (or earlier).
    transfers(a - pp.first[rank]);
    InFlight &f = live[{act.stage, act.micro}];
    if (act.op == 0 && act.stage > 0)
      comm.wait(f.receivedBy);
    if ((act.op == 1 || act.op == 2) && !last)
      comm.wait(f.outputGradBy);
    if (tracing) {
      device.synchronize();
      traceTimes[2 * a] = since();
    }
    if (act.op == 0)
      f.saved.resize(st.numSaved);
    std::vector<const void *> in;
    for (int i = 0; i < ph.numArgs; ++i) {
      const autopar::rt::PipelineSlot &slot = ph.args[i];
      in.push_back(slot.kind == 0   ? inputPtrs[slot.index]
                   : slot.kind == 1 ? f.received.get()
                   : slot.kind == 2 ? f.outputGrad.get()
                                    : f.saved[slot.index].get());
    }
    std::vector<void *> out;
    DeviceBuffer output, inputGrad;
    for (int r = 0; r < ph.numResults; ++r) {
      const autopar::rt::PipelineSlot &slot = ph.results[r];
      if (slot.kind == 0) {
        if (!last)
          output = take(st.outputBytes);
        out.push_back(last ? lossBuffer : output.get());
      } else if (slot.kind == 1) {
        out.push_back(store.grads[store.trainableIndex[slot.index]].get());
      } else if (slot.kind == 2) {
        inputGrad = take(st.inputBytes);
        out.push_back(inputGrad.get());
      } else {
        f.saved[slot.index] = take(st.savedBytes[slot.index]);
        out.push_back(f.saved[slot.index].get());
      }
    }
    autopar::rt::StepIO io{store.params.get(),
                           in.data(),
                           arena,
                           out.data(),
                           1.0f / static_cast<float>(m),
                           true};
    io.comm = &comm;
    io.device = device.context();
    io.random = randomKey(act.micro);
    ph.fn(io);
    if (tracing) {
      device.synchronize();
      traceTimes[2 * a + 1] = since();
    }
    if (act.op == 0 && last) {
      float loss = 0;
      device.download(&loss, lossBuffer, sizeof(float));
      lossSum += loss;
    } else if (act.op == 0) {
      outbox[{false, act.stage, act.micro}] = std::move(output);
    }
    if (inputGrad && act.stage > 0)
      outbox[{true, act.stage, act.micro}] = std::move(inputGrad);
    else
      give(inputGrad, st.inputBytes);
    // The micro-batch leaves the stage after its last phase.
    if (act.op == 1 || act.op == 3) {
      give(f.received, st.inputBytes);
      give(f.outputGrad, st.outputBytes);
      for (int i = 0; i < st.numSaved; ++i)
        give(f.saved[i], st.savedBytes[i]);
      live.erase({act.stage, act.micro});
    }
  }
  transfers(pp.first[rank + 1] - pp.first[rank]);
  comm.waitAll();
  for (auto &[buffer, bytes] : sent)
    give(buffer, bytes);
  if (tracing)
    comm.allReduceSumDouble(traceTimes.data(),
                            static_cast<int64_t>(traceTimes.size()), ppMask);
  comm.allReduceSumDouble(&lossSum, 1, ppMask);
  return lossSum;
}

Status PipelineExecutor::writeTrace(const std::string &path) const {
  const autopar::rt::PipelineInfo &pp = *info.pipeline;
  static const char *const kOps[] = {"F", "B", "I", "W"};
  // Times from the step's first action.
  double t0 = traceTimes.empty() ? 0 : traceTimes[0];
  for (size_t i = 0; i < traceTimes.size(); i += 2)
    t0 = std::min(t0, traceTimes[i]);
  std::string out = "{\"traceEvents\": [\n";
  char buf[256];
  for (int r = 0; r < pp.numRanks; ++r) {
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                  "\"tid\": %d, \"args\": {\"name\": \"pp rank %d\"}},\n",
                  r, r);
    out += buf;
  }
  for (int r = 0; r < pp.numRanks; ++r)
    for (int a = pp.first[r]; a < pp.first[r + 1]; ++a) {
      const autopar::rt::PipelineAction &act = pp.actions[a];
      std::snprintf(buf, sizeof(buf),
                    "{\"name\": \"%s%d s%d\", \"cat\": \"%s\", \"ph\": \"X\", "
                    "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                    "\"args\": {\"stage\": %d, \"micro_batch\": %d}}%s\n",
                    kOps[act.op], static_cast<int>(act.micro),
                    static_cast<int>(act.stage), kOps[act.op], r,
                    traceTimes[2 * a] - t0,
                    traceTimes[2 * a + 1] - traceTimes[2 * a],
                    static_cast<int>(act.stage), static_cast<int>(act.micro),
                    a + 1 < pp.first[pp.numRanks] ? "," : "");
      out += buf;
    }
  out += "],\n\"displayTimeUnit\": \"ms\"}\n";
  return autopar::rt::writeFileAtomically(path, out.data(), out.size());
}

} // namespace autopar::rt::train
