#!/usr/bin/env bash
# Benchmark (not a test): `debforge index` against `apt-ftparchive packages`
# and `dpkg-scanpackages` on synthetic pools of 1,000 and 5,000 debs, in one
# run; cold (empty index cache) and warm (nothing changed).
#   bash benches/index.sh [N...]     (default: 1000 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=$PWD/target/release/debforge
sizes=${*:-1000 5000}
measure() { # label, dir, command... -> "secs rss_kb"
  local dir=$1; shift
  ( cd "$dir" && /usr/bin/time -f "%e %M" -o /tmp/debforge-bench-t "$@" >/dev/null 2>/dev/null ) || { echo "failed: $*" >&2; exit 1; }
  cat /tmp/debforge-bench-t
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.3f", a / b }'; }
for n in $sizes; do
  dir=/tmp/debforge-bench-pool-$n
  [ -d "$dir/pool" ] || bash benches/gen-pool.sh "$n" "$dir"
  rm -rf "$dir/index-cache"
  read -r t_cold m_cold < <(measure "$dir" "$bin" index pool --cache index-cache)
  read -r t_warm m_warm < <(measure "$dir" "$bin" index pool --cache index-cache)
  read -r t_aft m_aft < <(measure "$dir" apt-ftparchive packages pool)
  if [ "${SKIP_DPKG_SCANPACKAGES:-}" = 1 ]; then t_dsp=0 m_dsp=0; else read -r t_dsp m_dsp < <(measure "$dir" dpkg-scanpackages -m pool /dev/null); fi
  echo "== $n debs"
  printf '  debforge index, cold   %7.2f s  %7s KB\n' "$t_cold" "$m_cold"
  printf '  debforge index, warm   %7.2f s  %7s KB\n' "$t_warm" "$m_warm"
  printf '  apt-ftparchive         %7.2f s  %7s KB\n' "$t_aft" "$m_aft"
  printf '  dpkg-scanpackages      %7.2f s  %7s KB\n' "$t_dsp" "$m_dsp"
  echo "  cold/apt-ftparchive $(ratio "$t_cold" "$t_aft"); warm/cold $(ratio "$t_warm" "$t_cold"); cold/dpkg-scanpackages $(ratio "$t_cold" "$t_dsp")"
done
