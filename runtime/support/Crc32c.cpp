//===- Crc32c.cpp - CRC32C checksums --------------------------------------===//
//
// Table-driven, eight bytes at a time (slicing-by-8); the tables are made
// once, on the first call.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Crc32c.h"

#include <array>
#include <cstring>

namespace autopar::rt {

namespace {

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), eight bytes at a
/// time (slicing-by-8).
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 8> t;
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0u);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};

} // namespace

uint32_t crc32c(uint32_t crc, const void *data, size_t size) {
  static const Crc32cTables tables;
  const auto &t = tables.t;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
          t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
          t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; size; --size, ++p)
    crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
  return ~crc;
}

} // namespace autopar::rt
