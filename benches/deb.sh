#!/usr/bin/env bash
# Benchmark (not a test): debforge's .deb reader and writer against dpkg-deb,
# measured in the same run on the same ~300 MB tree of real binaries.
#
#   bash benches/deb.sh [SIZE_MB]        # default 300
#   DEB=/path/to/big.deb bash benches/deb.sh   # also time `info` on a real package
#                                               # (e.g. libcublaslt11 from non-free)
# Prints wall seconds and peak RSS for each tool and the ratio debforge/dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-300}
runs=${RUNS:-5}
cargo build --release -q
bin=$PWD/target/release/debforge
work=$(mktemp -d /tmp/debforge-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=1556000000

# A tree of real ELF libraries (compressible like real packages), ~size_mb.
tree=$work/tree
mkdir -p "$tree/DEBIAN" "$tree/usr/lib/x86_64-linux-gnu"
printf 'Package: bench-libs\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: bench <bench@example.org>\nDescription: benchmark payload\n' > "$tree/DEBIAN/control"
total=0
while IFS= read -r f; do
  cp "$f" "$tree/usr/lib/x86_64-linux-gnu/$(echo "$f" | tr / _)"
  total=$((total + $(stat -c %s "$f")))
  [ "$total" -ge $((size_mb * 1024 * 1024)) ] && break
done < <(find /usr/lib/x86_64-linux-gnu /root/.rustup /usr/lib -type f -size +200k 2>/dev/null | sort)
echo "tree: $(du -sh "$tree" | cut -f1) in $(find "$tree" -type f | wc -l) files"

measure() { # label, command...  -> prints "label secs rss_kb"
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
  echo "$label $(cat "$work/t")"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }

echo "== build (xz -6, all cores), 1 run each"
read -r _ t_ours m_ours < <(measure debforge "$bin" deb build "$tree" -o "$work/ours.deb")
read -r _ t_dpkg m_dpkg < <(measure dpkg-deb dpkg-deb --root-owner-group -Zxz -z6 --build "$tree" "$work/dpkg.deb")
s_ours=$(stat -c %s "$work/ours.deb"); s_dpkg=$(stat -c %s "$work/dpkg.deb")
printf '%-10s %8s s %8s KB RSS %12s bytes\n' debforge "$t_ours" "$m_ours" "$s_ours" dpkg-deb "$t_dpkg" "$m_dpkg" "$s_dpkg"
echo "build time ratio debforge/dpkg-deb: $(ratio "$t_ours" "$t_dpkg"); size ratio: $(ratio "$s_ours" "$s_dpkg")"

bench_info() { # deb file: total wall time of $loops runs, and peak RSS of one
  local deb=$1 loops=${LOOPS:-200}
  echo "== info on $(basename "$deb") ($(stat -c %s "$deb") bytes), $loops runs each"
  local t0 t1 t_o t_d
  t0=$(date +%s.%N); for _ in $(seq "$loops"); do "$bin" deb info "$deb" >/dev/null; done; t1=$(date +%s.%N)
  t_o=$(awk -v a="$t0" -v b="$t1" -v n="$loops" 'BEGIN{printf "%.2f", (b-a)*1000/n}')
  t0=$(date +%s.%N); for _ in $(seq "$loops"); do dpkg-deb --info "$deb" >/dev/null; done; t1=$(date +%s.%N)
  t_d=$(awk -v a="$t0" -v b="$t1" -v n="$loops" 'BEGIN{printf "%.2f", (b-a)*1000/n}')
  read -r _ _ rss_o < <(measure debforge "$bin" deb info "$deb")
  read -r _ _ rss_d < <(measure dpkg-deb dpkg-deb --info "$deb")
  printf '%-10s %8s ms/run %8s KB RSS\n' debforge "$t_o" "$rss_o" dpkg-deb "$t_d" "$rss_d"
  echo "info time ratio debforge/dpkg-deb: $(ratio "$t_o" "$t_d"); RSS ratio: $(ratio "$rss_o" "$rss_d")"
}
bench_info "$work/dpkg.deb"
if [ -n "${DEB:-}" ]; then bench_info "$DEB"; fi

echo "== contents (full data decompression), 1 run each"
read -r _ t_ours m_ours < <(measure debforge "$bin" deb contents "$work/dpkg.deb")
read -r _ t_dpkg m_dpkg < <(measure dpkg-deb dpkg-deb --contents "$work/dpkg.deb")
printf '%-10s %8s s %8s KB RSS\n' debforge "$t_ours" "$m_ours" dpkg-deb "$t_dpkg" "$m_dpkg"
echo "contents time ratio debforge/dpkg-deb: $(ratio "$t_ours" "$t_dpkg")"
