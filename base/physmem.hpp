// SPDX-License-Identifier: GPL-2.0-only
// Simulated physical memory: page frames with real byte contents, sparse so that GiB-sized
// regions stay cheap. A frame without backing reads as zeroes; the first write gives it a 4 KiB
// buffer (from a pool: buffers never move, so host pointers into page tables stay valid while the
// frame is allocated). Zeroing a frame drops its buffer.
//
// Page tables live here in the hardware's encodings: the kernel writes them through
// `frame_data()`, the hardware walker reads them with `read64()`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>



namespace mmusim {

using pfn_t = uint64_t;
inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr uint64_t PAGE_SIZE = uint64_t(1) << PAGE_SHIFT;


class PhysMem {
 public:
  explicit PhysMem(uint64_t bytes);
  ~PhysMem();
  PhysMem(const PhysMem&) = delete;
  PhysMem& operator=(const PhysMem&) = delete;

  uint64_t nr_frames() const { return nr_frames_; }
  uint64_t size_bytes() const { return nr_frames_ << PAGE_SHIFT; }

  // The frame's bytes for writing: gives the frame a (zeroed) buffer if it has none.
  uint8_t* frame_data(pfn_t pfn) {
    check_pfn(pfn);
    uint8_t* p = data_[pfn];
    return p ? p : back(pfn);
  }
  // The frame's bytes for reading, or nullptr if the frame is all zeroes.
  const uint8_t* frame_data_if(pfn_t pfn) const {
    check_pfn(pfn);
    return data_[pfn];
  }
  bool frame_backed(pfn_t pfn) const { return frame_data_if(pfn) != nullptr; }

  void zero_frame(pfn_t pfn);                 // clear_page()
  void copy_frame(pfn_t dst, pfn_t src);      // copy_page()

  // Physical-address access (any alignment within one frame for read/write; read64 aligned).
  uint64_t read64(uint64_t pa) const {
    const uint8_t* p = frame_data_if(pa >> PAGE_SHIFT);
    if (!p) return 0;
    uint64_t v;
    __builtin_memcpy(&v, p + (pa & (PAGE_SIZE - 1)), 8);
    return v;
  }
  void write64(uint64_t pa, uint64_t v) {
    __builtin_memcpy(frame_data(pa >> PAGE_SHIFT) + (pa & (PAGE_SIZE - 1)), &v, 8);
  }
  void read(uint64_t pa, void* buf, size_t n) const;   // may cross frames
  void write(uint64_t pa, const void* buf, size_t n);  // may cross frames
  void fill(uint64_t pa, uint8_t byte, size_t n);      // may cross frames

  uint64_t frames_backed() const { return backed_; }   // host memory in use, in frames

  // The physical address of a host pointer into a backed frame (the kernel holds pte_t* and
  // pmd_t* into page tables and sometimes needs the table they are in, as __pa() gives).
  uint64_t phys_of(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    if (a - last_base_ < PAGE_SIZE && data_[last_pfn_] == reinterpret_cast<const uint8_t*>(last_base_))
      return (last_pfn_ << PAGE_SHIFT) | (a - last_base_);
    return phys_of_slow(p);
  }

 private:
  uint64_t phys_of_slow(const void* p) const;
  mutable uintptr_t last_base_ = 0;  // the frame phys_of() last resolved
  mutable pfn_t last_pfn_ = 0;
  void check_pfn(pfn_t pfn) const {
    if (__builtin_expect(pfn >= nr_frames_, 0)) out_of_range(pfn);
  }
  [[noreturn]] void out_of_range(pfn_t pfn) const;
  uint8_t* back(pfn_t pfn);
  void release(pfn_t pfn);

  uint64_t nr_frames_;
  uint64_t backed_ = 0;
  std::vector<uint8_t*> data_;
  // Host memory for frame buffers: anonymous mappings, which the host gives zeroed.
  struct Unmap {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, Unmap>> chunks_;
  std::vector<uint8_t*> fresh_buffers_;  // never used since the host zeroed them
  std::map<uintptr_t, size_t> chunk_index_;  // chunk base -> index into owner_
  std::vector<std::vector<pfn_t>> owner_;     // per chunk, per buffer slot: the frame using it
  std::vector<uint8_t*> free_buffers_;
};

}  // namespace mmusim
