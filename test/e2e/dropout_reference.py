#!/usr/bin/python3
"""autopar's dropout masks, reimplemented from their specification
(runtime/support/Philox.h, docs/fine-tuning.md) for the PyTorch reference.

  key     = (seed mod 2^32, seed / 2^32)
  element = micro * N + linear index in the micro-batch's logical tensor
  counter = (element / 4 mod 2^32, element / 2^34, site, step mod 2^32)
  bits    = word (element mod 4) of philox4x32_10(counter, key)
  dropped = bits < floor(ratio * 2^32)
  y       = dropped ? 0 : x * float32(1 / (1 - ratio))

Run as a script it checks Philox against Random123's known answers.
"""
import sys

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(c0, c1, c2, c3, k0, k1):
    """philox4x32_10 of counters (uint32 arrays) under the key (ints)."""
    c = [np.asarray(v, dtype=np.uint64) for v in (c0, c1, c2, c3)]
    for r in range(10):
        kk0 = np.uint64((k0 + r * W0) & 0xFFFFFFFF)
        kk1 = np.uint64((k1 + r * W1) & 0xFFFFFFFF)
        p0 = M0 * c[0]
        p1 = M1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        c = [(hi1 ^ c[1] ^ kk0) & MASK32, lo1, (hi0 ^ c[3] ^ kk1) & MASK32, lo0]
    return c


def threshold(ratio):
    t = float(ratio) * 4294967296.0
    return 0xFFFFFFFF if t >= 4294967295.0 else int(t)


def keep_mask(shape, seed, step, micro, site, ratio):
    """The kept elements (bool array of `shape`, the logical tensor of one
    micro-batch) of dropout site `site` at (seed, step, micro)."""
    n = int(np.prod(shape, dtype=np.int64))
    element = np.uint64(micro) * np.uint64(n) + np.arange(n, dtype=np.uint64)
    group = element >> np.uint64(2)
    words = philox4x32(group & MASK32, group >> np.uint64(32),
                       np.full(n, site, dtype=np.uint64),
                       np.full(n, step & 0xFFFFFFFF, dtype=np.uint64),
                       seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    lane = (element & np.uint64(3)).astype(np.int64)
    bits = np.choose(lane, words)
    return (bits >= np.uint64(threshold(ratio))).reshape(shape)


def lora_stream(name):
    """The Philox stream of a LoRA A's initialization: FNV-1a (32 bits) of
    its name ("M.lora_A.weight")."""
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def lora_init(shape, seed, stream, fan_in):
    """A LoRA A [r, in] as the program draws it (runtime/support/Philox.h
    loraInitValue): element e is (2u - 1) / sqrt(fan_in) rounded to float32,
    u the top 24 bits of word e mod 4 of philox4x32_10((e/4 mod 2^32, e/2^34,
    stream, 2^32 - 1), key) over 2^24: PEFT's kaiming_uniform_(a=sqrt(5))."""
    n = int(np.prod(shape, dtype=np.int64))
    element = np.arange(n, dtype=np.uint64)
    group = element >> np.uint64(2)
    words = philox4x32(group & MASK32, group >> np.uint64(32),
                       np.full(n, stream, dtype=np.uint64),
                       np.full(n, 0xFFFFFFFF, dtype=np.uint64),
                       seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    lane = (element & np.uint64(3)).astype(np.int64)
    bits = np.choose(lane, words) >> np.uint64(8)
    u = bits.astype(np.float64) * 2.0 ** -24
    return ((2 * u - 1) * (1.0 / np.sqrt(np.float64(fan_in)))).astype(np.float32).reshape(shape)


def scale(ratio):
    """1 / (1 - ratio) rounded to float32, as the kernels multiply by it."""
    return np.float32(1.0 / (1.0 - float(ratio)))


# Random123's kat_vectors for philox4x32_10: (counter, key, result).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff, 0xffffffff),
     (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


def main():
    for counter, key, want in KNOWN_ANSWERS:
        got = tuple(int(w) for w in philox4x32(*counter, *key))
        if got != want:
            print(f"FAIL philox4x32_10{counter} key {key}: "
                  f"{[hex(g) for g in got]}, expected {[hex(w) for w in want]}")
            return 1
    print(f"OK philox4x32_10: {len(KNOWN_ANSWERS)} known answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
