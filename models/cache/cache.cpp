// SPDX-License-Identifier: GPL-2.0-only
#include "models/cache/cache.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.hpp"

namespace mmusim::hw {

// ---------------------------------------------------------------------------------------------
// Parameters

void CacheParams::visit(Params& p) {
  const std::string pre = "cache." + name + ".";
  p.size(pre + "size", size, format_size(size), kLineBytes, uint64_t(1) << 40,
         "Capacity of the " + name + " cache; sets = size / (ways * 64) need not be a power of "
         "two",
         kLineBytes);
  p.integer(pre + "ways", ways, ways, 1, 64, "Associativity of the " + name + " cache");
  p.integer(pre + "latency", latency, latency, 1, 10000,
            "Load-to-use latency of a hit in the " + name + " cache", "cycles");
  replacement_param(p, pre + "replacement", replacement, "the " + name + " cache");
  if (!p.is_declaring()) validate();
}

void CacheParams::validate() const {
  uint64_t way_bytes = uint64_t(ways) * kLineBytes;
  if (ways == 0 || size % way_bytes != 0 || size / way_bytes == 0)
    fatal("cache.{}.size = {} and cache.{}.ways = {}: the size must be a non-zero multiple of "
          "ways x 64 bytes ({} bytes)",
          name, format_size(size), name, ways, way_bytes);
  if (size / way_bytes > (uint64_t(1) << 31))
    fatal("cache.{}.size = {}: too many sets ({})", name, format_size(size), size / way_bytes);
}

static std::string duration_text(const Duration& d) {
  return d.is_time ? fmt::format("{}ns", d.value) : fmt::format("{}", d.value);
}

void HierarchyParams::visit(Params& p) {
  l1d.visit(p);
  l2.visit(p);
  llc.visit(p);
  p.boolean("cache.llc.inclusive", llc_inclusive, llc_inclusive,
            "the LLC is inclusive of the cores' L1D and L2: a line it evicts is invalidated in "
            "every core's private caches (back-invalidation), a modified copy written to DRAM");
  p.duration("memory.latency", memory_latency, duration_text(memory_latency),
             "DRAM load-to-use latency (a time is converted with the core clock) [UARCH A.2, "
             "C.6: L/U]");
  p.real("memory.read_bandwidth", memory_read_bandwidth, memory_read_bandwidth, 0.1, 100000,
         "GB/s of 64-byte lines one core's caches can fill from DRAM: each fill takes 64 B / "
         "bandwidth of the path, and a fill that finds it busy waits (models/cache/dram.hpp)");
  p.real("memory.write_bandwidth", memory_write_bandwidth, memory_write_bandwidth, 0.1, 100000,
         "GB/s of dirty 64-byte lines one core's LLC can write back to DRAM: each write-back takes "
         "64 B / bandwidth, and a line whose place a dirty victim holds waits for the victim's "
         "transfer (models/cache/dram.hpp)");
  p.duration("memory.remote_latency", memory_remote_latency, duration_text(memory_remote_latency),
             "several sockets: load-to-use latency of a line from another node's memory (over "
             "the socket link); 0 = not set (required when platform.sockets > 1)");
  p.real("memory.remote_bandwidth", memory_remote_bandwidth, memory_remote_bandwidth, 0, 100000,
         "several sockets: GB/s of lines one socket can read from the other nodes' memory (the "
         "socket link; a fill that finds it busy waits, as on memory.read_bandwidth's path); 0 = "
         "not set (required when platform.sockets > 1)");
}

// ---------------------------------------------------------------------------------------------
// Cache

Cache::Cache(const CacheParams& p, Stats& stats)
    : name_(p.name),
      latency_(p.latency),
      sets_(p.sets()),
      ways_(p.ways),
      recency_order_(p.replacement == ReplacementKind::lru),
      repl_(p.replacement, recency_order_ ? std::vector<ReplacementGroup>{}
                                          : std::vector<ReplacementGroup>{{0, p.sets(), p.ways}}) {
  p.validate();
  set_mask_ = (sets_ > 1 && (sets_ & (sets_ - 1)) == 0) ? sets_ - 1 : 0;
  tags_.assign(size_t(sets_) * ways_, kInvalid);
  StatGroup g(stats, "cache." + name_);
  hits_ = &g.counter("hits", "Accesses that found the line", "accesses");
  misses_ = &g.counter("misses", "Accesses that did not (the line is installed)", "accesses");
}

// The tag of `pa`'s line, or kInvalid.
uint64_t Cache::tag_of(uint64_t pa) const {
  const uint64_t line = pa >> kLineShift;
  const size_t base = size_t(set_of(line)) * ways_;
  for (uint32_t w = 0; w < ways_; ++w)
    if ((tags_[base + w] & ~kFlags) == line) return tags_[base + w];
  return kInvalid;
}

bool Cache::probe(uint64_t pa) const { return tag_of(pa) != kInvalid; }

bool Cache::probe_dirty(uint64_t pa) const {
  const uint64_t t = tag_of(pa);
  return t != kInvalid && (t & kDirty);
}

bool Cache::probe_shared(uint64_t pa) const {
  const uint64_t t = tag_of(pa);
  return t != kInvalid && (t & kShared);
}

bool Cache::write_back_into(uint64_t pa) {
  uint64_t line = pa >> kLineShift;
  size_t base = size_t(set_of(line)) * ways_;
  for (uint32_t w = 0; w < ways_; ++w)
    if ((tags_[base + w] & ~kFlags) == line) {
      tags_[base + w] |= kDirty;
      return true;
    }
  return false;
}

bool Cache::set_shared(uint64_t pa, bool shared, bool clean) {
  uint64_t line = pa >> kLineShift;
  size_t base = size_t(set_of(line)) * ways_;
  for (uint32_t w = 0; w < ways_; ++w) {
    uint64_t& t = tags_[base + w];
    if ((t & ~kFlags) != line) continue;
    t = shared ? (t | kShared) : (t & ~kShared);
    if (clean) t &= ~kDirty;
    return true;
  }
  return false;
}

bool Cache::invalidate(uint64_t pa) {
  uint64_t line = pa >> kLineShift;
  size_t base = size_t(set_of(line)) * ways_;
  for (uint32_t w = 0; w < ways_; ++w) {
    uint64_t& t = tags_[base + w];
    if ((t & ~kFlags) != line) continue;
    const bool dirty = (t & kDirty) != 0;
    if (!presence_.empty()) presence_add(line, -1);
    if (recency_order_) {
      // Keep the set in recency order: the invalid way goes last.
      uint64_t* set = &tags_[base];
      for (uint32_t i = w; i + 1 < ways_; ++i) set[i] = set[i + 1];
      set[ways_ - 1] = kInvalid;
    } else {
      t = kInvalid;  // (tree-PLRU: fill_way() finds empty ways by their tag)
    }
    return dirty;
  }
  return false;
}

void Cache::track_presence(uint16_t* mine, uint16_t* all, uint64_t mask) {
  size_t n = 1;
  while (n < tags_.size() * 4) n <<= 1;
  presence_.assign(n, 0);
  presence_mask_ = n - 1;
  mine_ = mine;
  all_ = all;
  gmask_ = mask;
  for (uint64_t t : tags_)
    if (t != kInvalid) presence_add(t & ~kFlags, +1);
}

void Cache::invalidate_all() {
  if (!presence_.empty())
    for (uint64_t t : tags_)
      if (t != kInvalid) presence_add(t & ~kFlags, -1);
  std::fill(tags_.begin(), tags_.end(), kInvalid);
  repl_.forget_all();
}

bool Cache::check_invariants(std::string* why) const {
  if (recency_order_) {
    for (uint32_t s = 0; s < sets_; ++s)
    {
      std::vector<uint64_t> set(ways_);
      for (uint32_t w = 0; w < ways_; ++w) {
        const uint64_t t = tags_[size_t(s) * ways_ + w];
        set[w] = t == kInvalid ? t : t & ~kFlags;
      }
      if (!RecencyOrderLru::check(set.data(), ways_, kInvalid, why)) return false;
    }
    return true;
  }
  return repl_.check_invariants([&](uint32_t i) { return tags_[i] != kInvalid; }, why);
}

size_t Cache::occupancy() const {
  size_t n = 0;
  for (uint64_t t : tags_) n += t != kInvalid;
  return n;
}

// ---------------------------------------------------------------------------------------------
// MemoryHierarchy

MemoryHierarchy::MemoryHierarchy(const HierarchyParams& p, double core_ghz, Stats& stats,
                                 Cache* shared_llc, Cache* shared_l2)
    : l1d_(p.l1d, stats),
      own_l2_(shared_l2 ? nullptr : std::make_unique<Cache>(p.l2, stats)),
      l2_(shared_l2 ? shared_l2 : own_l2_.get()),
      dram_(p.memory_read_bandwidth > 0 ? double(kLineBytes) / p.memory_read_bandwidth * core_ghz : 1, stats),
      dram_wb_(p.memory_write_bandwidth > 0 ? double(kLineBytes) / p.memory_write_bandwidth * core_ghz : 1, stats) {
  MMUSIM_CHECK(core_ghz > 0, "core clock {} GHz", core_ghz);
  MMUSIM_CHECK(p.memory_read_bandwidth > 0 && p.memory_write_bandwidth > 0,
               "memory.read_bandwidth {} / write_bandwidth {} GB/s", p.memory_read_bandwidth,
               p.memory_write_bandwidth);
  if (shared_llc) {
    llc_ = shared_llc;
  } else {
    own_llc_ = std::make_unique<Cache>(p.llc, stats);
    llc_ = own_llc_.get();
  }
  latency_[L1D] = l1d_.latency();
  latency_[L2] = l2_->latency();
  latency_[LLC] = p.llc_latency ? p.llc_latency : llc_->latency();
  latency_[DRAM] = uint32_t(std::llround(p.memory_latency.cycles(core_ghz)));
  inclusive_ = p.llc_inclusive;
  kernel_evictions_ = &stats.counter("cache.llc.kernel_evictions",
                                     "LLC lines evicted by the kernel's bulk traffic (page copies, zeroing, struct "
                                     "pages): what other work had there, pushed out",
                                     "lines");
  if (inclusive_) {
    back_invalidations_ = &stats.counter("cache.llc.back_invalidations",
                                         "lines the inclusive LLC's evictions removed from a core's L1D or L2",
                                         "lines");
    kernel_back_invalidations_other_ = &stats.counter(
        "cache.llc.kernel_back_invalidations_other",
        "lines the inclusive LLC's evictions for one core's kernel bulk traffic (another child's page copy) "
        "removed from other cores' L1D or L2",
        "lines");
  }
}

MemoryHierarchy::Touch MemoryHierarchy::touch(uint64_t pa, uint64_t bytes, bool write, uint64_t fill_at,
                                               unsigned fill_mlp) {
  Touch t;
  if (bytes == 0) return t;
  uint64_t first = pa >> kLineShift;
  uint64_t last = (pa + bytes - 1) >> kLineShift;
  // (snoop_cycles_ belongs to the core's last timed access: kept across the kernel's touch.)
  const uint32_t core_snoop = snoop_cycles_;
  uint64_t round_at = fill_at, round_end = fill_at;  // the DRAM requests' current round
  unsigned in_round = 0;
  for (uint64_t line = first; line <= last; ++line) {
    uint64_t a = line << kLineShift;
    Level l = DRAM;
    snoop_cycles_ = 0;
    if (l1d_.install(a, write)) {
      l = L1D;
      if (peers_ && write && l1d_.last_hit_shared()) upgrade(a, false);
    } else {
      if (l1d_.evicted_dirty() != Cache::kNoLine) write_back(l1d_.evicted_dirty(), 1, kUntimed);
      if (l2_->install(a)) {
        l = L2;
        if (peers_) l2_hit_state(a, write, false);
      } else {
        if (l2_->evicted_dirty() != Cache::kNoLine) write_back(l2_->evicted_dirty(), 2, kUntimed);
        if (peers_) snoop_miss(a, write, false);
        if (numa_) {
          l = numa_beyond_l2(a, write, kUntimed, false);
        } else {
          if (llc_->install(a)) l = LLC;
          llc_victim(kUntimed, true);
        }
      }
    }
    ++t.lines[l];
    if (l != L1D) t.latency_cycles += latency_[l] + snoop_cycles();
    if (l == DRAM && fill_at != kUntimed) {
      if (in_round == std::max(1u, fill_mlp)) {
        round_at = round_end;
        in_round = 0;
      }
      ++in_round;
      uint64_t w = path_read(fill_path_, round_at);
      if (link_) w = std::max(w, path_read(link_, round_at));
      round_end = std::max(round_end, round_at + w + latency_[DRAM] + snoop_cycles());
      t.dram_done_cycles = round_end - fill_at;
    }
  }
  snoop_cycles_ = core_snoop;
  return t;
}

MemoryHierarchy::Level MemoryHierarchy::access_beyond_l1(uint64_t pa, uint64_t t, bool write) {
  victim_wait_ = 0;  // (read only after a miss to DRAM: dram_fill_wait)
  if (peers_) snoop_cycles_ = 0;
  if (l1d_.evicted_dirty() != Cache::kNoLine) write_back(l1d_.evicted_dirty(), 1, t);
  if (l2_->access(pa)) {
    if (peers_) l2_hit_state(pa, write);
    return L2;
  }
  if (l2_->evicted_dirty() != Cache::kNoLine) write_back(l2_->evicted_dirty(), 2, t);
  if (peers_) snoop_miss(pa, write);
  if (numa_) return numa_beyond_l2(pa, write, t, true);
  const bool hit = llc_->access(pa);
  llc_victim(t, false);
  return hit ? LLC : DRAM;
}

MemoryHierarchy::Level MemoryHierarchy::numa_beyond_l2(uint64_t pa, bool write, uint64_t t, bool timed) {
  fill_path_ = fills_;
  link_ = nullptr;
  // The other sockets' LLCs (their cores' private copies: snoop_miss(), every core being a peer).
  bool there = false, there_dirty = false;
  for (size_t s = 0; s < numa_->llcs.size(); ++s) {
    Cache* o = numa_->llcs[s];
    if (s == socket_ || !o->probe(pa)) continue;
    there = true;
    there_dirty = there_dirty || o->probe_dirty(pa);
    if (write) o->invalidate(pa);
    else o->set_shared(pa, true, true);
  }
  const bool hit = timed ? llc_->access(pa) : llc_->install(pa);
  llc_victim(timed ? t : kUntimed, !timed);
  if (there && !write) {
    llc_->set_shared(pa, true, false);
    l1d_.set_shared(pa, true, false);
    l2_->set_shared(pa, true, false);
  } else if (write) {
    llc_->set_shared(pa, false, false);
  }
  auto wait = [&](uint32_t cycles) {
    const uint32_t beyond = cycles > latency_[LLC] ? cycles - latency_[LLC] : 0;
    snoop_cycles_ = std::max(snoop_cycles_, beyond);
  };
  if (hit) {
    // (A write to a line another socket held: the invalidation's round trip.)
    if (there && write) wait(numa_->remote_transfer);
    return LLC;
  }
  if (there_dirty) {
    wait(numa_->remote_transfer);
    if (Counter* c = timed ? numa_->remote_forwards : numa_->kernel_remote) c->inc();
    return LLC;
  }
  const unsigned home = numa_->node_of(pa);
  fill_path_ = numa_->fills[home];
  if (home != socket_) {
    link_ = numa_->links[socket_];
    snoop_cycles_ += numa_->remote_memory_extra;
    if (Counter* c = timed ? numa_->remote_fills : numa_->kernel_remote) c->inc();
  }
  return DRAM;
}

void MemoryHierarchy::set_cluster(const std::vector<MemoryHierarchy*>* mates) {
  MMUSIM_CHECK(!peers_, "set_cluster() after set_peers()");
  mates_ = mates && !mates->empty() ? mates : nullptr;
  l2_owner_ = !mates_ || mates_->front() == this;
  if (!mates_) return;
  MMUSIM_CHECK(std::find(mates_->begin(), mates_->end(), this) != mates_->end(),
               "a cluster's mates include the hierarchy");
  for (const MemoryHierarchy* m : *mates_)
    MMUSIM_CHECK(m->l2_ == l2_, "the mates of a cluster share one L2 (shared_l2)");
}

void MemoryHierarchy::set_peers(Peers* p) {
  peers_ = p;
  if (!p) return;
  const uint64_t mask = (uint64_t(1) << Peers::kPresenceBits) - 1;
  MemoryHierarchy* owner = mates_ ? mates_->front() : this;
  if (owner->own_mine_.empty()) owner->own_mine_.assign(size_t(1) << Peers::kPresenceBits, 0);
  mine_ = owner->own_mine_.data();
  l1d_.track_presence(mine_, p->lines_all.data(), mask);
  if (l2_owner_) l2_->track_presence(mine_, p->lines_all.data(), mask);
}

// A write to a line this core holds shared: every other copy goes. First the mates' L1Ds (the
// cluster's L2 keeps its copy: it is this core's too), then, while the presence counts say an
// agent outside the cluster may hold the line, the other cores' L1D and L2 (a cluster's L2
// through its owner only). The wait: the farthest holder's transfer.
void MemoryHierarchy::upgrade(uint64_t pa, bool timed) {
  bool others = false;
  uint32_t wait = 0;
  if (mates_)
    for (MemoryHierarchy* m : *mates_) {
      if (m == this || !m->l1d_.maybe_present(pa) || !m->l1d_.probe(pa)) continue;
      m->l1d_.invalidate(pa);
      others = true;
      wait = std::max(wait, transfer_from(kFromMate));
      if (timed && peers_->invalidations) peers_->invalidations->inc();
    }
  for (MemoryHierarchy* o : peers_->all) {
    if (!others_may_hold(pa)) break;
    if (o->l2_ == l2_) continue;  // this core, or a mate
    const bool with_l2 = o->l2_owner_;
    if (!o->l1d_.maybe_present(pa) && !(with_l2 && o->l2_->maybe_present(pa))) continue;
    const bool a = o->l1d_.probe(pa), b = with_l2 && o->l2_->probe(pa);
    if (!a && !b) continue;
    o->l1d_.invalidate(pa);
    if (with_l2) o->l2_->invalidate(pa);
    others = true;
    wait = std::max(wait, transfer_from(holder_class(o)));
    if (timed && peers_->invalidations) peers_->invalidations->inc();
  }
  l1d_.set_shared(pa, false, false);
  l2_->set_shared(pa, false, false);
  // (No source gives the cost of an RFO for a line held shared: taken as one transfer, U.)
  if (others) snoop_cycles_ = std::max(snoop_cycles_, wait);
  // Several sockets: a copy in another socket's LLC goes too (the invalidation crosses the link).
  if (numa_ && llc_->probe_shared(pa)) {
    llc_->set_shared(pa, false, false);
    for (size_t s = 0; s < numa_->llcs.size(); ++s)
      if (s != socket_) numa_->llcs[s]->invalidate(pa);
    snoop_cycles_ = std::max(snoop_cycles_, numa_->remote_transfer);
  }
}

// An L2 hit. A cluster's L2 holds lines its mates' L1Ds may hold too, in any state (the L2 is
// not inclusive, and a mate's L1D writes silently to a line it holds exclusive): the mates' L1Ds
// are snooped (Gracemont's L2 serves its four cores: docs/research-smt-ecores.md §2). A modified
// copy is written back into the L2 (dirty there) and forwarded: the access waits for the
// in-cluster transfer beyond the L2's latency. A read leaves the mates' copies and this one
// shared; a write invalidates them (and waits for that too). Then the L2's own state: a line an
// agent outside may share is upgraded on a write (upgrade()), and is shared in the L1D on a read.
void MemoryHierarchy::l2_hit_state(uint64_t pa, bool write, bool timed) {
  const bool outside_shared = l2_->last_hit_shared();
  if (mates_) {
    bool held = false, modified = false;
    for (MemoryHierarchy* m : *mates_) {
      if (m == this || !m->l1d_.maybe_present(pa) || !m->l1d_.probe(pa)) continue;
      held = true;
      const bool dirty = m->l1d_.probe_dirty(pa);
      if (dirty) {
        modified = true;
        l2_->write_back_into(pa);
      }
      if (write) {
        m->l1d_.invalidate(pa);
        if (timed && !dirty && peers_->invalidations) peers_->invalidations->inc();
      } else {
        m->l1d_.set_shared(pa, true, true);
      }
    }
    if (held && !write) l1d_.set_shared(pa, true, false);
    if (modified || (held && write)) {
      const uint32_t x = transfer_from(kFromMate);
      snoop_cycles_ = std::max(snoop_cycles_, x > latency_[L2] ? x - latency_[L2] : 0);
      if (timed && modified && peers_->transfers) peers_->transfers->inc();
    }
  }
  if (!outside_shared) return;
  if (write) upgrade(pa, timed);
  else l1d_.set_shared(pa, true, false);
}

// An L2 miss: the mates' L1Ds (a cluster), then, if the presence counts say one may hold the
// line, the agents outside the cluster: each core's L1D, with its L2 when it owns it (a
// cluster's L2 is probed through its owner, once).
void MemoryHierarchy::snoop_miss(uint64_t pa, bool write, bool timed) {
  bool held = false, modified = false, remote = false;
  uint32_t from_modified = 0, from_nearest = ~uint32_t(0);  // the transfer from the holder(s)
  auto snoop = [&](MemoryHierarchy* o, bool with_l2, Holder k) {
    const bool a = o->l1d_.maybe_present(pa) && o->l1d_.probe(pa);
    const bool b = with_l2 && o->l2_->maybe_present(pa) && o->l2_->probe(pa);
    if (!a && !b) return;
    held = true;
    const bool dirty = (a && o->l1d_.probe_dirty(pa)) || (b && o->l2_->probe_dirty(pa));
    from_nearest = std::min(from_nearest, transfer_from(k));
    if (dirty) {
      modified = true;
      from_modified = transfer_from(k);
      remote = remote || o->socket_ != socket_;
    }
    if (write) {
      o->l1d_.invalidate(pa);
      if (with_l2) o->l2_->invalidate(pa);
      if (timed && !dirty && peers_->invalidations) peers_->invalidations->inc();
    } else {
      o->l1d_.set_shared(pa, true, true);
      if (with_l2) o->l2_->set_shared(pa, true, true);
    }
  };
  if (mates_)
    for (MemoryHierarchy* m : *mates_)
      if (m != this) snoop(m, false, kFromMate);
  if (others_may_hold(pa))
    for (MemoryHierarchy* o : peers_->all)
      if (o->l2_ != l2_) snoop(o, o->l2_owner_, holder_class(o));
  if (!held) return;
  if (!write) {
    l1d_.set_shared(pa, true, false);
    l2_->set_shared(pa, true, false);
  }
  // The line comes from the core that holds it (modified; or clean and not in the
  // non-inclusive LLC): it is in the LLC after (a modified one written back there).
  const bool in_llc = llc_->probe(pa);
  if (modified || !in_llc) {
    if (modified && !llc_->write_back_into(pa)) llc_->install(pa, true);
    else if (!in_llc) llc_->install(pa, false);
    llc_victim(kUntimed, !timed);
    const uint32_t transfer = remote && numa_ ? numa_->remote_transfer
                              : modified      ? from_modified
                                              : from_nearest;
    snoop_cycles_ = transfer > latency_[LLC] ? transfer - latency_[LLC] : 0;
    if (timed && modified && peers_->transfers) peers_->transfers->inc();
  }
}

void MemoryHierarchy::write_back(uint64_t pa, int level, uint64_t t) {
  if (level <= 1 && l2_->write_back_into(pa)) return;
  if (level <= 2 && llc_->write_back_into(pa)) return;
  if (t == kUntimed) dram_wb_.write_back_untimed();
  else victim_wait_ = dram_wb_.write_back(t);
}

// Inclusion (cache.llc.inclusive): a line leaves the LLC, so it leaves every core's private
// caches too. The LLC's core-valid bits name the cores to snoop (Intel optimization manual,
// Nehalem/Sandy Bridge "inclusive LLC"; docs/research-haswell-ep.md §3); here every sharer's tags
// are probed. A modified copy is written to DRAM (its data was newer than the LLC's).
void MemoryHierarchy::back_invalidate(uint64_t pa, uint64_t t, bool kernel) {
  auto drop = [&](MemoryHierarchy* h) {
    const bool a = h->l1d_.probe(pa), b = h->l2_->probe(pa);
    if (!a && !b) return;
    const bool dirty = h->l1d_.invalidate(pa) | h->l2_->invalidate(pa);
    if (back_invalidations_) back_invalidations_->inc(uint64_t(a) + uint64_t(b));
    if (kernel && h != this && kernel_back_invalidations_other_)
      kernel_back_invalidations_other_->inc(uint64_t(a) + uint64_t(b));
    if (!dirty) return;
    if (t == kUntimed) dram_wb_.write_back_untimed();
    else victim_wait_ = std::max(victim_wait_, dram_wb_.write_back(t));
  };
  if (!llc_sharers_) {
    drop(this);
    return;
  }
  for (MemoryHierarchy* h : *llc_sharers_) drop(h);
}

void MemoryHierarchy::invalidate_all() {
  l1d_.invalidate_all();
  l2_->invalidate_all();
  llc_->invalidate_all();
}

}  // namespace mmusim::hw
