// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/hw_platform.hpp"

#include <map>
#include <memory>

#include <cmath>

#include "base/error.hpp"

namespace mmusim {

namespace {
// The shared DRAM paths' calendars reach about 2 ms back from their newest request (2^19 slots of
// 4 lines: 2.3 ms at the E5-2699 v3's 57.9 GB/s, 1.7 ms at the i7's 76.8): longer than a kernel
// entry that copies a 2M page (its source lines take their transfers at the entry's own times, up
// to about 1 ms ahead of the other cores' requests).
constexpr size_t kSharedReach = size_t(1) << 19;
}  // namespace

// The kernel's TLB maintenance, forwarded to the cores' translation caches (the rules are in
// models/walker/maintenance.hpp). The arm64 IS forms reach every core.
// (SMT: a hardware thread's entries in the TLBs it shares carry its tag, CoreModule::asid_tag.)
void PlatformMmuHw::x86_invlpg(int cpu, uint16_t pcid, uint64_t va) {
  hw::CoreModule& c = *cores.at(size_t(cpu));
  c.maintenance().x86_invlpg(uint16_t(pcid | c.asid_tag()), va);
}

void PlatformMmuHw::x86_flush_pcid(int cpu, uint16_t pcid) {
  hw::CoreModule& c = *cores.at(size_t(cpu));
  c.maintenance().x86_flush_pcid(uint16_t(pcid | c.asid_tag()));
}

double PlatformMmuHw::arm64_tlbi(int cpu, kmm::TlbiOp op, uint16_t asid, uint64_t va, bool broadcast) {
  for (size_t i = 0; i < cores.size(); ++i)
    if (broadcast || int(i) == cpu) cores[i]->maintenance().arm64_tlbi(op, asid, va);
  if (!broadcast || cores.size() < 2 || !tlbi) return 0;
  const uint64_t now = kernel ? kernel->now_ps() : 0;
  const hw::TlbiBroadcast::Cost c = tlbi->broadcast(cpu, unsigned(cores.size()), now);
  hw::TraceContext& tc = cores[size_t(cpu)]->trace_context();
  if (tc.on())
    tc.trace->event(now, cpu, tc.task, "tlb_shootdown",
                    {TraceField::str("kind", "tlbi_broadcast"), TraceField::dec("from", unsigned(cpu)),
                     TraceField::str("to", "all"), TraceField::dec("contending", c.contending),
                     TraceField::dec("extra_cycles", uint64_t(c.extra_cycles + 0.5))});
  return c.extra_cycles;
}

// The receiver takes the interrupt platform.ipi_latency after the ICR write: the entry (half of
// platform.ipi_handler), flush_tlb_func() (`work`), csd_unlock(), the exit (the other half). The
// sender sees the unlock when the csd's line has come back to it (coherence.transfer_latency).
double PlatformMmuHw::x86_ipi(int from, int to, double sent_at, double work) {
  if (ipis) ipis->inc();
  // The handler and flush_tlb_func() run in the receiver's cycles (its clock and its kernel cost
  // scale: an E-core's kernel_cycle_scale, Kernel::price_cycles_on); the sender waits in its own.
  cores.at(size_t(to))->core().interrupt(ipi_handler_cycles[size_t(to)] + work);
  hw::TraceContext& tc = cores.at(size_t(from))->trace_context();
  if (tc.on())
    tc.trace->event(kernel ? kernel->now_ps() : tc.time_ps, from, tc.task, "tlb_shootdown",
                    {TraceField::str("kind", "ipi"), TraceField::dec("from", unsigned(from)),
                     TraceField::dec("to", unsigned(to))});
  const double remote = ipi_handler_cycles[size_t(to)] / 2 + work;
  const double in_senders = cpu_ghz.empty() ? remote : remote * ghz_of(from) / ghz_of(to);
  return sent_at + ipi_latency_cycles[size_t(from)] + in_senders + ack_cycles[size_t(from)][size_t(to)];
}

void PlatformMmuHw::kernel_memory(int cpu, uint64_t pa, uint64_t bytes, bool write) {
  // (The kernel's boot, before the cores are attached, has no caches to warm.)
  if (cores.empty()) return;
  count_kernel_lines(cores.at(size_t(cpu))->caches().touch(pa, bytes, write));
}

void PlatformMmuHw::count_kernel_lines(const hw::MemoryHierarchy::Touch& t) {
  for (size_t l = 0; l < 4; ++l)
    if (kernel_lines[l]) kernel_lines[l]->inc(t.lines[l]);
}

// copy_user_highpage()'s source: REP MOVSB streams it through the L1D, each line not there a miss
// that holds a fill buffer until it arrives, `copy_mlp` of them at once. The copy waits for the
// sum of their latencies over that overlap; its own work (the copy from the L1D) is its price.
// The lines from DRAM take their transfers on the path to memory from the entry's time on, as the
// cores' fills do, `copy_mlp` at a time: copies on many cores at once are held to
// memory.read_bandwidth (and the socket link's); the copy waits for the later of the two bounds.
// (The destination's write-backs stay untimed: memory.writebacks_untimed.)
double PlatformMmuHw::kernel_copy_source(int cpu, uint64_t pa, uint64_t bytes) {
  if (cores.empty()) return 0;
  hw::MemoryHierarchy& mh = cores.at(size_t(cpu))->caches();
  const uint64_t now = kernel ? uint64_t(double(kernel->time_now_ps()) * ghz_of(cpu) / 1000.0) : 0;
  const double mlp = copy_mlp[size_t(cpu)];
  const hw::MemoryHierarchy::Touch t = mh.touch(pa, bytes, false, now, unsigned(mlp));
  count_kernel_lines(t);
  const double wait = std::max(double(t.latency_cycles) / mlp, double(t.dram_done_cycles));
  if (copy_wait) copy_wait->inc(uint64_t(wait + 0.5));
  return wait;
}

hw::CoreMmuParams platform_preset(PlatformName name) {
  switch (name) {
    case PlatformName::neoverse_n1: return hw::CoreMmuParams::neoverse_n1_structure();
    case PlatformName::xeon_e5_2699v3: return hw::CoreMmuParams::haswell_structure();
    default: return hw::CoreMmuParams::golden_cove_structure();
  }
}

namespace {
// Platform `name`'s built-in config, the defaults a preset is read from.
const Config& builtin_config(PlatformName name) {
  static const Schema schema = build_schema();
  static std::map<PlatformName, std::unique_ptr<Config>> configs;
  std::unique_ptr<Config>& c = configs[name];
  if (!c) {
    c = std::make_unique<Config>(schema);
    c->set("platform.name", platform_name(name), "built-in platform defaults");
  }
  return *c;
}
}  // namespace

hw::CoreMmuParams platform_hw_params(PlatformName name) {
  hw::CoreMmuParams p = platform_preset(name);
  Params rd = Params::reading(builtin_config(name));
  visit_hw_params(p, rd);
  return p;
}

void visit_hw_params(hw::CoreMmuParams& p, Params& v) {
  for (auto& t : p.l1) t.visit(v);
  if (p.has_itlb) p.itlb.visit(v);
  p.l2.visit(v);
  p.walker.visit(v);
  p.caches.visit(v);
  p.core.visit(v);
}

std::optional<hw::CoreMmuParams> ecore_preset(PlatformName name) {
  if (name == PlatformName::i7_12700kf) return hw::CoreMmuParams::gracemont_structure();
  return std::nullopt;
}

void visit_ecore_params(hw::CoreMmuParams& e, Params& v) {
  for (auto& t : e.l1) t.visit(v);
  if (e.has_itlb) e.itlb.visit(v);
  e.l2.visit(v);
  e.walker.visit(v);
  e.caches.l1d.visit(v);
  e.caches.l2.visit(v);  // the L2 of the core's cluster
  v.integer("cache.llc_latency", e.caches.llc_latency, e.caches.llc_latency, 0, 10000,
            "load-to-use latency of an LLC hit from this core, in its cycles (0: the LLC's "
            "cache.llc.latency)",
            "cycles");
  e.core.visit(v);
}

hw::CoreMmuParams platform_ecore_params(PlatformName name) {
  std::optional<hw::CoreMmuParams> e = ecore_preset(name);
  if (!e) panic("platform {} has no E-cores", platform_name(name));
  Params rd = Params::reading(builtin_config(name)).prefixed("ecore.");
  visit_ecore_params(*e, rd);
  return *e;
}

HwPlatform::HwPlatform(sc_core::sc_module_name n, const Config& cfg, Stats& stats, Trace& trace)
    : Platform(n), sys_(cfg, stats, trace, mmu_), os_(sys_) {
  // A task waiting for the disk sleeps and its core runs another (os/fault_delivery.cpp).
  sys_.set_io_sleep(true);
  const PlatformName name = sys_.platform().name;
  hw::CoreMmuParams p = platform_preset(name);
  Params rd = Params::reading(cfg);
  visit_hw_params(p, rd);
  const pg::Isa isa = sys_.platform().effective_isa();
  const PlatformParams& pp = sys_.platform();
  // Private L1D/L2, TLBs and walkers per core; one LLC for all the cores of a socket (UARCH A.2:
  // 25 MB shared).
  p.caches.llc.validate();
  for (unsigned s = 0; s < pp.sockets; ++s) llcs_.push_back(std::make_unique<hw::Cache>(p.caches.llc, stats));
  llc_sharers_.resize(pp.sockets);
  // SMT: logical CPUs 2n and 2n+1 are the two hardware threads of core n. They share its caches,
  // TLBs and walkers (one CoreMmu; CPUID leaf 0x18 lists each P-core TLB once, for both threads:
  // docs/research-smt-ecores.md §1 [H]); each thread's entries carry its tag, so that the
  // sibling does not hit them [U: not documented; Linux gives the siblings PCIDs of their own
  // anyway]. The ROB, load and store buffers are partitioned when both threads run; here each
  // thread has half of them, and half the fill buffers, always [U/derived]. While both threads
  // have a task, each allocates and retires at half the width (OooCore::set_sibling) [U]; the
  // execution ports are not modelled, and the kernel's prices are a whole core's.
  if (pp.smt) {
    // (A sibling's activity changes the widths during a run-ahead: no replay of run-aheads.)
    p.core.runahead_reuse = false;
    p.core.rob /= 2;
    p.core.load_buffer = std::max(1u, p.core.load_buffer / 2);
    p.core.store_buffer = std::max(1u, p.core.store_buffer / 2);
    p.core.fill_buffers = std::max(1u, p.core.fill_buffers / 2);
  }
  // E-cores (platform.ecores): the Gracemont hardware of the ecore.* keys, with the platform's
  // LLC and memory; 4 cores to a cluster sharing its L2 (CPUID leaf 4 of an E-core: the L2's
  // sharing field spans 4 cores, docs/research-smt-ecores.md §2.1). Their statistics are
  // ecore.* (their cycles are of another clock), the LLC's and memory's the platform's.
  hw::CoreMmuParams e;
  if (pp.ecores) {
    e = *ecore_preset(name);
    Params erd = rd.prefixed("ecore.");
    visit_ecore_params(e, erd);
    hw::HierarchyParams shared = p.caches;
    shared.l1d = e.caches.l1d;
    shared.l2 = e.caches.l2;
    shared.llc_latency = e.caches.llc_latency;
    e.caches = shared;
    StatsScope scope(stats, "ecore.");
    const unsigned clusters = (pp.ecores + PlatformParams::kEcoresPerCluster - 1) / PlatformParams::kEcoresPerCluster;
    for (unsigned k = 0; k < clusters; ++k) cluster_l2_.push_back(std::make_unique<hw::Cache>(e.caches.l2, stats));
    cluster_mates_.resize(clusters);
  }
  const unsigned tpc = pp.threads_per_core();
  for (unsigned c = 0; c < pp.cpus(); ++c) {
    std::string cname = "cpu" + std::to_string(c);
    if (pp.is_ecore(int(c))) {
      const unsigned k = (c - pp.pcpus()) / PlatformParams::kEcoresPerCluster;
      StatsScope scope(stats, "ecore.");
      cores_.push_back(std::make_unique<hw::CoreModule>(cname.c_str(), int(c), e, isa, os_,
                                                        sys_.kernel().phys(), stats, &trace,
                                                        llcs_[0].get(), nullptr, 0, cluster_l2_[k].get()));
      mmu_.cores.push_back(cores_.back().get());
      cluster_mates_[k].push_back(&cores_.back()->caches());
      continue;
    }
    const unsigned thread = c % tpc;
    hw::CoreMmu* sibling = thread ? &cores_.at(c - thread)->mmu() : nullptr;
    cores_.push_back(std::make_unique<hw::CoreModule>(cname.c_str(), int(c), p, isa, os_,
                                                      sys_.kernel().phys(), stats, &trace,
                                                      llcs_[pp.socket_of(c)].get(),
                                                      sibling, uint16_t(thread << kSmtTagShift)));
    mmu_.cores.push_back(cores_.back().get());
    if (thread) {
      cores_[c]->core().set_sibling(&cores_[c - 1]->core());
      cores_[c - 1]->core().set_sibling(&cores_[c]->core());
    }
  }
  for (auto& mates : cluster_mates_)
    for (hw::MemoryHierarchy* h : mates) h->set_cluster(&mates);
  // The kernel's prices in cycles on each CPU (Kernel::set_cost_scale): an E-core's
  // ecore.core.kernel_cycle_scale (Gracemont needs more cycles for the same instructions); on a
  // P-core whose SMT sibling has a task when the entry begins, core.smt_kernel_scale more (the
  // threads share the front end and the ports; the sibling's state is read once per entry).
  std::vector<double> base_scale;
  bool scaled = false;
  for (unsigned c = 0; c < pp.cpus(); ++c) {
    base_scale.push_back(pp.is_ecore(int(c)) ? e.core.kernel_cycle_scale : p.core.kernel_cycle_scale);
    scaled = scaled || base_scale.back() != 1.0;
  }
  const double smt_scale = pp.smt ? p.core.smt_kernel_scale : 1.0;
  if (scaled || smt_scale != 1.0) {
    std::vector<const hw::OooCore*> pipes;
    for (auto& c : cores_) pipes.push_back(&c->core());
    sys_.kernel().set_cost_scale([base_scale, smt_scale, pipes](int cpu) {
      const double b = base_scale.at(size_t(cpu));
      return pipes[size_t(cpu)]->sibling_busy() ? b * smt_scale : b;
    });
  }
  // An inclusive LLC (cache.llc.inclusive) drops what it evicts from every core's L1D and L2.
  for (unsigned c = 0; c < cores_.size(); ++c)
    if (cores_[c]->owns_mmu()) {
      auto& sharers = llc_sharers_[pp.socket_of(c)];
      sharers.push_back(&cores_[c]->caches());
      cores_[c]->caches().set_llc_sharers(&sharers);
    }
  mmu_.kernel = &sys_.kernel();
  // The kernel's side of the caches' statistics (cache.<level>.hits/misses are the cores' loads,
  // stores and walks): the lines its copies, zeroing and struct page updates found at each level.
  static const char* levels[] = {"l1d", "l2", "llc", "dram"};
  for (size_t l = 0; l < 4; ++l)
    mmu_.kernel_lines[l] = &stats.counter(std::string("cache.kernel.") + levels[l],
                                          std::string("lines of the kernel's bulk copies, zeroing and struct page "
                                                      "updates found in ") + (l == 3 ? "no cache (memory)" : levels[l]) +
                                              " (installed in every level; their time is the kernel's price list)",
                                          "lines");
  // Fill buffers: the core's (halved under SMT above); a copy's reads take half of them [U/derived:
  // REP MOVSB's full-line stores take fill buffers too (docs/x86-memory-path.md)].
  for (auto& c : cores_)
    mmu_.copy_mlp.push_back(std::max(1.0, double(c->core().params().fill_buffers) / 2));
  mmu_.ghz = pp.clock_ghz;
  if (pp.ecores)
    for (unsigned c = 0; c < pp.cpus(); ++c) mmu_.cpu_ghz.push_back(pp.ghz_of(int(c)));
  mmu_.copy_wait = &stats.counter("cache.kernel.copy_wait_cycles",
                                  "cycles the kernel's page copies (copy_user_highpage) waited for source lines "
                                  "beyond the L1D: their latencies over half the fill buffers", "cycles");
  for (unsigned c = 0; c < pp.cpus(); ++c) {
    // The interrupt's entry and exit are kernel instructions: an E-core's kernel_cycle_scale
    // applies (a P-core's SMT share is read per entry, not here).
    mmu_.ipi_handler_cycles.push_back(kmm::CostModel::price_of(pp.ipi_handler, pp.ghz_of(int(c)), base_scale[c]));
    mmu_.ipi_latency_cycles.push_back(pp.ipi_latency.cycles(pp.ghz_of(int(c))));
    mmu_.ack_cycles.emplace_back();
    for (unsigned to = 0; to < pp.cpus(); ++to)
      mmu_.ack_cycles.back().push_back(pp.line_transfer_between(int(to), int(c)).cycles(pp.ghz_of(int(c))));
  }
  if (pp.cpus() > 1) {
    Counter* wakeups = &stats.counter("sched.idle_wakeups",
                                      "tasks woken onto an idle CPU that waited for its idle state's exit "
                                      "(platform.idle_exit_latency)");
    Counter* shallow = &stats.counter("sched.idle_wakeups_shallow",
                                      "tasks woken onto an idle CPU in the shallow idle state (the menu governor "
                                      "predicted a short idle: platform.idle_shallow_exit_latency)");
    for (auto& c : cores_) {
      const double ghz = c->ghz();  // the C-states' exit latencies in the core's own cycles
      c->set_idle_exit(pp.idle_exit_latency.cycles(ghz), wakeups);
      c->set_idle_shallow(pp.idle_shallow_exit_latency.cycles(ghz),
                          uint32_t(pp.idle_deep_residency.ns(pp.clock_ghz) / 1000.0 + 0.5), shallow);
    }
    mmu_.ipis = &stats.counter("kernel.tlb_shootdown_ipis", "x86 TLB-shootdown IPIs sent to other CPUs");
    Counter* broadcasts = &stats.counter("kernel.tlbi_broadcasts", "arm64 broadcast TLBIs (multi-core)");
    Counter* contended = &stats.counter("kernel.tlbi_broadcasts_contended", "arm64 broadcast TLBIs that met another CPU's");
    tlbi_ = std::make_unique<hw::TlbiBroadcast>(pp.tlbi_contention.cycles(pp.clock_ghz),
                                                uint64_t(pp.tlbi_window.ns(pp.clock_ghz) * 1000.0),
                                                broadcasts, contended);
    mmu_.tlbi = tlbi_.get();
    // One DRAM per socket: the cores' fills share its read bandwidth (memory.read_bandwidth, the DDR
    // channels' peak). The write-back paths stay per core (memory.write_bandwidth is one core's).
    for (unsigned s = 0; s < pp.sockets; ++s)
      fills_.push_back(std::make_unique<hw::DramChannel>(double(hw::kLineBytes) / p.caches.memory_read_bandwidth * pp.clock_ghz,
                                                         stats, kSharedReach));
    // (The path's calendar is in the P-cores' cycles; an E-core's requests are converted.)
    for (unsigned c = 0; c < cores_.size(); ++c)
      cores_[c]->caches().share_fills(fills_[pp.socket_of(c)].get(), pp.clock_ghz / cores_[c]->ghz());
    if (pp.sockets > 1) setup_sockets(cfg, p, stats);
    // MESI between the cores' L1D/L2 for every access (loads, store drains, walks, the kernel's
    // touches); the kernel's accesses are timed by the kernel-line transfers below.
    for (auto& c : cores_)
      if (c->owns_mmu()) peers_.all.push_back(&c->caches());
    peers_.transfer_cycles = uint32_t(std::lround(pp.line_transfer.cycles(pp.clock_ghz)));
    // With E-cores a forwarded line costs its pair's latency, in the requester's cycles.
    // By holder: a P-core, an E-core of another cluster (for a P-core: any E-core), a mate.
    if (pp.ecores)
      for (auto& c : cores_) {
        if (!c->owns_mmu()) continue;
        const bool e = pp.is_ecore(c->cpu());
        auto cyc = [&](const Duration& d) { return uint32_t(std::lround(d.cycles(c->ghz()))); };
        c->caches().set_transfer_cycles(cyc(e ? pp.line_transfer_pe : pp.line_transfer),
                                        cyc(e ? pp.line_transfer_ee_cross : pp.line_transfer_pe),
                                        cyc(e ? pp.line_transfer_ee : pp.line_transfer));
      }
    peers_.transfers = &stats.counter("coherence.cache.transfers", "loads, store drains and walks that took a modified line from another core's caches", "lines");
    peers_.invalidations = &stats.counter("coherence.cache.invalidations", "other cores' copies of a line that a write invalidated", "lines");
    if (peers_.all.size() > 1)
      for (auto& c : cores_) c->caches().set_peers(&peers_);
    // The kernel's data moves between the cores' caches.
    std::vector<hw::MemoryHierarchy*> caches;
    for (auto& c : cores_) caches.push_back(&c->caches());
    std::vector<std::string> classes;
    for (unsigned i = 0; i < unsigned(kmm::LineClass::COUNT); ++i) classes.push_back(kmm::line_class_name(kmm::LineClass(i)));
    lines_ = std::make_unique<hw::KernelLineCoherence>(std::move(caches), pp.line_transfer.cycles(pp.clock_ghz),
                                                       pp.line_occupancy.cycles(pp.clock_ghz), pp.clock_ghz,
                                                       classes, stats);
    if (pp.ecores) {
      std::vector<double> clocks;
      for (unsigned c = 0; c < pp.cpus(); ++c) clocks.push_back(pp.ghz_of(int(c)));
      const PlatformParams* ppp = &pp;
      lines_->set_cpu_timing(std::move(clocks), [ppp](int from, int to) {
        return ppp->line_transfer_between(from, to).ns(ppp->ghz_of(to));
      });
    }
    if (pp.sockets > 1) {
      std::vector<unsigned> socket_of;
      for (unsigned c = 0; c < pp.cpus(); ++c) socket_of.push_back(pp.socket_of(c));
      lines_->set_sockets(std::move(socket_of), pp.remote_line_transfer.cycles(pp.clock_ghz));
    }
    sys_.set_line_transfers(lines_.get());
    // A core's walks read the page tables as they were at the walk's simulated time.
    for (auto& c : cores_) c->walker().set_entry_history(sys_.entry_history(), c->ghz());
    // Kernel entries in simulated-time order.
    sys_.set_sync([this](int cpu, uint64_t ps) { cores_.at(size_t(cpu))->sync_to(ps); });
    // Every core's local time is at or ahead of SystemC's: frames freed later are kept (Kernel::buddy_free).
    sys_.kernel().set_horizon(
        [] { return uint64_t(sc_core::sc_time_stamp() / sc_core::sc_time(1, sc_core::SC_PS) + 0.5); });
  }
  // Idle cores wake when a task becomes runnable; a busy one looks whether it preempts.
  sys_.set_wake([this](int cpu) { cores_.at(size_t(cpu))->wake(); });
  // The invariant checker sees what the TLBs cache (PORTMAP §3.3 item 8).
  sys_.kernel().set_tlb_enumerator([this](const std::function<void(const kmm::Kernel::CachedTranslation&)>& fn) {
    for (size_t i = 0; i < cores_.size(); ++i) {
      if (!cores_[i]->owns_mmu()) continue;  // an SMT sibling's TLBs: listed with the first thread's
      for (hw::Tlb* t : cores_[i]->maintenance().tlbs()) {
        t->for_each([&](const hw::TlbEntry& e) {
          const unsigned thread = e.asid >> kSmtTagShift;
          fn(kmm::Kernel::CachedTranslation{int(i + thread), uint16_t(e.asid & ((1u << kSmtTagShift) - 1)), e.vbase,
                                            e.bytes(), e.pbase >> kmm::PAGE_SHIFT, e.writable});
        });
      }
    }
  });
}

// Several sockets (platform.sockets): each socket's memory is a NUMA node (the kernel's
// pfn_to_nid() split), reached from the others over the socket link (MemoryHierarchy::Numa).
void HwPlatform::setup_sockets(const Config& cfg, const hw::CoreMmuParams& p, Stats& stats) {
  const PlatformParams& pp = sys_.platform();
  const double remote_ns = p.caches.memory_remote_latency.ns(pp.clock_ghz);
  if (pp.remote_line_transfer.value <= 0 || remote_ns <= 0 || p.caches.memory_remote_bandwidth <= 0)
    fatal("{}: platform.sockets = {} needs what crosses between sockets: set "
          "coherence.remote_transfer_latency (is {}), memory.remote_latency (is {}) and "
          "memory.remote_bandwidth (is {})",
          cfg.setting("platform.sockets").origin, pp.sockets, cfg.setting("coherence.remote_transfer_latency").text,
          cfg.setting("memory.remote_latency").text, cfg.setting("memory.remote_bandwidth").text);
  const double local_ns = p.caches.memory_latency.ns(pp.clock_ghz);
  if (remote_ns < local_ns)
    fatal("{}: memory.remote_latency = {} is below memory.latency = {}: another node's memory is "
          "not nearer than the local one", cfg.setting("memory.remote_latency").origin,
          cfg.setting("memory.remote_latency").text, cfg.setting("memory.latency").text);
  numa_.node_bytes = sys_.kernel().node_span_frames() << kmm::PAGE_SHIFT;
  for (unsigned s = 0; s < pp.sockets; ++s) {
    numa_.llcs.push_back(llcs_[s].get());
    numa_.fills.push_back(fills_[s].get());
    links_.push_back(std::make_unique<hw::DramChannel>(double(hw::kLineBytes) / p.caches.memory_remote_bandwidth * pp.clock_ghz,
                                                       stats, kSharedReach));
    numa_.links.push_back(links_.back().get());
  }
  numa_.remote_memory_extra = uint32_t(std::lround((remote_ns - local_ns) * pp.clock_ghz));
  numa_.remote_transfer = uint32_t(std::lround(pp.remote_line_transfer.cycles(pp.clock_ghz)));
  numa_.remote_fills = &stats.counter("memory.remote_fills", "lines the cores' loads, stores and walks read from another node's memory", "lines");
  numa_.kernel_remote = &stats.counter("memory.remote_lines_kernel", "lines the kernel's page copies, zeroing and struct page updates got from the other socket: its memory or a modified copy in its caches (not timed: the kernel's price list covers them)", "lines");
  numa_.remote_forwards = &stats.counter("coherence.socket.forwards", "lines the cores' loads, stores and walks took modified from another socket's LLC", "lines");
  for (unsigned c = 0; c < cores_.size(); ++c)
    if (cores_[c]->owns_mmu()) cores_[c]->caches().set_numa(&numa_, pp.socket_of(c));
}

void HwPlatform::finish(double host_seconds) {
  for (auto& c : cores_)
    if (c->error()) std::rethrow_exception(c->error());
  // (An error a core stopped on — the watchdog, a UserError from the kernel — with its type, above.)
  if (!sys_.all_exited())
    panic("the simulation stopped with tasks that never ran to exit(): every remaining task is "
          "blocked (a deadlock of the workload)");
  // The run ends when the last core does: each core's cycles in its own clock (one clock: the
  // largest cycle count, converted once, as the conversion is monotone).
  uint64_t end_ps = 0;
  for (auto& c : cores_) end_ps = std::max(end_ps, sys_.cycles_to_ps(double(c->core().now()), c->cpu()));
  if (lines_ && sys_.stats().region_seen()) {
    const uint64_t faults = sys_.stats().region_value("faults.region");
    sys_.stats().set_scalar("coherence.transfers_per_fault",
                            faults ? double(sys_.stats().region_value("coherence.transfers")) / double(faults) : 0,
                            "kernel cache-line transfers between cores per region fault (the measured region)");
  }
  sys_.finish(end_ps, uops(), host_seconds);
}

double HwPlatform::progress() const { return cores_.empty() ? 0 : cores_[0]->core().progress(); }

uint64_t HwPlatform::uops() const {
  // Every P-core counts into the one "core.uops" statistic, every E-core into "ecore.core.uops":
  // read each once.
  if (cores_.empty()) return 0;
  const PlatformParams& pp = sys_.platform();
  return cores_.front()->core().uops() + (pp.ecores ? cores_.back()->core().uops() : 0);
}

}  // namespace mmusim
