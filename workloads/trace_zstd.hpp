// SPDX-License-Identifier: GPL-2.0-only
// Compressed recordings: a proc-<pid>.mtr file as a sequence of independent zstd frames, each of
// kTraceFrameBytes of the uncompressed file (the last one shorter), each with its content size and
// checksum in its header (docs/trace-format.md, "Compression"). The concatenation is an ordinary
// zstd stream (`zstd -d` restores the .mtr), and a reader can start at any frame: a cursor keeps
// one decompressed frame at a time and its copy can go on from where it is (TraceCursor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mmusim::wl {

// Uncompressed bytes per frame that `mmusim record` writes.
inline constexpr size_t kTraceFrameBytes = size_t(8) << 20;
// The largest frame a reader accepts (a cursor holds one): files compressed as one huge frame
// (e.g. by the zstd command) are refused with a hint.
inline constexpr size_t kTraceMaxFrameBytes = size_t(64) << 20;

// Whether `p` (of `n` bytes) begins with a zstd frame's magic number.
bool is_zstd(const uint8_t* p, size_t n);

struct TraceFrame {
  size_t coff = 0, csize = 0;  // where the frame is in the compressed file
  size_t doff = 0, dsize = 0;  // the uncompressed bytes it holds
};

// The frames of a compressed file (`path` for messages); a UserError if a frame is truncated,
// corrupt, does not state its size, or is larger than kTraceMaxFrameBytes.
std::vector<TraceFrame> zstd_frames(const std::string& path, const uint8_t* p, size_t n);

// Decompresses frame `f` of the compressed file at `p` into `out` (f.dsize bytes); a UserError
// naming `path` and the frame if its data are corrupt.
void zstd_frame_decompress(const std::string& path, const uint8_t* p, const TraceFrame& f, uint8_t* out);

// Compresses a .mtr file into frames while it is still being written (mmusim record: the tool
// appends to it while the program runs). Each pump() compresses the whole frames that the file
// holds by now, appends them to the output and, where the file system can, frees the compressed
// part of the input (a hole: the file keeps its size); finish() compresses the rest as the last
// frame. A UserError naming the file if either file cannot be used. `free_input`: punch the
// holes (the input is then only good for removing).
class TraceCompressor {
 public:
  TraceCompressor(const std::string& in, const std::string& out, int level,
                  size_t frame_bytes = kTraceFrameBytes, bool free_input = false);
  ~TraceCompressor();
  TraceCompressor(const TraceCompressor&) = delete;
  TraceCompressor& operator=(const TraceCompressor&) = delete;
  // Compresses the whole frames written so far; returns how many.
  size_t pump();
  // Compresses what is left (the input is complete) and closes the output.
  void finish();
  uint64_t in_bytes() const { return done_; }
  uint64_t out_bytes() const { return written_; }
  // Bytes of the input freed (holes punched) so far.
  uint64_t freed_bytes() const { return freed_; }

 private:
  void frame(size_t n);
  void release();
  std::string in_, out_;
  int in_fd_ = -1, out_fd_ = -1;
  void* cctx_ = nullptr;
  size_t frame_bytes_;
  std::vector<uint8_t> buf_, z_;
  uint64_t done_ = 0, written_ = 0, freed_ = 0;
  bool can_free_;
};

// Compresses the file `in` into `out` as frames of `frame_bytes` (the last one shorter) at zstd
// level `level` (1..19); returns the compressed size.
uint64_t zstd_compress_trace(const std::string& in, const std::string& out, int level,
                             size_t frame_bytes = kTraceFrameBytes);

}  // namespace mmusim::wl
