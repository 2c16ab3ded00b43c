// SPDX-License-Identifier: GPL-2.0-only
// NUMA nodes (platform.sockets > 1): memory split evenly between the nodes, pages placed by the
// memory policy (memory.numa): first-touch = the faulting CPU's node, the other node when it is
// full; interleave = a VMA's folios round robin by their offset. Invariants checked after every
// entry (free blocks on their own node's lists).
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using namespace kmmtest;

namespace {
// Two nodes, CPUs 0-1 on node 0 and 2-3 on node 1, 1 GiB: 512 MiB each.
void two_nodes(KernelParams& p) {
  p.nr_nodes = 2;
  p.cpus_per_node = 2;
}
bool store_on(Env& e, task_struct* t, int cpu, uint64_t va) {
  e.k.enter(t, cpu);
  e.k.arch().switch_mm(cpu, t->mm);
  return e.fix.ua->store8(t, va, 1);
}
int nid_at(Env& e, task_struct* t, uint64_t va) { return e.k.pfn_to_nid(e.k.page_to_pfn(e.page_at(t, va))); }
}  // namespace

TEST_CASE("numa: memory splits evenly into the nodes, one node is the whole of it", "[numa]") {
  Env one;
  CHECK(one.k.nr_nodes() == 1);
  CHECK(one.k.pfn_to_nid(one.k.nr_frames() - 1) == 0);
  Env e(two_nodes);
  REQUIRE(e.k.nr_nodes() == 2);
  const uint64_t half = (1ull << 29) >> PAGE_SHIFT;
  CHECK(e.k.node_span_frames() == half);
  CHECK(e.k.pfn_to_nid(half - 1) == 0);
  CHECK(e.k.pfn_to_nid(half) == 1);
  CHECK(e.k.pfn_to_nid(e.k.nr_frames() - 1) == 1);
  // Node numbers of the CPUs: two per node.
  task_struct* t = e.proc("p");
  e.k.enter(t, 1);
  CHECK(e.k.numa_node_id() == 0);
  e.k.enter(t, 2);
  CHECK(e.k.numa_node_id() == 1);
  e.k.enter(t, 3);
  CHECK(e.k.numa_node_id() == 1);
  // No counters with one node.
  CHECK(one.fix.stats.find_counter("kernel.numa_hit") == nullptr);
}

TEST_CASE("numa: first touch places a page on the faulting CPU's node", "[numa]") {
  Env e(two_nodes);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 64 * PAGE_SIZE);
  REQUIRE(store_on(e, t, 0, va));
  REQUIRE(store_on(e, t, 3, va + PAGE_SIZE));
  REQUIRE(store_on(e, t, 2, va + 2 * PAGE_SIZE));
  CHECK(nid_at(e, t, va) == 0);
  CHECK(nid_at(e, t, va + PAGE_SIZE) == 1);
  CHECK(nid_at(e, t, va + 2 * PAGE_SIZE) == 1);
  // Page tables come from the node of the CPU that allocates them too: the first fault's, on
  // node 0. The counters count every allocation (folios and tables).
  CHECK(e.count("kernel.numa_miss") == 0);
  CHECK(e.count("kernel.numa_other") == 0);
  CHECK(e.count("kernel.numa_hit") == e.count("kernel.numa_local"));
  CHECK(e.count("kernel.numa_hit") >= 3);
  // A COW copy after fork is placed by the CPU that writes, not by the original's node.
  e.k.enter(t, 0);
  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  REQUIRE(store_on(e, c, 2, va));
  CHECK(nid_at(e, c, va) == 1);
  CHECK(nid_at(e, t, va) == 0);
}

TEST_CASE("numa: a full node falls back to the other (numa_miss)", "[numa]") {
  Env e([](KernelParams& p) {
    two_nodes(p);
    p.phys_mem = 64ull << 20;  // 32 MiB per node
  });
  task_struct* t = e.proc("p");
  const uint64_t len = 48ull << 20;
  const uint64_t va = e.mmap(t, len);
  // CPU 0 touches 48 MiB: node 0's 32 MiB (less what the kernel took) first, then node 1's.
  for (uint64_t off = 0; off < len; off += PAGE_SIZE) REQUIRE(store_on(e, t, 0, va + off));
  CHECK(nid_at(e, t, va) == 0);
  CHECK(nid_at(e, t, va + len - PAGE_SIZE) == 1);
  CHECK(e.count("kernel.numa_miss") > 0);
  CHECK(e.count("kernel.numa_miss") == e.count("kernel.numa_other"));
  CHECK(e.count("kernel.numa_hit") + e.count("kernel.numa_miss") >= len / PAGE_SIZE);
}

TEST_CASE("numa: interleave places a VMA's folios round robin by their offset", "[numa]") {
  Env e([](KernelParams& p) {
    two_nodes(p);
    p.numa = NumaPolicy::interleave;
    set_thp(p, ThpMode::always, {{ORDER_64K, ThpMode::always}});
  });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 1ull << 20, PROT_READ | PROT_WRITE, 0x10000000);
  // Every write is on CPU 0; the folios alternate between the nodes by their index in the VMA
  // (64K folios: the index counts 64K units; the VMA starts at vm_pgoff = its address's page).
  const uint64_t base = ((va >> PAGE_SHIFT) >> ORDER_64K);
  for (unsigned i = 0; i < 16; ++i) {
    const uint64_t a = va + i * (64 * 1024);
    REQUIRE(store_on(e, t, 0, a));
    CHECK(folio_order(e.folio_at(t, a)) == ORDER_64K);
    CHECK(nid_at(e, t, a) == int((base + i) % 2));
  }
  CHECK(e.count("kernel.numa_other") > 0);
}
