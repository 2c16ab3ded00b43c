// SPDX-License-Identifier: GPL-2.0-only
// The disk: an NVMe SSD as the page cache's reads meet it (the kernel port sees it through
// kmm::BlockDev). A device model without SystemC, plain arithmetic on simulated time, kept with
// the OS layer because every platform (the functional one too) has it.
//
// A read request of S bytes submitted at time t:
//   - waits for one of `disk.parallelism` internal units (the flash dies and channels a
//     controller keeps busy at once; requests beyond them queue in the device, first come first
//     served: the host's queue of up to 1,024 entries never fills here);
//   - takes `disk.read_latency` on its unit (the flash read and the controller: an NVMe 4K random
//     read at queue depth 1, less the host's share, which the kernel charges as cost.io_request);
//   - then moves its data over the link at `disk.read_bandwidth`, one request after the other;
//   - completes then: its folios are unlocked and uptodate (folio_end_read()), its waiters woken.
// A write request (swap-out) is the same with `disk.write_latency` (the drive acknowledges a write
// once it is in its DRAM/SLC cache) and `disk.write_bandwidth`, its data moving over the link's
// other direction (PCIe is full duplex).
// Sources: docs/research-filemap-swap-io.md §7 (Samsung 980 PRO, PCIe 4.0 x4). Not modelled: the
// SLC cache filling up (writes stay at their cached latency), the completion interrupt's CPU and
// its latency beyond the request's, a scheduler (Linux uses `none` for NVMe).
#pragma once

#include <cstdint>
#include <vector>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "kernel_mm/kernel.hpp"

namespace mmusim {

struct DiskParams {
  Duration read_latency;       // disk.read_latency
  double read_bandwidth = 0;   // disk.read_bandwidth, GB/s
  unsigned parallelism = 1;    // disk.parallelism
  Duration write_latency;      // disk.write_latency
  double write_bandwidth = 0;  // disk.write_bandwidth, GB/s
  uint64_t max_request = 0;    // disk.max_request, bytes (the queue's max_sectors_kb; 0: none)
  // disk.fs: the filesystem its files are on, which decides their page-cache folio orders
  // (kernel_mm: mapping_set_large_folios()).
  enum class Fs { ext4, xfs };
  Fs fs = Fs::ext4;
  void visit(Params& p);
};

class BlockDevice : public kmm::BlockDev {
 public:
  BlockDevice(const DiskParams& p, double ghz, Stats& stats);  // ghz: for a latency in cycles
  uint64_t submit_read(uint64_t submit_ps, uint64_t bytes) override;
  uint64_t submit_write(uint64_t submit_ps, uint64_t bytes) override;

 private:
  uint64_t submit(uint64_t submit_ps, uint64_t bytes, bool write);
  uint64_t submit_one(uint64_t submit_ps, uint64_t bytes, bool write);
  uint64_t latency_ps_, write_latency_ps_;
  uint64_t max_request_;
  double ps_per_byte_, write_ps_per_byte_;
  std::vector<uint64_t> unit_free_ps_;  // when each internal unit is free again
  uint64_t link_free_ps_ = 0;           // when the link has sent the last read's data
  uint64_t write_link_free_ps_ = 0;     // and received the last write's
  Counter &requests_, &bytes_, &queued_, &queue_wait_ns_, &service_ns_, &write_requests_, &write_bytes_;
};

}  // namespace mmusim
