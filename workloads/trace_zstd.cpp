// SPDX-License-Identifier: GPL-2.0-only
#include "workloads/trace_zstd.hpp"

#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.hpp"

namespace mmusim::wl {

bool is_zstd(const uint8_t* p, size_t n) {
  // ZSTD_MAGICNUMBER, little-endian
  return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

std::vector<TraceFrame> zstd_frames(const std::string& path, const uint8_t* p, size_t n) {
  std::vector<TraceFrame> frames;
  size_t coff = 0, doff = 0;
  while (coff < n) {
    const size_t idx = frames.size();
    if (!is_zstd(p + coff, n - coff))
      fatal("{}: compressed trace: frame {} (byte {} of the file) is not a zstd frame; the file is "
            "corrupt or truncated",
            path, idx, coff);
    const size_t csize = ZSTD_findFrameCompressedSize(p + coff, n - coff);
    if (ZSTD_isError(csize))
      fatal("{}: compressed trace: frame {} (byte {} of the file): {}; the file is corrupt or truncated",
            path, idx, coff, ZSTD_getErrorName(csize));
    const unsigned long long dsize = ZSTD_getFrameContentSize(p + coff, n - coff);
    if (dsize == ZSTD_CONTENTSIZE_ERROR)
      fatal("{}: compressed trace: frame {} (byte {} of the file) has a corrupt header", path, idx, coff);
    if (dsize == ZSTD_CONTENTSIZE_UNKNOWN)
      fatal("{}: compressed trace: frame {} does not state its size, so it was not written by mmusim "
            "record; decompress the file (zstd -d) and replay the .mtr",
            path, idx);
    if (dsize > kTraceMaxFrameBytes)
      fatal("{}: compressed trace: frame {} holds {} bytes, more than the {} MiB a frame may "
            "(mmusim record writes {} MiB frames); decompress the file (zstd -d) and replay the .mtr",
            path, idx, dsize, kTraceMaxFrameBytes >> 20, kTraceFrameBytes >> 20);
    if (dsize == 0) fatal("{}: compressed trace: frame {} is empty", path, idx);
    frames.push_back(TraceFrame{coff, csize, doff, size_t(dsize)});
    coff += csize;
    doff += size_t(dsize);
  }
  return frames;
}

void zstd_frame_decompress(const std::string& path, const uint8_t* p, const TraceFrame& f, uint8_t* out) {
  const size_t got = ZSTD_decompress(out, f.dsize, p + f.coff, f.csize);
  if (ZSTD_isError(got))
    fatal("{}: compressed trace: the frame at byte {} of the file: {}; the file is corrupt", path,
          f.coff, ZSTD_getErrorName(got));
  if (got != f.dsize)
    fatal("{}: compressed trace: frame at byte {} of the file holds {} bytes where its header says {}",
          path, f.coff, got, f.dsize);
}

uint64_t zstd_compress_trace(const std::string& in, const std::string& out, int level, size_t frame_bytes) {
  if (frame_bytes == 0 || frame_bytes > kTraceMaxFrameBytes)
    fatal("{}: a frame of {} bytes: allowed 1 to {}", out, frame_bytes, kTraceMaxFrameBytes);
  struct Closer {
    void operator()(FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<FILE, Closer> src(std::fopen(in.c_str(), "rb"));
  if (!src) fatal("{}: cannot read: {}", in, std::strerror(errno));
  std::unique_ptr<FILE, Closer> dst(std::fopen(out.c_str(), "wb"));
  if (!dst) fatal("{}: cannot write: {}", out, std::strerror(errno));
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) fatal("{}: cannot compress: out of memory", out);
  auto param = [&](ZSTD_cParameter k, int v) {
    const size_t r = ZSTD_CCtx_setParameter(cctx.get(), k, v);
    if (ZSTD_isError(r)) fatal("{}: zstd: {}", out, ZSTD_getErrorName(r));
  };
  param(ZSTD_c_compressionLevel, level);
  param(ZSTD_c_checksumFlag, 1);
  param(ZSTD_c_contentSizeFlag, 1);
  std::vector<uint8_t> buf(frame_bytes), z(ZSTD_compressBound(frame_bytes));
  uint64_t total = 0;
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), src.get());
    if (n == 0) {
      if (std::ferror(src.get())) fatal("{}: cannot read: {}", in, std::strerror(errno));
      break;
    }
    const size_t c = ZSTD_compress2(cctx.get(), z.data(), z.size(), buf.data(), n);
    if (ZSTD_isError(c)) fatal("{}: zstd: {}", out, ZSTD_getErrorName(c));
    if (std::fwrite(z.data(), 1, c, dst.get()) != c) fatal("{}: cannot write: {}", out, std::strerror(errno));
    total += c;
  }
  if (std::fflush(dst.get()) != 0) fatal("{}: cannot write: {}", out, std::strerror(errno));
  return total;
}

}  // namespace mmusim::wl
