// SPDX-License-Identifier: GPL-2.0-only
// Broadcast-TLBI timing on the interconnect (models/interconnect/tlbi_broadcast.*): the extra
// cost grows by one contention step per other CPU that broadcast within the window.
#include <catch2/catch.hpp>

#include "models/interconnect/tlbi_broadcast.hpp"

using namespace mmusim;

TEST_CASE("tlbi broadcast: one step per other CPU broadcasting within the window", "[tlbi]") {
  Stats stats;
  Counter& all = stats.counter("b", "broadcasts");
  Counter& cont = stats.counter("c", "contended");
  hw::TlbiBroadcast t(200.0, 1000000 /* 1 us */, &all, &cont);
  auto c0 = t.broadcast(0, 4, 10'000'000);
  CHECK(c0.contending == 0);
  CHECK(c0.extra_cycles == 0);
  auto c1 = t.broadcast(1, 4, 10'500'000);  // 0.5 us after CPU 0's
  CHECK(c1.contending == 1);
  CHECK(c1.extra_cycles == 200.0);
  auto c2 = t.broadcast(2, 4, 10'900'000);  // within 1 us of both
  CHECK(c2.contending == 2);
  CHECK(c2.extra_cycles == 400.0);
  auto c3 = t.broadcast(3, 4, 11'600'000);  // CPU 0's is 1.6 us old, CPU 1's 1.1 us: out
  CHECK(c3.contending == 1);                // only CPU 2's (0.7 us)
  auto c0b = t.broadcast(0, 4, 11'600'000); // CPU 0 again: its own last one does not count
  CHECK(c0b.contending == 2);               // CPU 2 (0.7 us) and CPU 3 (0)
  CHECK(all.value() == 5);
  CHECK(cont.value() == 4);
}
