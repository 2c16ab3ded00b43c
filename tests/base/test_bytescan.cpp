// SPDX-License-Identifier: GPL-2.0-only
// Tests of the byte and bit scans (base/bytescan.hpp) against plain loops, over every length and
// start up to a few vectors' worth, at every alignment.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "base/bytescan.hpp"

using namespace mmusim;

TEST_CASE("find_byte returns the first match or n, at every length and offset", "[bytescan]") {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(80);
  for (int round = 0; round < 20; ++round) {
    for (uint8_t& b : buf) b = uint8_t(rng() % 4);  // few values: matches everywhere, or none
    for (size_t off = 0; off < 17; ++off)
      for (size_t n = 0; off + n <= buf.size(); ++n)
        for (uint8_t want = 0; want < 5; ++want) {
          size_t expect = n;
          for (size_t i = 0; i < n; ++i)
            if (buf[off + i] == want) {
              expect = i;
              break;
            }
          REQUIRE(find_byte(buf.data() + off, n, want) == expect);
        }
  }
}

TEST_CASE("sum_bytes counts the ones of an array of zero and one bytes", "[bytescan]") {
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(300);
  for (uint8_t& b : buf) b = uint8_t(rng() & 1);
  for (size_t off = 0; off < 17; ++off)
    for (size_t n = 0; off + n <= buf.size(); n += n < 80 ? 1 : 1 + n / 8) {  // every tail length
      size_t expect = 0;
      for (size_t i = 0; i < n; ++i) expect += buf[off + i];
      REQUIRE(sum_bytes(buf.data() + off, n) == expect);
    }
}

TEST_CASE("any_bit_in sees exactly the bits of the range b .. e - 1", "[bytescan]") {
  std::vector<uint64_t> words(6, 0);
  const size_t bits = words.size() * 64;
  // One bit set at a time: every range either holds it or not.
  for (size_t set : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(127), size_t(200), bits - 1}) {
    std::fill(words.begin(), words.end(), 0);
    words[set >> 6] = uint64_t(1) << (set & 63);
    for (size_t b = 0; b <= bits; b += (b < 130 ? 1 : 7))
      for (size_t e = b; e <= bits; e += (e < 140 ? 1 : 5))
        REQUIRE(any_bit_in(words.data(), b, e) == (set >= b && set < e));
  }
  // All set: any non-empty range.
  std::fill(words.begin(), words.end(), ~uint64_t(0));
  for (size_t b = 0; b <= bits; b += 3)
    for (size_t e = b; e <= bits; e += 11) REQUIRE(any_bit_in(words.data(), b, e) == (e > b));
}
