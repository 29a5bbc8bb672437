//===- Rendezvous.h - the ranks of a world meet without MPI -----*- C++ -*-===//
//
// How the ranks of a program started without MPI (srun, torchrun, a script)
// find each other: rank 0 listens on the endpoint's port (every interface,
// as torch.distributed's TCPStore), every other rank connects to the
// endpoint's host and says who it is (rank, world size), and once the whole
// world has arrived rank 0 sends each the same bytes (NCCL's unique id) and
// everyone goes on. Nothing waits forever: a rank that does not arrive
// within the timeout makes every rank return one line naming the endpoint
// and the ranks missing (rank 0 tells those that did arrive); a rank 0 that
// never listens makes the others return one line naming the endpoint; two
// processes claiming one rank, or disagreeing on the world's size, are one
// line on every rank. POSIX sockets only: no MPI, no CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMM_RENDEZVOUS_H
#define AUTOPAR_RUNTIME_COMM_RENDEZVOUS_H

#include "runtime/Status.h"
#include "runtime/comm/Launch.h"

#include <string>
#include <vector>

namespace autopar::rt {

/// Meets the other ranks of a world of `worldSize` ranks at `endpoint`
/// (rank 0 listens on its port), within `timeoutSeconds` (> 0) of the call.
/// On rank 0 `blob` is sent to every rank; elsewhere it is replaced by what
/// rank 0 sent. The error texts name the endpoint (and its source) and, for
/// a world that did not form, the ranks that did not arrive.
Status rendezvous(const Endpoint &endpoint, int rank, int worldSize,
                  double timeoutSeconds, std::string &blob);

/// "1, 3-5, 9": the sorted ranks as ranges, at most `limit` items (then
/// "and N more").
std::string rankList(const std::vector<int> &ranks, size_t limit = 16);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_COMM_RENDEZVOUS_H
