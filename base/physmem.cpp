// SPDX-License-Identifier: GPL-2.0-only
#include "base/physmem.hpp"

#include <cstdlib>
#include <sys/mman.h>
#include <cstring>

#include "base/error.hpp"

namespace mmusim {
namespace {
constexpr size_t kChunkFrames = 4096;  // 16 MiB of buffers per host allocation
}

PhysMem::PhysMem(uint64_t bytes) : nr_frames_(bytes >> PAGE_SHIFT), data_(nr_frames_, nullptr) {
  if (nr_frames_ == 0) panic("physical memory of {} bytes holds no page frame", bytes);
}

PhysMem::~PhysMem() = default;

void PhysMem::out_of_range(pfn_t pfn) const {
  panic("access to pfn {:#x} beyond simulated physical memory ({:#x} frames)", pfn, nr_frames_);
}

uint8_t* PhysMem::back(pfn_t pfn) {
  uint8_t* p;
  if (!free_buffers_.empty()) {  // a recycled buffer: clear it
    p = free_buffers_.back();
    free_buffers_.pop_back();
    std::memset(p, 0, PAGE_SIZE);
  } else {
    if (fresh_buffers_.empty()) {
      // An anonymous mapping: zeroed by the host lazily, as it is touched, in 2 MiB host pages
      // where the host allows (one host fault per 512 simulated frames instead of one each).
      // Fresh buffers are therefore zero; recycled ones are cleared above.
      // Map 2 MiB more and use the 2 MiB-aligned part, so that host huge pages cover it all.
      constexpr size_t kHuge = size_t(2) << 20;
      const size_t bytes = kChunkFrames * PAGE_SIZE;
      void* raw = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) panic("out of host memory for simulated page frames");
      uintptr_t a = (reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~uintptr_t(kHuge - 1);
      // Give back the unaligned head and the tail beyond the chunk.
      if (a > reinterpret_cast<uintptr_t>(raw)) munmap(raw, a - reinterpret_cast<uintptr_t>(raw));
      uintptr_t end = reinterpret_cast<uintptr_t>(raw) + bytes + kHuge;
      if (end > a + bytes) munmap(reinterpret_cast<void*>(a + bytes), end - (a + bytes));
      void* mem = reinterpret_cast<void*>(a);
#ifdef MADV_HUGEPAGE
      madvise(mem, bytes, MADV_HUGEPAGE);
#endif
      chunks_.emplace_back(static_cast<uint8_t*>(mem));
      uint8_t* base = chunks_.back().get();
      chunk_index_.emplace(reinterpret_cast<uintptr_t>(base), owner_.size());
      owner_.emplace_back(kChunkFrames, pfn_t(0));
      for (size_t i = kChunkFrames; i-- > 0;) fresh_buffers_.push_back(base + i * PAGE_SIZE);
    }
    p = fresh_buffers_.back();
    fresh_buffers_.pop_back();
  }
  data_[pfn] = p;
  auto it = std::prev(chunk_index_.upper_bound(reinterpret_cast<uintptr_t>(p)));
  owner_[it->second][(reinterpret_cast<uintptr_t>(p) - it->first) / PAGE_SIZE] = pfn;
  ++backed_;
  return p;
}

void PhysMem::release(pfn_t pfn) {
  free_buffers_.push_back(data_[pfn]);
  data_[pfn] = nullptr;
  --backed_;
}

void PhysMem::Unmap::operator()(uint8_t* p) const { munmap(p, kChunkFrames * PAGE_SIZE); }

uint64_t PhysMem::phys_of_slow(const void* ptr) const {
  auto addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = chunk_index_.upper_bound(addr);
  MMUSIM_CHECK(it != chunk_index_.begin(), "host pointer {} is not in simulated memory", ptr);
  --it;
  size_t off = addr - it->first;
  MMUSIM_CHECK(off < kChunkFrames * PAGE_SIZE, "host pointer {} is not in simulated memory", ptr);
  pfn_t pfn = owner_[it->second][off / PAGE_SIZE];
  MMUSIM_CHECK(data_[pfn] == reinterpret_cast<const uint8_t*>(it->first) + (off & ~(PAGE_SIZE - 1)),
               "host pointer {} is into a buffer no frame owns", ptr);
  last_base_ = it->first + (off & ~(PAGE_SIZE - 1));
  last_pfn_ = pfn;
  return (pfn << PAGE_SHIFT) | (off & (PAGE_SIZE - 1));
}

void PhysMem::zero_frame(pfn_t pfn) {
  MMUSIM_CHECK(pfn < nr_frames_, "pfn {:#x} beyond physical memory", pfn);
  if (data_[pfn]) release(pfn);
}

void PhysMem::copy_frame(pfn_t dst, pfn_t src) {
  MMUSIM_CHECK(dst < nr_frames_ && src < nr_frames_, "copy {:#x} <- {:#x} beyond memory", dst, src);
  if (!data_[src]) {
    zero_frame(dst);
    return;
  }
  std::memcpy(frame_data(dst), data_[src], PAGE_SIZE);
}

void PhysMem::read(uint64_t pa, void* buf, size_t n) const {
  auto* out = static_cast<uint8_t*>(buf);
  while (n) {
    pfn_t pfn = pa >> PAGE_SHIFT;
    MMUSIM_CHECK(pfn < nr_frames_, "read at {:#x} beyond physical memory", pa);
    size_t off = pa & (PAGE_SIZE - 1), k = std::min<size_t>(n, PAGE_SIZE - off);
    if (data_[pfn]) std::memcpy(out, data_[pfn] + off, k);
    else std::memset(out, 0, k);
    out += k, pa += k, n -= k;
  }
}

void PhysMem::write(uint64_t pa, const void* buf, size_t n) {
  auto* in = static_cast<const uint8_t*>(buf);
  while (n) {
    pfn_t pfn = pa >> PAGE_SHIFT;
    MMUSIM_CHECK(pfn < nr_frames_, "write at {:#x} beyond physical memory", pa);
    size_t off = pa & (PAGE_SIZE - 1), k = std::min<size_t>(n, PAGE_SIZE - off);
    std::memcpy(frame_data(pfn) + off, in, k);
    in += k, pa += k, n -= k;
  }
}

void PhysMem::fill(uint64_t pa, uint8_t byte, size_t n) {
  while (n) {
    pfn_t pfn = pa >> PAGE_SHIFT;
    MMUSIM_CHECK(pfn < nr_frames_, "fill at {:#x} beyond physical memory", pa);
    size_t off = pa & (PAGE_SIZE - 1), k = std::min<size_t>(n, PAGE_SIZE - off);
    if (byte == 0 && off == 0 && k == PAGE_SIZE) zero_frame(pfn);
    else if (byte != 0 || data_[pfn]) std::memset(frame_data(pfn) + off, byte, k);
    pa += k, n -= k;
  }
}

}  // namespace mmusim
