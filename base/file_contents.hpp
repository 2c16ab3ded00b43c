// SPDX-License-Identifier: GPL-2.0-only
// The contents of a file of the simulated filesystem (kernel_mm/filemap.cpp): a function of the
// file's seed, inode number, size and the offset, so that what a mapping reads can be checked
// (the random-ops reference model computes the same bytes).
#pragma once

#include <cstdint>

namespace mmusim {

// The 8 bytes at `offset` (8-aligned) of file `ino` of `i_size` bytes made from `seed`, as its
// disk holds them; the bytes at or beyond i_size are zero (the tail of the last page).
inline uint64_t file_word(uint64_t seed, uint32_t ino, uint64_t i_size, uint64_t offset) {
  if (offset >= i_size) return 0;
  uint64_t x = seed ^ (uint64_t(ino) << 48) ^ (offset >> 3);  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  if (i_size - offset < 8) x &= (uint64_t(1) << (8 * (i_size - offset))) - 1;
  return x;
}

}  // namespace mmusim
