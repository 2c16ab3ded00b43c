// SPDX-License-Identifier: GPL-2.0-only
// Data caches, tag only: where a line is, not what it holds (the bytes live in PhysMem). A Cache
// is one set-associative level with a replacement policy (LRU unless cache.<name>.replacement
// says otherwise: models/replacement); a MemoryHierarchy chains L1D -> L2 -> LLC ->
// DRAM for one core and answers "how many cycles until this load's data is usable". The L2 is the
// core's own, or its cluster's (several cores sharing one: MemoryHierarchy::set_cluster).
//
// Write-back caches: a store dirties its line in the L1D; a dirty line evicted from a level is
// written into the next level that holds it (dirtying it there), and one the LLC evicts goes to
// DRAM, taking its share of memory.write_bandwidth (models/cache/dram.hpp). No MSHRs and no coherence;
// the core's fill buffers bound its misses in flight (models/core). A miss fills every level it
// missed in. An LLC eviction back-invalidates the line in every core's L1D and L2 when the LLC is
// inclusive (cache.llc.inclusive: Intel's server LLCs up to Broadwell-EP); else an eviction from
// an outer level leaves the inner ones alone. Non-power-of-two set
// counts (the 25M, 10-way, 40960-set LLC of the i7-12700; CPUID leaf 4) use modulo indexing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "models/cache/dram.hpp"
#include "models/replacement/replacement.hpp"

namespace mmusim::hw {

inline constexpr unsigned kLineShift = 6;  // 64-byte lines on both cores
inline constexpr uint64_t kLineBytes = uint64_t(1) << kLineShift;

// cache.<name>.size, .ways, .latency, .replacement. The platforms' values are their config
// files' (platforms/platform.cpp build_schema).
struct CacheParams {
  std::string name;       // "l1d", "l2", "llc"
  uint64_t size = 0;      // bytes; a multiple of ways * 64
  uint32_t ways = 0;
  uint32_t latency = 0;   // load-to-use cycles of a hit at this level
  ReplacementKind replacement = ReplacementKind::lru;

  void visit(Params& p);
  void validate() const;  // throws UserError naming the keys
  uint32_t sets() const { return uint32_t(size / (uint64_t(ways) * kLineBytes)); }
};

class Cache {
 public:
  // Registers cache.<name>.hits / .misses (caches of one name on several cores share them).
  Cache(const CacheParams& p, Stats& stats);

  const std::string& name() const { return name_; }
  uint32_t latency() const { return latency_; }
  uint32_t sets() const { return sets_; }
  uint32_t ways() const { return ways_; }

  // Looks `pa`'s line up; a hit touches it in the replacement policy, a miss installs it (in the
  // first empty way, else in the policy's victim). `write`: the line is dirty afterwards. Counts
  // the hit or miss.
  bool access(uint64_t pa, bool write = false) {
    bool hit = lookup_fill(pa >> kLineShift, write);
    if (hit) hits_->inc(); else misses_->inc();
    return hit;
  }
  // The same without counting (bulk kernel traffic).
  bool install(uint64_t pa, bool write = false) { return lookup_fill(pa >> kLineShift, write); }
  // The dirty line the last access or install evicted (its address), or kNoLine.
  static constexpr uint64_t kNoLine = ~uint64_t(0);
  uint64_t evicted_dirty() const {
    return victim_ != kInvalid && (victim_ & kDirty) ? (victim_ & ~kFlags) << kLineShift : kNoLine;
  }
  // The line (its address, clean or dirty) the last access or install evicted, or kNoLine.
  uint64_t evicted() const { return victim_ != kInvalid ? (victim_ & ~kFlags) << kLineShift : kNoLine; }
  // A dirty line written back into this level: if it holds the line, it is dirty here now (no
  // replacement-state change) and true; else false (it goes further out).
  bool write_back_into(uint64_t pa);
  // Is the line present (dirty)? No stats, no replacement-state change.
  bool probe(uint64_t pa) const;
  bool probe_dirty(uint64_t pa) const;
  bool probe_shared(uint64_t pa) const;
  // Several cores (MemoryHierarchy's snoops): the last access or install hit a line marked
  // shared; mark the line shared or not (and clean: its data went to the LLC), or drop it.
  // Return whether the line was there (invalidate: whether it was dirty).
  bool last_hit_shared() const { return hit_shared_; }
  // Host speed (several cores): a counting filter of the lines present, so that the other
  // cores' snoops skip the set scan of a cache that cannot hold the line. Exact in the negative:
  // a bucket of 0 holds none. Off (empty) until track_presence().
  // `mine`, `all` (optional): counts by line bucket (`mask`) of the lines in this core's private
  // caches and in every core's, kept here too.
  void track_presence(uint16_t* mine = nullptr, uint16_t* all = nullptr, uint64_t mask = 0);
  bool maybe_present(uint64_t pa) const {
    return presence_.empty() || presence_[bucket(pa >> kLineShift)] != 0;
  }
  bool set_shared(uint64_t pa, bool shared, bool clean);
  bool invalidate(uint64_t pa);
  void invalidate_all();
  size_t occupancy() const;
  // The policy's invariants over this cache's valid lines (tests).
  bool check_invariants(std::string* why) const;

 private:
  static constexpr uint64_t kInvalid = ~uint64_t(0);
  // A tag is the line address (below 2^58), with kDirty set while the line is dirty.
  static constexpr uint64_t kDirty = uint64_t(1) << 62;
  // Several cores (MESI in the private caches): another core may hold the line too. A valid
  // line without it and not dirty is Exclusive; dirty is Modified.
  static constexpr uint64_t kShared = uint64_t(1) << 61;
  static constexpr uint64_t kFlags = kDirty | kShared;
  uint64_t tag_of(uint64_t pa) const;
  uint32_t set_of(uint64_t line) const {
    return set_mask_ ? uint32_t(line & set_mask_) : uint32_t(line % sets_);
  }
  // Under LRU each set's tags are kept in recency order (RecencyOrderLru, models/replacement).
  // Under another policy a line stays in its way until replaced; the policy chooses the way a
  // miss fills (Replacement::fill_way: invalidate_all() is the only way lines leave, and it
  // calls forget_all()).
  bool lookup_fill(uint64_t line, bool write) {
    victim_ = kInvalid;
    hit_shared_ = false;
    const uint64_t mark = write ? kDirty : 0;
    const uint32_t first = set_of(line) * ways_;
    uint64_t* __restrict t = &tags_[first];
    if (recency_order_) {
      // (RecencyOrderLru's move to the front, with the dirty bit carried along.)
      uint32_t w = 0;
      while (w < ways_ && (t[w] & ~kFlags) != line) ++w;
      uint64_t tag = line | mark;
      const bool hit = w < ways_;
      if (hit) {
        tag |= t[w];
        hit_shared_ = (t[w] & kShared) != 0;
      } else {
        w = ways_ - 1;
        victim_ = t[w];
        if (!presence_.empty()) presence_replace(t[w], line);
      }
      for (; w > 0; --w) t[w] = t[w - 1];
      t[0] = tag;
      return hit;
    }
    for (uint32_t w = 0; w < ways_; ++w)
      if ((t[w] & ~kFlags) == line) {
        hit_shared_ = (t[w] & kShared) != 0;
        t[w] |= mark;
        repl_.touch(first + w);
        return true;
      }
    const uint32_t v = repl_.fill_way(first, ways_, [&](uint32_t i) { return tags_[i] == kInvalid; });
    victim_ = tags_[v];
    if (!presence_.empty()) presence_replace(tags_[v], line);
    tags_[v] = line | mark;
    repl_.touch(v);
    return false;
  }

  std::string name_;
  uint32_t latency_;
  uint32_t sets_;
  uint32_t ways_;
  uint64_t set_mask_;  // sets - 1 when a power of two (and > 1), else 0: modulo
  std::vector<uint64_t> tags_;  // line address, kInvalid when empty; set s is [s * ways, (s + 1) * ways)
  bool recency_order_;  // LRU: the tags' order is the policy's state (repl_ holds no slots)
  Replacement repl_;
  uint64_t victim_ = kInvalid;  // the tag the last access or install replaced (kInvalid: none)
  bool hit_shared_ = false;
  std::vector<uint16_t> presence_;
  uint64_t presence_mask_ = 0;
  size_t bucket(uint64_t line) const { return size_t((line * 0x9E3779B97F4A7C15ull >> 20) & presence_mask_); }
  uint16_t* mine_ = nullptr;
  uint16_t* all_ = nullptr;
  uint64_t gmask_ = 0;
  void presence_add(uint64_t line, int d) {
    presence_[bucket(line)] = uint16_t(presence_[bucket(line)] + d);
    if (all_) {
      const size_t g = size_t((line * 0xC2B2AE3D27D4EB4Full >> 24) & gmask_);
      mine_[g] = uint16_t(mine_[g] + d);
      all_[g] = uint16_t(all_[g] + d);
    }
  }
  void presence_replace(uint64_t old_tag, uint64_t line) {
    if (old_tag != kInvalid) presence_add(old_tag & ~kFlags, -1);
    presence_add(line, +1);
  }
  Counter* hits_;
  Counter* misses_;
};

// cache.l1d.*, cache.l2.*, cache.llc.*, memory.latency, memory.read_bandwidth, memory.write_bandwidth.
struct HierarchyParams {
  CacheParams l1d, l2, llc;
  bool llc_inclusive = false;  // cache.llc.inclusive
  Duration memory_latency;  // DRAM load-to-use; converted with the core clock
  double memory_read_bandwidth = 0;   // GB/s of lines filled from DRAM into this core's caches
  double memory_write_bandwidth = 0;  // GB/s of dirty lines this core's LLC writes back
  // Several sockets (platform.sockets > 1): another node's memory, over the socket link.
  Duration memory_remote_latency;     // memory.remote_latency (0: not set)
  double memory_remote_bandwidth = 0;  // memory.remote_bandwidth, GB/s per socket (0: not set)
  // An LLC hit as this hierarchy's core sees it, in its cycles, where that differs from the
  // LLC's own latency (a core at another clock, e.g. ecore.cache.llc_latency); 0: the LLC's.
  uint32_t llc_latency = 0;

  void visit(Params& p);
};

class MemoryHierarchy {
 public:
  enum Level : uint8_t { L1D = 0, L2 = 1, LLC = 2, DRAM = 3 };

  // `core_ghz` converts memory.latency to cycles. `shared_llc`: an LLC owned elsewhere and shared
  // by several cores' hierarchies (then p.llc is ignored); null: this hierarchy owns one.
  // `shared_l2`: likewise an L2 owned elsewhere, shared by the cores of a cluster (Gracemont's
  // 4-core module and its 2 MB L2: docs/research-smt-ecores.md §2; then p.l2 is ignored, and
  // set_cluster() names the cores that share it); null: this hierarchy's own, private L2.
  MemoryHierarchy(const HierarchyParams& p, double core_ghz, Stats& stats,
                  Cache* shared_llc = nullptr, Cache* shared_l2 = nullptr);

  // The level that served `pa` at cycle `t` (filling the levels above it; `write`: the line is
  // dirty in the L1D). Dirty lines evicted on the way are written back (write_back).
  Level access_level(uint64_t pa, bool write, uint64_t t) {
    if (l1d_.access(pa, write)) {
      if (peers_) {
        snoop_cycles_ = 0;
        if (write && l1d_.last_hit_shared()) upgrade(pa);
      }
      return L1D;
    }
    return access_beyond_l1(pa, t, write);
  }
  // Several cores: MESI between the cores' private caches (L1D and L2 of each; the LLC is shared).
  // A read miss finds the other cores' copies: a modified one is forwarded by its core (the access
  // takes coherence.transfer_latency instead of the LLC's latency; the line is shared and clean
  // everywhere after, its data in the LLC); a clean one is shared. A write needs the line
  // exclusive: it invalidates the other copies, and takes the transfer time if one was modified
  // or if it only had a shared copy itself (the upgrade). A line no other core holds is
  // Exclusive. Alder Lake's L3 is not inclusive and a snoop filter tracks the cores' lines
  // (docs/research-coherence.md §3): probing the other cores' tags is that filter, without
  // capacity.
  // A cluster (set_cluster: cores sharing one L2) is coherent on two levels: its cores' L1Ds
  // are probed directly by a mate (an L2 miss, an upgrade, and an L2 hit, which may find a mate's
  // L1D holding the line modified), and the agents outside it (other cores, other clusters'
  // L1Ds and L2) as above; a cluster's L2 is one agent, probed and counted once (with its
  // owner's L1D, as a core's private L1D and L2 count once).
  struct Peers {
    std::vector<MemoryHierarchy*> all;  // every core's hierarchy once (SMT siblings share one)
    uint32_t transfer_cycles = 0;
    Counter* transfers = nullptr;      // forwards of modified lines (timed accesses)
    Counter* invalidations = nullptr;  // other cores' copies a write invalidated (timed accesses)
    // Host speed: counts by line bucket of every core's private lines (kPresenceBits buckets;
    // each hierarchy keeps its own part), so that a snoop of a line no other core can hold asks
    // nobody. Exact when it says none.
    static constexpr unsigned kPresenceBits = 16;
    std::vector<uint16_t> lines_all = std::vector<uint16_t>(size_t(1) << kPresenceBits, 0);
  };
  // (After set_cluster().) The presence counts of a cluster are one array, its owner's: the
  // mates' L1Ds and the L2 (tracked by the owner alone) count there.
  void set_peers(Peers* p);
  // A cluster: `mates` (outliving this hierarchy; it included) are the hierarchies sharing this
  // one's L2 (the shared_l2 of each), mates[0] being the L2's owner, which probes it for the
  // agents outside. Null (the default): a private L2, which this hierarchy owns. Call before
  // set_peers(); without peers (one core) nothing is snooped.
  void set_cluster(const std::vector<MemoryHierarchy*>* mates);
  // The cycles this hierarchy's core waits for a line from another agent, in its own cycles, by
  // the holder: a core with a private L2 (a P-core), a core of another cluster, a mate in this
  // one. Until set, every holder's is Peers::transfer_cycles (what setups without a cluster use).
  // A miss waits for the holder of the modified copy (a clean copy not in the LLC: the nearest
  // holder's); an upgrade for the farthest copy it invalidates.
  void set_transfer_cycles(uint32_t from_private, uint32_t from_other_cluster, uint32_t from_mate) {
    xfer_cycles_[kFromPrivate] = from_private;
    xfer_cycles_[kFromOtherCluster] = from_other_cluster;
    xfer_cycles_[kFromMate] = from_mate;
    xfer_set_ = true;
  }
  // Several sockets (platform.sockets > 1; Numa is the platform's, one for all hierarchies). Each
  // socket has its own LLC and memory (a NUMA node: the physical addresses
  // [n * node_bytes, (n + 1) * node_bytes), the last node also the rest). An L2 miss looks at
  // the other sockets' LLCs (Haswell-EP's early snoop: docs/research-haswell-ep.md §3): a line
  // held modified there is forwarded (coherence.remote_transfer_latency, MLC's remote HitM) and
  // stays shared clean in both; a clean copy elsewhere does not serve the miss (memory does, [U]:
  // no clean remote forward measured) but is shared with it; a write takes the line exclusive,
  // invalidating the other sockets' copies. A line that two sockets' LLCs hold is marked shared in
  // both, and so are the private copies filled from it, so that a write hitting them later
  // invalidates the other socket's copy (upgrade()). A miss to memory takes memory.latency from
  // the local node and memory.remote_latency from another, and waits for the home node's read
  // path (its memory.read_bandwidth) and for a remote line also this socket's link
  // (memory.remote_bandwidth). Write-backs stay on the core's own path (not the home node's).
  struct Numa {
    uint64_t node_bytes = 0;
    std::vector<Cache*> llcs;           // by socket
    std::vector<DramChannel*> fills;    // by node: its memory's read path
    std::vector<DramChannel*> links;    // by socket: the lines it reads from other nodes
    uint32_t remote_memory_extra = 0;   // memory.remote_latency - memory.latency, cycles
    uint32_t remote_transfer = 0;       // coherence.remote_transfer_latency, cycles
    Counter* remote_fills = nullptr;    // lines read from another node's memory (timed accesses)
    Counter* remote_forwards = nullptr; // modified lines forwarded from another socket (timed)
    Counter* kernel_remote = nullptr;   // lines the kernel's bulk touches got from the other socket
    unsigned node_of(uint64_t pa) const {
      return unsigned(std::min<uint64_t>(pa / node_bytes, fills.size() - 1));
    }
  };
  void set_numa(const Numa* n, unsigned socket) {
    numa_ = n;
    socket_ = socket;
  }
  unsigned socket() const { return socket_; }
  // The cycles the last access_level() waited for another core's copy, beyond its level's latency.
  uint32_t snoop_cycles() const { return peers_ ? snoop_cycles_ : 0; }
  // Load-to-use latency in core cycles of an access at cycle `t`: the level that hits, and for
  // DRAM the wait for the path to it (memory.read_bandwidth); a line still on its way (in_flight)
  // is there when it arrives.
  uint32_t access(uint64_t pa, bool write, uint64_t t) {
    const Level l = access_level(pa, write, t);
    uint32_t lat = latency_[l] + snoop_cycles();
    if (l == DRAM) lat += dram_fill_wait(t, false);
    return in_flight(pa, t, l, lat);
  }
  // The fill buffers' merge: a miss installs its line in every level at once (the tags), but its
  // data arrives `lat` cycles later; an access to the line before then (a younger load, walk or
  // store drain that finds it "present") waits for that arrival, as a second miss to a line
  // joins the fill buffer of the first (Intel optimization manual, "fill buffers"; the same line
  // is not fetched twice). Given the level that served `pa` at cycle `t` and its latency, returns
  // the latency to use, and remembers a miss's arrival. The misses are kept in a small table
  // indexed by line (256 entries, many more than the core's 16 fill buffers); a miss whose entry
  // a later one took is taken as arrived. (The core times micro-ops in program order, so an
  // access may come at a cycle before the miss it finds was requested: it is not held back.)
  uint32_t in_flight(uint64_t pa, uint64_t t, Level l, uint32_t lat) {
    const uint64_t line = pa >> kLineShift;
    InFlight& f = in_flight_[(line * 0x9E3779B97F4A7C15ull) >> (64 - kInFlightBits)];
    if (l == L1D) {
      if (f.line == line && f.request <= t && f.arrival > t + lat)
        return uint32_t(std::min<uint64_t>(f.arrival - t, uint64_t(1) << 30));
      return lat;
    }
    f.line = line;
    f.request = t;
    f.arrival = t + lat;
    return lat;
  }
  // After access_level() returned DRAM for a request at cycle `t`: the cycles the fill waits
  // beyond memory.latency. The data comes over the fills' path (none for a `full_line` claim,
  // wl::kUopFullLine), and the line's place is free once a dirty victim's write-back has its
  // transfer: whichever comes later.
  uint32_t dram_fill_wait(uint64_t t, bool full_line) {
    uint64_t w = victim_wait_;
    if (!full_line) {
      w = std::max(w, path_read(fill_path_, t));
      if (link_) w = std::max(w, path_read(link_, t));
    }
    return uint32_t(std::min<uint64_t>(w, uint64_t(1) << 30));
  }
  uint32_t latency(Level l) const { return latency_[l]; }
  DramChannel& dram() { return *fills_; }  // the fills' path
  // Several cores: the fills of every core share one path to DRAM (its bandwidth is the DDR
  // channels' peak, memory.read_bandwidth), instead of this hierarchy's own.
  // `ratio`: the shared path's clock over this core's, when they differ (an E-core on the path
  // the P-cores' clock times): its calendar keeps one time base, and this core's requests and
  // waits are converted into and out of it.
  void share_fills(DramChannel* shared, double ratio = 1.0) {
    fills_ = fill_path_ = shared ? shared : &dram_;
    path_ratio_ = shared ? ratio : 1.0;
  }
  // A read on path `ch` at this core's cycle `t`: the wait in this core's cycles.
  uint64_t path_read(DramChannel* ch, uint64_t t) {
    if (path_ratio_ == 1.0 || ch == &dram_) return ch->read(t);
    const uint64_t w = ch->read(uint64_t(double(t) * path_ratio_ + 0.5));
    return uint64_t(double(w) / path_ratio_ + 0.5);
  }
  DramChannel& dram_writes() { return dram_wb_; }
  // An inclusive LLC (cache.llc.inclusive): every hierarchy that shares it, whose L1D and L2 lose
  // a line the LLC evicts (null: this one alone), and the count of copies so removed.
  void set_llc_sharers(const std::vector<MemoryHierarchy*>* sharers) { llc_sharers_ = sharers; }

  // The kernel's bulk zeroing/copying/reading of [pa, pa + bytes): installs every line in every
  // level (without counting hits/misses). Returns how many lines each level served, and the sum of
  // their load-to-use latencies beyond the L1D (each line's level latency, plus a snoop's or the
  // remote node's extra), so the caller can cost the traffic if it wants to.
  struct Touch {
    uint64_t lines[4] = {0, 0, 0, 0};  // indexed by Level
    uint64_t latency_cycles = 0;       // the lines not in the L1D: sum of their latencies
    uint64_t dram_done_cycles = 0;     // timed: when the last line from DRAM arrived, after fill_at
  };
  // `fill_at` (a cycle): the lines from DRAM take their transfers on the fills' path (and the
  // socket link), as a core's fills do: `fill_mlp` of them at a time, each round of requests
  // made when the one before has arrived (memory.latency plus its wait for the path);
  // kUntimed: they take none.
  Touch touch(uint64_t pa, uint64_t bytes, bool write, uint64_t fill_at = kUntimed, unsigned fill_mlp = 1);

  void invalidate_all();  // this core's L1D and L2, and the LLC

  Cache& l1d() { return l1d_; }
  Cache& l2() { return *l2_; }
  Cache& llc() { return *llc_; }

  // Several cores: whether an agent outside this core's cluster (outside this core, without a
  // cluster) may hold `pa`'s line in its L1D or L2. Exact when it says none (public for the tests).
  bool others_may_hold(uint64_t pa) const {
    const size_t g = size_t(((pa >> kLineShift) * 0xC2B2AE3D27D4EB4Full >> 24) &
                            ((uint64_t(1) << Peers::kPresenceBits) - 1));
    return peers_->lines_all[g] != mine_[g];
  }

 private:
  Cache l1d_;
  std::unique_ptr<Cache> own_l2_;
  Cache* l2_;
  std::unique_ptr<Cache> own_llc_;
  Cache* llc_;
  DramChannel dram_;     // fills: memory.read_bandwidth
  DramChannel* fills_ = &dram_;
  double path_ratio_ = 1.0;  // share_fills()  // dram_, or the path all cores share (share_fills)
  // The last miss to memory's read path (fills_, or with several sockets its home node's) and
  // the socket link it crossed (null: local).
  DramChannel* fill_path_ = &dram_;
  DramChannel* link_ = nullptr;
  const Numa* numa_ = nullptr;
  unsigned socket_ = 0;
  // access_beyond_l1() / touch() after the L2 missed, with several sockets.
  Level numa_beyond_l2(uint64_t pa, bool write, uint64_t t, bool timed);
  DramChannel dram_wb_;  // write-backs: memory.write_bandwidth
  uint64_t victim_wait_ = 0;
  uint32_t latency_[4];
  struct InFlight {
    uint64_t line = ~uint64_t(0);
    uint64_t request = 0;  // the cycle the miss was requested
    uint64_t arrival = 0;
  };
  // Indexed by a hash of the line (the page-table entries of one walk sit at equal offsets of
  // different pages: low line bits would collide).
  static constexpr unsigned kInFlightBits = 8;
  InFlight in_flight_[1u << kInFlightBits];
  static constexpr uint64_t kUntimed = ~uint64_t(0);
  // The dirty line at `pa`, evicted from the level before `level` (1: L2, 2: LLC, 3: DRAM), at
  // cycle `t` (kUntimed: the kernel's bulk traffic).
  void write_back(uint64_t pa, int level, uint64_t t);
  // access_level() after an L1D miss (out of line: the L1D hit is the common case).
  Level access_beyond_l1(uint64_t pa, uint64_t t, bool write);
  Peers* peers_ = nullptr;
  uint32_t snoop_cycles_ = 0;
  bool inclusive_ = false;
  const std::vector<MemoryHierarchy*>* llc_sharers_ = nullptr;
  Counter* back_invalidations_ = nullptr;
  // The kernel's bulk traffic (kUntimed): the LLC lines it evicted, and the lines its
  // back-invalidations (an inclusive LLC) took from other cores' L1D or L2.
  Counter* kernel_evictions_ = nullptr;
  Counter* kernel_back_invalidations_other_ = nullptr;
  // After an access or install of the LLC at cycle `t` (kUntimed: bulk traffic): its dirty victim
  // written back, and with an inclusive LLC its victim dropped from every sharer's L1D and L2 (a
  // modified copy there goes to DRAM).
  // `kernel`: the install was the kernel's bulk traffic (MemoryHierarchy::touch).
  void llc_victim(uint64_t t, bool kernel) {
    if (kernel && llc_->evicted() != Cache::kNoLine) kernel_evictions_->inc();
    if (llc_->evicted_dirty() != Cache::kNoLine) write_back(llc_->evicted_dirty(), 3, t);
    if (inclusive_ && llc_->evicted() != Cache::kNoLine) back_invalidate(llc_->evicted(), t, kernel);
  }
  void back_invalidate(uint64_t pa, uint64_t t, bool kernel);
  // This core's (its cluster's) part of Peers::lines_all: own_mine_ of the L2's owner.
  std::vector<uint16_t> own_mine_;
  uint16_t* mine_ = nullptr;
  // The cluster sharing l2_ (null: none, the L2 is this core's), and whether this hierarchy is
  // the L2's owner (mates[0], or no cluster).
  const std::vector<MemoryHierarchy*>* mates_ = nullptr;
  bool l2_owner_ = true;
  enum Holder : uint8_t { kFromPrivate = 0, kFromOtherCluster = 1, kFromMate = 2 };
  uint32_t xfer_cycles_[3] = {0, 0, 0};
  bool xfer_set_ = false;
  uint32_t transfer_from(Holder h) const { return xfer_set_ ? xfer_cycles_[h] : peers_->transfer_cycles; }
  Holder holder_class(const MemoryHierarchy* o) const {
    return o->l2_ == l2_ ? kFromMate : o->mates_ ? kFromOtherCluster : kFromPrivate;
  }
  // MESI (several cores): this core writes a line it holds shared; it misses the line in its
  // L1D and L2 (`write`: wants it exclusive); its L1D got the line from its L2. Return the
  // cycles to wait.
  void upgrade(uint64_t pa, bool timed = true);
  void snoop_miss(uint64_t pa, bool write, bool timed = true);
  void l2_hit_state(uint64_t pa, bool write, bool timed = true);
};

}  // namespace mmusim::hw
