// SPDX-License-Identifier: GPL-2.0-only
// libFuzzer harness: the trace reader (workloads/trace_reader.cpp), on any bytes as a .mtr file
// (an input that begins with zstd's magic number is read as a compressed one: trace_zstd.cpp).
// Every input must either be read whole (TraceFile::open() decodes every record) or be refused
// with a UserError (exit 2 in mmusim); anything else (a crash, a sanitizer report, another
// exception) is a finding. What it read is then read again by per-thread cursors, which must see
// the same records, whether they skip the other threads' segments or decode them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.hpp"
#include "workloads/trace_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    char tmpl[] = "/tmp/mmusim-fuzz-trace-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) std::abort();
    close(fd);
    return std::string(tmpl);
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    auto file = mmusim::wl::TraceFile::open(path);
    uint64_t all = 0, per_thread = 0;
    mmusim::wl::TraceRecord r;
    for (mmusim::wl::TraceCursor c(file, 0); c.next(r);) ++all;
    for (uint32_t tid : file->summary().threads) {
      // The cursor that skips other threads' segments reads exactly what decoding all reads.
      mmusim::wl::TraceCursor skip(file, tid), all_records(file, tid, /*skip_segments=*/false);
      mmusim::wl::TraceRecord s;
      while (skip.next(r)) {
        ++per_thread;
        if (!all_records.next(s) || s.op != r.op || s.ip != r.ip || s.addr != r.addr || s.n != r.n ||
            s.order != r.order || s.result != r.result) {
          std::fprintf(stderr, "finding: thread %u's skipping cursor differs at record %llu\n", tid,
                       (unsigned long long)per_thread);
          std::abort();
        }
      }
      if (all_records.next(s)) {
        std::fprintf(stderr, "finding: thread %u's skipping cursor ends early\n", tid);
        std::abort();
      }
    }
    // Every record but the MAPs and THREADs belongs to one thread; END is not returned.
    uint64_t threads_records = 0;
    for (mmusim::wl::TraceCursor c(file, 0); c.next(r);)
      threads_records += r.op == 0x07 /* THREAD */ || r.op == 0x0c /* MAP */;
    if (all + 1 != file->summary().records || per_thread + threads_records != all) {
      std::fprintf(stderr, "finding: %llu records, %llu per thread, %llu THREAD/MAP, summary %llu\n",
                   (unsigned long long)all, (unsigned long long)per_thread,
                   (unsigned long long)threads_records, (unsigned long long)file->summary().records);
      std::abort();
    }
  } catch (const mmusim::UserError&) {
  }
  return 0;
}
