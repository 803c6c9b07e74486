#!/usr/bin/env bash
# Benchmark (not a test): the size of delta bundles against the full one,
# for the two updates a lab carries most (issue 25): a metapackage version
# bump, and one NVIDIA package updated. The repository holds 12 real
# NVIDIA-built debs (Debian's CUDA 11.8 libraries from bookworm non-free,
# ~554 MB, the set benches/real-debs.sh downloads by apt into
# ~/.cache/debforge-bench/) and a small metapackage; the package update is
# libcudart11.0 and then libcusparse11 (116 MB; the largest, libcublaslt11, has exact dependents that would move with it) rebuilt with a new
# version (`debforge deb repack --version-suffix`).
#   bash benches/delta.sh      (run benches/real-debs.sh once first, or set DEBS)
# Goals: the metapackage delta under 1% of the full bundle; a package
# update's delta at most that package plus 1 MB; exits 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${BIN:-}" ] || cargo build --release -q
bin=${BIN:-$PWD/target/release/debforge}
debs=${DEBS:-$HOME/.cache/debforge-bench/cuda-11.8}
[ "$(ls "$debs"/*.deb 2>/dev/null | wc -l)" -ge 2 ] || { echo "no debs in $debs: run benches/real-debs.sh once (it downloads them), or set DEBS" >&2; exit 2; }
work=$(mktemp -d /tmp/debforge-delta-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=1700000000
"$bin" keygen --keys "$work/keys" --name bench >/dev/null 2>&1
mkdir -p "$work/recipes/packages" "$work/debs"
recipe() { # NAME VERSION FILE
  printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\npin = false\n' \
    "$1" "$2" "$(dpkg-deb -f "$3" Architecture)" "$3" > "$work/recipes/packages/$1.toml"
}
for f in "$debs"/*.deb; do
  recipe "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" "$f"
done
meta() { # VERSION
  local tree=$work/meta-tree; rm -rf "$tree"; mkdir -p "$tree/DEBIAN"
  printf 'Package: gpu-stack-bench\nVersion: %s\nArchitecture: all\nMaintainer: bench <bench@example.org>\nDepends: libcudart11.0\nDescription: the lab metapackage\n bench.\n' "$1" > "$tree/DEBIAN/control"
  "$bin" deb build "$tree" -o "$work/debs/gpu-stack-bench_$1_all.deb" >/dev/null
  recipe gpu-stack-bench "$1" "$work/debs/gpu-stack-bench_$1_all.deb"
}
update() { # PACKAGE: rebuilt with a new version
  local f; f=$(ls "$debs"/"$1"_*.deb)
  local new=$work/debs/$1-lab1.deb
  "$bin" deb repack "$f" -o "$new" --version-suffix +lab1 >/dev/null
  recipe "$1" "$(dpkg-deb -f "$new" Version)" "$new"
  stat -c %s "$new"
}
build() { "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/out" >/dev/null 2>"$work/build.err" || { cat "$work/build.err" >&2; exit 1; }; }
bundle() { "$bin" bundle -o "$work/$1" --out "$work/out" --keys "$work/keys" ${2:+--from "$work/$2"} >/dev/null; stat -c %s "$work/$1"; }

meta 1.0-1; build; full=$(bundle full.tar)
meta 1.0-2; build; d_meta=$(bundle meta.tar full.tar)
small=$(update libcudart11.0); build; d_small=$(bundle small.tar meta.tar)
large=$(update libcusparse11); build; d_large=$(bundle large.tar small.tar)

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f%%", 100 * a / b }'; }
mb() { awk -v a="$1" 'BEGIN { printf "%.2f MB", a / 1e6 }'; }
echo "== delta bundles against the full one (12 real CUDA 11.8 debs + a metapackage)"
printf '  full bundle                                %12s\n' "$(mb "$full")"
printf '  delta: metapackage 1.0-1 -> 1.0-2           %12s  %s of the full bundle (goal < 1%%)\n' "$(mb "$d_meta")" "$(pct "$d_meta" "$full")"
printf '  delta: libcudart11.0 updated (%s)   %12s  package + %s\n' "$(mb "$small")" "$(mb "$d_small")" "$(mb $((d_small - small)))"
printf '  delta: libcusparse11 updated (%s)  %12s  package + %s (goal: package + < 1 MB)\n' "$(mb "$large")" "$(mb "$d_large")" "$(mb $((d_large - large)))"
ok=1
awk -v a="$d_meta" -v b="$full" 'BEGIN { exit !(a < b / 100) }' || ok=0
[ $((d_small - small)) -lt 1000000 ] || ok=0
[ $((d_large - large)) -lt 1000000 ] || ok=0
if [ $ok = 1 ]; then echo "  PASS"; else echo "  FAIL"; exit 1; fi
