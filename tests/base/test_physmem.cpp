// SPDX-License-Identifier: GPL-2.0-only
// Tests of the simulated physical memory: sparse frames, byte access across frames, zeroing,
// copying and host-pointer to physical-address translation.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/physmem.hpp"

using namespace mmusim;

namespace {
constexpr uint64_t MiB = uint64_t(1) << 20;

bool all_zero(const std::vector<uint8_t>& v) {
  for (uint8_t b : v)
    if (b) return false;
  return true;
}
}  // namespace

TEST_CASE("physmem: geometry, a frame without backing reads as zeroes", "[physmem]") {
  PhysMem m(64 * MiB);
  CHECK(m.nr_frames() == 64 * MiB / PAGE_SIZE);
  CHECK(m.size_bytes() == 64 * MiB);
  CHECK(m.frames_backed() == 0);
  CHECK(m.read64(0) == 0);
  CHECK(m.read64(64 * MiB - 8) == 0);
  CHECK(m.frame_data_if(100) == nullptr);
  CHECK_FALSE(m.frame_backed(100));
  std::vector<uint8_t> buf(3 * PAGE_SIZE + 17, 0xaa);
  m.read(5 * PAGE_SIZE + 100, buf.data(), buf.size());
  CHECK(all_zero(buf));
  CHECK(m.frames_backed() == 0);  // reading does not allocate
  // A fill of zeroes into unbacked frames allocates nothing either.
  m.fill(7 * PAGE_SIZE + 8, 0, 100);
  m.fill(8 * PAGE_SIZE, 0, 2 * PAGE_SIZE);
  CHECK(m.frames_backed() == 0);

  CHECK_THROWS_AS(PhysMem(PAGE_SIZE - 1), InternalError);
}

TEST_CASE("physmem: write and read across frame boundaries", "[physmem]") {
  PhysMem m(16 * MiB);
  std::vector<uint8_t> in(2 * PAGE_SIZE + 100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7 + 1);
  const uint64_t pa = 3 * PAGE_SIZE - 50;  // 50 bytes in frame 2, all of 3 and 4, 50+ in 5
  m.write(pa, in.data(), in.size());
  CHECK(m.frames_backed() == 4);
  CHECK_FALSE(m.frame_backed(1));
  CHECK(m.frame_backed(2));
  CHECK(m.frame_backed(3));
  CHECK(m.frame_backed(4));
  CHECK(m.frame_backed(5));
  CHECK_FALSE(m.frame_backed(6));

  std::vector<uint8_t> out(in.size());
  m.read(pa, out.data(), out.size());
  CHECK(out == in);
  // The bytes around the write are still zero.
  uint8_t before = 0xff, after = 0xff;
  m.read(pa - 1, &before, 1);
  m.read(pa + in.size(), &after, 1);
  CHECK(before == 0);
  CHECK(after == 0);
  // The frame's host bytes hold the same data.
  CHECK(m.frame_data_if(3)[0] == in[50]);
  CHECK(m.frame_data_if(2)[PAGE_SIZE - 50] == in[0]);

  // 64-bit access, little endian, as the page-table walker reads entries.
  m.write64(10 * PAGE_SIZE + 8, 0x1122334455667788ull);
  CHECK(m.read64(10 * PAGE_SIZE + 8) == 0x1122334455667788ull);
  uint8_t lo = 0;
  m.read(10 * PAGE_SIZE + 8, &lo, 1);
  CHECK(lo == 0x88);
  CHECK(m.read64(10 * PAGE_SIZE) == 0);
  CHECK(m.frames_backed() == 5);

  // Writes through frame_data() are seen by read64().
  uint8_t* p = m.frame_data(11);
  CHECK(m.frames_backed() == 6);
  uint64_t v = 0xdeadbeefcafef00dull;
  std::memcpy(p + 16, &v, 8);
  CHECK(m.read64(11 * PAGE_SIZE + 16) == v);
  CHECK(m.frame_data(11) == p);  // the same buffer again
}

TEST_CASE("physmem: fill", "[physmem]") {
  PhysMem m(1 * MiB);
  m.fill(PAGE_SIZE - 4, 0x5a, 8);
  CHECK(m.frames_backed() == 2);
  std::vector<uint8_t> out(10);
  m.read(PAGE_SIZE - 5, out.data(), out.size());
  CHECK(out == std::vector<uint8_t>{0, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0});
  // A partial zero fill of a backed frame clears the bytes, keeps the frame.
  m.fill(PAGE_SIZE, 0, 2);
  CHECK(m.frames_backed() == 2);
  m.read(PAGE_SIZE, out.data(), 4);
  CHECK(out[0] == 0);
  CHECK(out[1] == 0);
  CHECK(out[2] == 0x5a);
  // A whole-frame zero fill drops the backing.
  m.fill(0, 0, PAGE_SIZE);
  CHECK(m.frames_backed() == 1);
  CHECK_FALSE(m.frame_backed(0));
}

TEST_CASE("physmem: zero_frame drops the backing", "[physmem]") {
  PhysMem m(1 * MiB);
  m.write64(4 * PAGE_SIZE + 24, 42);
  m.write64(5 * PAGE_SIZE, 43);
  REQUIRE(m.frames_backed() == 2);
  m.zero_frame(4);
  CHECK(m.frames_backed() == 1);
  CHECK_FALSE(m.frame_backed(4));
  CHECK(m.frame_data_if(4) == nullptr);
  CHECK(m.read64(4 * PAGE_SIZE + 24) == 0);
  CHECK(m.read64(5 * PAGE_SIZE) == 43);
  m.zero_frame(4);  // already zero: nothing to do
  m.zero_frame(6);  // never backed
  CHECK(m.frames_backed() == 1);
  // A frame backed again after zeroing starts as zeroes (buffers are reused).
  uint8_t* p = m.frame_data(4);
  CHECK(m.frames_backed() == 2);
  for (size_t i = 0; i < PAGE_SIZE; ++i)
    if (p[i]) FAIL("byte " << i << " of a re-backed frame is " << int(p[i]));
  CHECK_THROWS_AS(m.zero_frame(m.nr_frames()), InternalError);
}

TEST_CASE("physmem: copy_frame", "[physmem]") {
  PhysMem m(1 * MiB);
  std::vector<uint8_t> pat(PAGE_SIZE);
  for (size_t i = 0; i < pat.size(); ++i) pat[i] = uint8_t(i ^ (i >> 8));
  m.write(2 * PAGE_SIZE, pat.data(), pat.size());
  m.copy_frame(9, 2);
  CHECK(m.frame_backed(9));
  std::vector<uint8_t> out(PAGE_SIZE);
  m.read(9 * PAGE_SIZE, out.data(), out.size());
  CHECK(out == pat);
  // The copy is independent of its source.
  m.write64(2 * PAGE_SIZE, 0);
  CHECK(m.read64(9 * PAGE_SIZE) != 0);
  CHECK(m.frame_data_if(9) != m.frame_data_if(2));

  // Copying an all-zero (unbacked) frame leaves the destination zero and unbacked.
  const uint64_t backed = m.frames_backed();
  m.copy_frame(9, 30);
  CHECK_FALSE(m.frame_backed(9));
  CHECK(m.frames_backed() == backed - 1);
  CHECK(m.read64(9 * PAGE_SIZE + 8) == 0);
  CHECK_THROWS_AS(m.copy_frame(1, m.nr_frames()), InternalError);
}

TEST_CASE("physmem: phys_of round-trips pointers into frames", "[physmem]") {
  PhysMem m(64 * MiB);
  // Enough frames to need several host chunks, in a scattered order.
  std::vector<pfn_t> pfns;
  for (pfn_t i = 0; i < 700; ++i) pfns.push_back((i * 7919) % m.nr_frames());
  std::vector<uint8_t*> bufs;
  for (pfn_t pfn : pfns) bufs.push_back(m.frame_data(pfn));
  for (size_t i = 0; i < pfns.size(); ++i) {
    INFO("pfn " << pfns[i]);
    CHECK(m.phys_of(bufs[i]) == pfns[i] << PAGE_SHIFT);
    CHECK(m.phys_of(bufs[i] + 8 * 17) == (pfns[i] << PAGE_SHIFT) + 8 * 17);
    CHECK(m.phys_of(bufs[i] + PAGE_SIZE - 1) == (pfns[i] << PAGE_SHIFT) + PAGE_SIZE - 1);
    // Buffers never move while their frame is allocated.
    CHECK(m.frame_data_if(pfns[i]) == bufs[i]);
  }
  // A buffer reused by another frame after zeroing reports its new frame.
  uint8_t* old = bufs[0];
  m.zero_frame(pfns[0]);
  CHECK_THROWS_AS(m.phys_of(old), InternalError);  // no frame owns it now
  const pfn_t fresh = m.nr_frames() - 1;
  REQUIRE_FALSE(m.frame_backed(fresh));
  uint8_t* reused = m.frame_data(fresh);
  CHECK(reused == old);  // the freed buffer is taken first
  CHECK(m.phys_of(reused + 40) == (fresh << PAGE_SHIFT) + 40);

  // A pointer outside simulated memory is a bug.
  uint64_t local = 0;
  CHECK_THROWS_AS(m.phys_of(&local), InternalError);
}

TEST_CASE("physmem: access beyond the end is an InternalError", "[physmem]") {
  PhysMem m(1 * MiB);
  uint8_t b[16] = {};
  CHECK_THROWS_AS(m.read(1 * MiB - 8, b, 16), InternalError);
  CHECK_THROWS_AS(m.write(1 * MiB, b, 1), InternalError);
  CHECK_THROWS_AS(m.fill(1 * MiB - 1, 1, 2), InternalError);
}
