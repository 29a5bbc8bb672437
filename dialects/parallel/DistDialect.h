//===- DistDialect.h - dist dialect -----------------------------*- C++ -*-===//

#ifndef AUTOPAR_DIALECTS_PARALLEL_DISTDIALECT_H
#define AUTOPAR_DIALECTS_PARALLEL_DISTDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/parallel/DistDialect.h.inc"

namespace autopar::dist {

/// The communicator: every op that communicates (collectives, ZeRO
/// gather/scatter, send, recv) reads and writes it, so generic passes neither
/// merge, drop nor reorder communication.
struct CommResource : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "dist::Comm"; }
};

/// Host memory of ZeRO-Offload: dist.offload and dist.fetch read and write it.
struct HostMemoryResource
    : public mlir::SideEffects::Resource::Base<HostMemoryResource> {
  llvm::StringRef getName() final { return "dist::HostMemory"; }
};

} // namespace autopar::dist

#endif // AUTOPAR_DIALECTS_PARALLEL_DISTDIALECT_H
