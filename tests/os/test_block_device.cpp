// SPDX-License-Identifier: GPL-2.0-only
// The disk (os/block_device.*): a request's time is its unit's latency and then its data over the
// link; requests beyond the disk's parallelism wait in its queue; the link moves one request's
// data at a time.
#include <catch2/catch.hpp>

#include "base/stats.hpp"
#include "os/block_device.hpp"

using namespace mmusim;

namespace {

DiskParams disk(double latency_ns, double gbs, unsigned parallel) {
  DiskParams p;
  p.read_latency.value = latency_ns;
  p.read_latency.is_time = true;
  p.read_bandwidth = gbs;
  p.parallelism = parallel;
  return p;
}

}  // namespace

TEST_CASE("block device: latency then transfer - a queue beyond its parallelism - one transfer at a time", "[os]") {
  Stats stats;
  // 40 us per request on a unit, 4 GB/s: a 4 KiB page moves in 1,024 ns.
  BlockDevice d(disk(40000, 4.0, 2), 4.9, stats);
  // Alone: submitted at 1 us, read by 41 us, moved by 42.024 us.
  CHECK(d.submit_read(1000000, 4096) == 42024000);
  CHECK(stats.total_value("disk.queued") == 0);
  // Three at once, at 100 us, on two units: the second's read ends with the first's, but its
  // data waits for the link; the third waits in the queue for the first unit to be free.
  CHECK(d.submit_read(100000000, 4096) == 141024000);
  CHECK(d.submit_read(100000000, 4096) == 142048000);
  CHECK(d.submit_read(100000000, 4096) == 182048000);  // its unit free at 141.024 us, +40 us, +1.024 us
  CHECK(stats.total_value("disk.requests") == 4);
  CHECK(stats.total_value("disk.read_bytes") == 4 * 4096);
  CHECK(stats.total_value("disk.queued") == 1);
  CHECK(stats.total_value("disk.queue_wait_ns") == 41024);
  // A large request: 128 KiB moves in 32.768 us after its read.
  CHECK(d.submit_read(1000000000, 131072) == 1000000000 + 40000000 + 32768000);
}

TEST_CASE("block device: a latency in cycles is the core clock's", "[os]") {
  Stats stats;
  DiskParams p = disk(0, 1.0, 1);
  p.read_latency.value = 4900;  // cycles at 4.9 GHz: 1 us
  p.read_latency.is_time = false;
  BlockDevice d(p, 4.9, stats);
  CHECK(d.submit_read(0, 1000) == 1000000 + 1000000);  // 1 us, then 1,000 bytes at 1 GB/s
}

TEST_CASE("block device: a bio above disk.max_request is split into requests of that size, served on their own", "[os]") {
  Stats stats;
  DiskParams p = disk(40000, 4.0, 2);
  p.write_latency.value = 10000;
  p.write_latency.is_time = true;
  p.write_bandwidth = 4.0;
  p.max_request = 1280 * 1024;  // BLK_DEF_MAX_SECTORS
  BlockDevice d(p, 4.9, stats);
  // 1 MiB fits: one request, 10 us then 262.144 us of data.
  CHECK(d.submit_write(0, 1 << 20) == 10000000 + 262144000);
  CHECK(stats.total_value("disk.write_requests") == 1);
  // 3 MiB at 1 ms: parts of 1280K, 1280K and 512K on the two units, then the third on the first
  // free unit; their data moves one part after another over the link (1280K in 327.68 us): the
  // bio completes with the last part.
  const uint64_t t0 = 1000000000;
  const uint64_t first = t0 + 10000000 + 327680000;
  const uint64_t second = first + 327680000;       // its latency overlapped the first's data
  const uint64_t third = second + 131072000;       // on the first unit after `first`, 10 us < the wait for the link
  CHECK(d.submit_write(t0, 3 << 20) == third);
  CHECK(stats.total_value("disk.write_requests") == 4);
  CHECK(stats.total_value("disk.write_bytes") == (1 << 20) + (3 << 20));
  // Reads are split the same way; without a limit (0) nothing is.
  CHECK(d.submit_read(2 * t0, 2 << 20) == 2 * t0 + 40000000 + 327680000 + 196608000);
  CHECK(stats.total_value("disk.requests") == 2);
  DiskParams q = disk(40000, 4.0, 2);
  Stats s2;
  BlockDevice whole(q, 4.9, s2);
  CHECK(whole.submit_read(0, 2 << 20) == 40000000 + 524288000);
  CHECK(s2.total_value("disk.requests") == 1);
}
