// SPDX-License-Identifier: GPL-2.0-only
// The menu governor's choice of idle state (models/core/cpuidle_menu.hpp, after
// drivers/cpuidle/governors/menu.c): a CPU with a long idle history takes the deep state; once
// six of its last eight idle periods were short and alike it predicts a short one.
#include <catch2/catch.hpp>

#include "models/core/cpuidle_menu.hpp"

using mmusim::hw::MenuGovernor;

TEST_CASE("menu governor: the deep state until the recent idle periods show a short typical one", "[cpuidle]") {
  MenuGovernor g;
  CHECK(g.deep(600));
  for (int i = 0; i < 5; ++i) {
    g.record(50 + unsigned(i));  // 50-54 us
    CHECK(g.deep(600));          // 3 long periods of 8: outliers only 2 of them can be
  }
  g.record(52);
  CHECK_FALSE(g.deep(600));
  CHECK(g.predicted_us() >= 50);
  CHECK(g.predicted_us() <= 54);
  // Periods that vary much have no typical interval: long again.
  for (unsigned v : {10u, 3000u, 40u, 9000u, 200u, 50000u, 5u, 700u}) g.record(v);
  CHECK(g.deep(600));
  // Alike long ones: typical, and long.
  for (int i = 0; i < 8; ++i) g.record(2000);
  CHECK(g.predicted_us() == 2000);
  CHECK(g.deep(600));
  CHECK_FALSE(g.deep(4000));
}
