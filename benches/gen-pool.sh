#!/usr/bin/env bash
# Writes a synthetic pool of N small .deb files (distinct names, a few files
# each) into DIR/pool/main/..., for the index benchmarks.
#   bash benches/gen-pool.sh N DIR
set -euo pipefail
n=$1; dir=$2
bin=${DEBFORGE:-$(cd "$(dirname "$0")/.." && pwd)/target/release/debforge}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$dir"
export SOURCE_DATE_EPOCH=1556000000
gen() {
  local i=$1 name tree sub
  name=$(printf 'bench-pkg%05d' "$i")
  tree=$work/$name
  mkdir -p "$tree/DEBIAN" "$tree/usr/share/doc/$name" "$tree/usr/lib/$name"
  printf 'Package: %s\nVersion: 1.%d-1\nArchitecture: amd64\nMaintainer: bench <bench@example.org>\nDepends: libc6 (>= 2.27)\nSection: libs\nPriority: optional\nDescription: synthetic package %d\n for index benchmarks.\n' "$name" "$i" "$i" > "$tree/DEBIAN/control"
  head -c $((512 + i % 4096)) /dev/urandom > "$tree/usr/lib/$name/data.bin"
  echo "copyright $i" > "$tree/usr/share/doc/$name/copyright"
  sub="$dir/pool/main/b/$name"
  mkdir -p "$sub"
  "$bin" deb build "$tree" -o "$sub/" -Z gzip >/dev/null
  rm -rf "$tree"
}
export -f gen; export work dir bin
seq 1 "$n" | xargs -P "$(nproc)" -I{} bash -c 'gen {}'
echo "$(find "$dir/pool" -name '*.deb' | wc -l) debs in $dir/pool"
