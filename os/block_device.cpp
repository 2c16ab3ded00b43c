// SPDX-License-Identifier: GPL-2.0-only
#include "os/block_device.hpp"

#include <algorithm>

namespace mmusim {

void DiskParams::visit(Params& p) {
  p.duration("disk.read_latency", read_latency, "40us",
             "the disk's time for one read request before its data moves, on one of its internal "
             "units: a Samsung 980 PRO's 4K random read at queue depth 1 takes 45 us end to end "
             "(22K IOPS), of which about 5 us is the host's block layer and driver (cost.io_request) "
             "(docs/research-filemap-swap-io.md section 7 [M/derived])");
  p.real("disk.read_bandwidth", read_bandwidth, 7.0, 0.001, 1000,
         "the disk's sequential read bandwidth: a request's data moves at this rate, one request "
         "after another (980 PRO, PCIe 4.0 x4: 7,000 MB/s [M])", "GB/s");
  p.integer("disk.parallelism", parallelism, 48, 1, 4096,
            "read requests the disk serves at once (its internal units); more wait in its queue. "
            "The 980 PRO's 1,000K IOPS at queue depth 32 times its 45 us read: about 48 "
            "(docs/research-filemap-swap-io.md section 7 [M/derived])");
}

BlockDevice::BlockDevice(const DiskParams& p, double ghz, Stats& stats)
    : latency_ps_(uint64_t(p.read_latency.ns(ghz) * 1000.0 + 0.5)),
      ps_per_byte_(1000.0 / p.read_bandwidth),
      unit_free_ps_(p.parallelism, 0),
      requests_(stats.counter("disk.requests", "read requests the disk served")),
      bytes_(stats.counter("disk.read_bytes", "bytes the disk read", "bytes")),
      queued_(stats.counter("disk.queued", "read requests that found every internal unit busy and waited in the disk's queue (disk.parallelism)")),
      queue_wait_ns_(stats.counter("disk.queue_wait_ns", "time read requests waited in the disk's queue for a unit", "ns")),
      service_ns_(stats.counter("disk.service_ns", "time from submission to completion, summed over the read requests", "ns")) {}

uint64_t BlockDevice::submit_read(uint64_t submit_ps, uint64_t bytes) {
  // The unit free first (the lowest-numbered of equals): deterministic.
  auto unit = std::min_element(unit_free_ps_.begin(), unit_free_ps_.end());
  const uint64_t start = std::max(submit_ps, *unit);
  if (start > submit_ps) {
    queued_.inc();
    queue_wait_ns_.inc((start - submit_ps + 500) / 1000);
  }
  const uint64_t read_done = start + latency_ps_;
  const uint64_t xfer_start = std::max(read_done, link_free_ps_);
  const uint64_t done = xfer_start + uint64_t(double(bytes) * ps_per_byte_ + 0.5);
  link_free_ps_ = done;
  *unit = done;
  requests_.inc();
  bytes_.inc(bytes);
  service_ns_.inc((done - submit_ps + 500) / 1000);
  return done;
}

}  // namespace mmusim
