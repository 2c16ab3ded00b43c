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
  p.duration("disk.write_latency", write_latency, "12us",
             "the disk's time for one write request before its data moves (the drive acknowledges it "
             "from its DRAM/SLC cache): a 4K random write at queue depth 1 takes about 17 us end to "
             "end (60K IOPS), less the host's 5 us (cost.io_request) (docs/research-filemap-swap-io.md "
             "section 7 [M/derived])");
  p.real("disk.write_bandwidth", write_bandwidth, 5.0, 0.001, 1000,
         "the disk's sequential write bandwidth (980 PRO: 5,000 MB/s [M])", "GB/s");
  p.size("disk.max_request", max_request, "1280K", 4096, uint64_t(1) << 30,
         "the largest request the block layer sends the disk (the queue's max_sectors_kb): a larger "
         "bio is split into requests of this size (bio_split_to_limits()), each served on its own. "
         "Linux's default cap BLK_DEF_MAX_SECTORS = 2560 sectors since 4.3 [M: commit d2be537c3ba3]; "
         "an NVMe drive's own limit (MDTS) may be lower [U for the 980 PRO]. Only large-folio "
         "writeback (disk.fs = xfs) makes bios above 1 MiB", 4096);
  p.enumeration("disk.fs", fs, Fs::ext4, {{"ext4", Fs::ext4}, {"xfs", Fs::xfs}},
                "the filesystem of the workload's files, as Linux 6.12 treats its page cache: "
                "ext4 = order-0 folios only (large folios for regular files come with 6.16); "
                "xfs = large folios (mapping_set_large_folios(), as XFS since 5.17, tmpfs, EROFS, "
                "bcachefs): readahead allocates folios of orders 2 to 5 with the default 128 KiB "
                "window (page_cache_ra_order(); docs/research-large-pagecache-folios.md [H/M])");
}

BlockDevice::BlockDevice(const DiskParams& p, double ghz, Stats& stats)
    : latency_ps_(uint64_t(p.read_latency.ns(ghz) * 1000.0 + 0.5)),
      write_latency_ps_(uint64_t(p.write_latency.ns(ghz) * 1000.0 + 0.5)),
      max_request_(p.max_request),
      ps_per_byte_(1000.0 / p.read_bandwidth),
      write_ps_per_byte_(1000.0 / p.write_bandwidth),
      unit_free_ps_(p.parallelism, 0),
      requests_(stats.counter("disk.requests", "read requests the disk served")),
      bytes_(stats.counter("disk.read_bytes", "bytes the disk read", "bytes")),
      queued_(stats.counter("disk.queued", "read requests that found every internal unit busy and waited in the disk's queue (disk.parallelism)")),
      queue_wait_ns_(stats.counter("disk.queue_wait_ns", "time read requests waited in the disk's queue for a unit", "ns")),
      service_ns_(stats.counter("disk.service_ns", "time from submission to completion, summed over the requests", "ns")),
      write_requests_(stats.counter("disk.write_requests", "write requests the disk served (swap-out and file writeback; a bio above disk.max_request is several)")),
      write_bytes_(stats.counter("disk.write_bytes", "bytes the disk wrote", "bytes")) {}

uint64_t BlockDevice::submit_read(uint64_t submit_ps, uint64_t bytes) { return submit(submit_ps, bytes, false); }
uint64_t BlockDevice::submit_write(uint64_t submit_ps, uint64_t bytes) { return submit(submit_ps, bytes, true); }

// A bio above the queue's limit is split (bio_split_to_limits()): each part is a request of its
// own; the bio completes with the last of them.
uint64_t BlockDevice::submit(uint64_t submit_ps, uint64_t bytes, bool write) {
  uint64_t done = submit_ps;
  do {
    const uint64_t part = max_request_ ? std::min(bytes, max_request_) : bytes;  // (0: no limit)
    done = std::max(done, submit_one(submit_ps, part, write));
    bytes -= part;
  } while (bytes);
  return done;
}

uint64_t BlockDevice::submit_one(uint64_t submit_ps, uint64_t bytes, bool write) {
  // The unit free first (the lowest-numbered of equals): deterministic.
  auto unit = std::min_element(unit_free_ps_.begin(), unit_free_ps_.end());
  const uint64_t start = std::max(submit_ps, *unit);
  if (start > submit_ps) {
    queued_.inc();
    queue_wait_ns_.inc((start - submit_ps + 500) / 1000);
  }
  uint64_t& link = write ? write_link_free_ps_ : link_free_ps_;
  const uint64_t media_done = start + (write ? write_latency_ps_ : latency_ps_);
  const uint64_t xfer_start = std::max(media_done, link);
  const uint64_t done = xfer_start + uint64_t(double(bytes) * (write ? write_ps_per_byte_ : ps_per_byte_) + 0.5);
  link = done;
  *unit = done;
  if (write) {
    write_requests_.inc();
    write_bytes_.inc(bytes);
  } else {
    requests_.inc();
    bytes_.inc(bytes);
  }
  service_ns_.inc((done - submit_ps + 500) / 1000);
  return done;
}

}  // namespace mmusim
