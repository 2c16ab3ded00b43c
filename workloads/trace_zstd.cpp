// SPDX-License-Identifier: GPL-2.0-only
#include "workloads/trace_zstd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
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

TraceCompressor::TraceCompressor(const std::string& in, const std::string& out, int level, size_t frame_bytes,
                                 bool free_input)
    : in_(in), out_(out), frame_bytes_(frame_bytes), can_free_(free_input) {
  if (frame_bytes == 0 || frame_bytes > kTraceMaxFrameBytes)
    fatal("{}: a frame of {} bytes: allowed 1 to {}", out, frame_bytes, kTraceMaxFrameBytes);
  if (can_free_) in_fd_ = ::open(in.c_str(), O_RDWR | O_CLOEXEC);
  if (in_fd_ < 0) in_fd_ = ::open(in.c_str(), O_RDONLY | O_CLOEXEC), can_free_ = false;
  if (in_fd_ < 0) fatal("{}: cannot read: {}", in, std::strerror(errno));
  out_fd_ = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd_ < 0) {
    const int e = errno;
    ::close(in_fd_);
    fatal("{}: cannot write: {}", out, std::strerror(e));
  }
  ZSTD_CCtx* c = ZSTD_createCCtx();
  cctx_ = c;
  auto param = [&](ZSTD_cParameter k, int v) {
    const size_t r = c ? ZSTD_CCtx_setParameter(c, k, v) : size_t(-1);
    if (!c || ZSTD_isError(r)) {
      release();
      fatal("{}: zstd: {}", out, c ? ZSTD_getErrorName(r) : "out of memory");
    }
  };
  param(ZSTD_c_compressionLevel, level);
  param(ZSTD_c_checksumFlag, 1);
  param(ZSTD_c_contentSizeFlag, 1);
  buf_.resize(frame_bytes);
  z_.resize(ZSTD_compressBound(frame_bytes));
}

TraceCompressor::~TraceCompressor() { release(); }

void TraceCompressor::release() {
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  cctx_ = nullptr;
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  in_fd_ = out_fd_ = -1;
}

// The next `n` bytes of the input as one frame.
void TraceCompressor::frame(size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(in_fd_, buf_.data() + got, n - got, off_t(done_ + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fatal("{}: cannot read: {}", in_, r < 0 ? std::strerror(errno) : "the file got shorter");
    got += size_t(r);
  }
  const size_t c = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), z_.data(), z_.size(), buf_.data(), n);
  if (ZSTD_isError(c)) fatal("{}: zstd: {}", out_, ZSTD_getErrorName(c));
  for (size_t put = 0; put < c;) {
    const ssize_t w = ::write(out_fd_, z_.data() + put, c - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fatal("{}: cannot write: {}", out_, std::strerror(errno));
    put += size_t(w);
  }
  // The compressed part of the input is not needed any more: give its blocks back (a file system
  // without hole punching keeps them until the file is removed).
  if (can_free_) {
    if (fallocate(in_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(done_), off_t(n)) == 0)
      freed_ += n;
    else
      can_free_ = false;
  }
  done_ += n;
  written_ += c;
}

size_t TraceCompressor::pump() {
  struct stat st;
  if (fstat(in_fd_, &st) != 0) fatal("{}: cannot read: {}", in_, std::strerror(errno));
  size_t frames = 0;
  while (uint64_t(st.st_size) >= done_ + frame_bytes_) {
    frame(frame_bytes_);
    ++frames;
  }
  return frames;
}

void TraceCompressor::finish() {
  pump();
  struct stat st;
  if (fstat(in_fd_, &st) != 0) fatal("{}: cannot read: {}", in_, std::strerror(errno));
  if (uint64_t(st.st_size) > done_) frame(size_t(uint64_t(st.st_size) - done_));
  if (::close(out_fd_) != 0) {
    out_fd_ = -1;
    fatal("{}: cannot write: {}", out_, std::strerror(errno));
  }
  out_fd_ = -1;
}

uint64_t zstd_compress_trace(const std::string& in, const std::string& out, int level, size_t frame_bytes) {
  TraceCompressor c(in, out, level, frame_bytes);
  c.finish();
  return c.out_bytes();
}

}  // namespace mmusim::wl
