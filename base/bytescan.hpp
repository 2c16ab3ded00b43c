// SPDX-License-Identifier: GPL-2.0-only
// Small scans over byte and bit arrays on the simulator's per-fault paths (the paging-structure
// caches' slot bytes, the run-ahead record's per-store flags): inline, sixteen bytes at a time
// with SSE2 where the host has it (every x86-64), a plain loop otherwise. Same results either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mmusim {

// The index of the first byte of p[0, n) equal to b, or n if none.
inline size_t find_byte(const uint8_t* p, size_t n, uint8_t b) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i want = _mm_set1_epi8(char(b));
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const unsigned m = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(v, want)));
    if (m) return i + unsigned(__builtin_ctz(m));
  }
#endif
  for (; i < n; ++i)
    if (p[i] == b) return i;
  return n;
}

// The sum of p[0, n) (bytes that are each 0 or 1: how many are 1).
inline size_t sum_bytes(const uint8_t* p, size_t n) {
  size_t sum = 0, i = 0;
#if defined(__SSE2__)
  __m128i acc = _mm_setzero_si128();
  for (; i + 16 <= n; i += 16)
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)),
                                          _mm_setzero_si128()));
  if (i < n && n >= 16) {
    // The rest: the last sixteen bytes, without the 16 - (n - i) of them already counted.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 16));
    const __m128i index = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i keep = _mm_cmpgt_epi8(index, _mm_set1_epi8(char(15 - (n - i))));
    acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_and_si128(v, keep), _mm_setzero_si128()));
    i = n;
  }
  uint64_t halves[2];
  std::memcpy(halves, &acc, sizeof halves);
  sum = size_t(halves[0] + halves[1]);
#endif
  for (; i < n; ++i) sum += p[i];
  return sum;
}

// Whether any bit of [b, e) is set in the bit array `words` (bit i: word i / 64, bit i % 64).
inline bool any_bit_in(const uint64_t* words, size_t b, size_t e) {
  if (b >= e) return false;
  const size_t first = b >> 6, last = (e - 1) >> 6;
  const uint64_t head = ~uint64_t(0) << (b & 63);          // bits b.. of the first word
  const uint64_t tail = ~uint64_t(0) >> (63 - ((e - 1) & 63));  // bits ..e-1 of the last word
  if (first == last) return (words[first] & head & tail) != 0;
  if (words[first] & head) return true;
  for (size_t w = first + 1; w < last; ++w)
    if (words[w]) return true;
  return (words[last] & tail) != 0;
}

}  // namespace mmusim
