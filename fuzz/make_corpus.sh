#!/usr/bin/env bash
# Seed corpora for the fuzzers from configs/: OUT/config (each config with its includes inlined as
# the harness's b.cfg and c.cfg), OUT/set (every setting as SECTION.KEY=VALUE lines), OUT/values
# (every value). Usage: fuzz/make_corpus.sh OUT
set -euo pipefail
out=$1
src="$(cd "$(dirname "$0")/.." && pwd)/configs"
mkdir -p "$out/config" "$out/set" "$out/values"
inc_of() { grep -m1 '^include' "$1" | sed 's/^include *= *//; s/ *#.*//' || true; }
for f in "$src"/*.cfg "$src"/*/*.cfg; do
  name=$(basename "$(dirname "$f")")_$(basename "$f")
  b=$(inc_of "$f"); parts=("$f")
  if [ -n "$b" ]; then
    b="$(dirname "$f")/$b"; parts+=("$b")
    c=$(inc_of "$b"); [ -n "$c" ] && parts+=("$(dirname "$b")/$c")
  fi
  {
    for i in "${!parts[@]}"; do
      [ "$i" -gt 0 ] && printf '\n#@@\n'
      next=$([ "$i" = 0 ] && echo b.cfg || echo c.cfg)
      sed "s|^include *=.*|include = $next|" "${parts[$i]}"
    done
  } > "$out/config/$name"
  # SECTION.KEY=VALUE lines
  awk '/^\[/{gsub(/[][]/,""); s=$0; next} /^[a-z_0-9]+ *=/ && s!="" {sub(/#.*/,""); split($0,a,"="); k=a[1]; v=substr($0,index($0,"=")+1); gsub(/^ +| +$/,"",k); gsub(/^ +| +$/,"",v); print s "." k "=" v}' "$f" > "$out/set/$name"
done
grep -h '^[a-z_0-9.]* *=' "$src"/*.cfg "$src"/*/*.cfg | sed 's/#.*//; s/^[^=]*= *//; s/ *$//' | sort -u |
  while IFS= read -r v; do printf '%s' "$v" > "$out/values/$(printf '%s' "$v" | md5sum | cut -c1-16)"; done
for v in 0 -1 4K 2MiB 1.5G 256M 9223372036854775807 18446744073709551616 0x10 010 1e3 715cyc 100ns 1.5us inf nan; do
  printf '%s' "$v" > "$out/values/x_$(printf '%s' "$v" | md5sum | cut -c1-16)"
done
# OUT/trace: small recordings (recorder/mmusim_trace.h v1) with every record kind, and a threaded one.
mkdir -p "$out/trace"
python3 - "$out/trace" <<'PY'
import struct, sys
def u(v):
    b = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        b.append(c | (0x80 if v else 0))
        if not v: return bytes(b)
def s(v): return u(((v << 1) ^ (v >> 63)) & (2**64 - 1))
def header(pid, ppid): return b"MMUSIMTR" + struct.pack("<IIII", 1, pid, ppid, 0)
every = (header(7, 0) + b"\x0c" + u(0x400000) + u(0x3000) + u(5) + u(1) + b"\x07" + u(1)
         + b"\x01" + s(0x401000) + u(5) + b"\x02" + s(0x10) + s(0x7fff0008) + u(8)
         + b"\x03" + s(-0x20) + s(-8) + u(64) + b"\x04" + s(4) + s(0x1000) + u(4)
         + b"\x05" + s(2) + u(6) + b"\x06" + u(9) + b"".join(u(a) for a in (0, 4096, 3, 0x22, 2**64 - 1, 0)) + s(0x7f0000000000)
         + b"\x09" + u(8) + b"\x0b" + u(1) + u(0x1000) + u(0x2000) + b"\x0b" + u(0) + u(0) + u(0)
         + b"\x0a" + s(0) + b"\x0d")
threads = (header(9, 0) + b"\x07" + u(1) + b"\x08" + u(2) + b"\x07" + u(2) + b"\x03" + s(0x401100) + s(0x601040) + u(2)
           + b"\x0a" + s(-3) + b"\x07" + u(1) + b"\x06" + u(202) + b"".join(u(0) for _ in range(6)) + s(0)
           + b"\x0a" + s(0) + b"\x0d")
open(sys.argv[1] + "/every-record.mtr", "wb").write(every)
open(sys.argv[1] + "/threads.mtr", "wb").write(threads)
PY
# The same compressed, as mmusim record --compress zstd writes them: a zstd frame each, with its
# content size and checksum (the zstd command's defaults for a file).
if command -v zstd >/dev/null 2>&1; then
  for f in "$out"/trace/*.mtr; do zstd -q -3 -f "$f" -o "$f.zst"; done
fi
