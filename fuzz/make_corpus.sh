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
