//===- Crc32c.h - CRC32C checksums ------------------------------*- C++ -*-===//
//
// CRC32C (Castagnoli), the checksum of checkpoint shards and manifests: the
// CRC of iSCSI, ext4 and Google's crc32c library, so that other tools can
// check a checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SUPPORT_CRC32C_H
#define AUTOPAR_RUNTIME_SUPPORT_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace autopar::rt {

/// CRC32C (Castagnoli) of `size` bytes, continuing `crc` (0 to start):
/// crc32c(0, "123456789", 9) == 0xe3069283.
uint32_t crc32c(uint32_t crc, const void *data, size_t size);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_SUPPORT_CRC32C_H
