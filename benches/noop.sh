#!/usr/bin/env bash
# Benchmark (not a test): a no-op `debforge build --locked` (nothing changed
# since the last build) against a plain stat walk of the output
# (`find repo-out -printf '%s %T@'`), which is the least any tool must do to
# notice that nothing changed; and the peak RSS of the cold build for two
# sizes, to see that memory does not grow with the number of packages.
#   bash benches/noop.sh [N]     (default 5000 small packages; also one 300 MB package)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
small=${SMALL:-1000}
cargo build --release -q
bin=$PWD/target/release/debforge
work=$(mktemp -d /tmp/debforge-noop-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=1556000000
"$bin" keygen --keys "$work/keys" --name bench >/dev/null 2>&1

# The best of 9 runs (seconds), and the peak RSS (KB) of the last.
# Timed by bash's clock to the microsecond (time(1)'s %e is to the
# hundredth: a 20 ms walk would read as 0.02 or 0.03).
best() {
  local b=999999 t start
  for _ in 1 2 3 4 5 6 7 8 9; do
    start=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    t=$(awk -v a="$EPOCHREALTIME" -v s="$start" 'BEGIN { printf "%.4f", a - s }')
    b=$(awk -v a="$t" -v b="$b" 'BEGIN { print (a < b) ? a : b }')
  done
  echo "$b $(cat "$work/t")"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b < 0.005) b = 0.005; printf "%.2f", a / b }'; }

# recipes with one path recipe per deb under $1, into $2
recipes_for() {
  mkdir -p "$2/packages"
  find "$1" -name '*.deb' | sort | while read -r f; do
    b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=${rest%_*}; arch=${rest##*_}
    printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\n' "$name" "$version" "$arch" "$f" > "$2/packages/$name.toml"
  done
}

# build RECIPES NAME [ARGS…]: the command line of a build (for `best`).
b() { echo "$bin" build --recipes "$1" --cache "$work/cache-$2" --keys "$work/keys" --out "$work/out-$2" "${@:3}"; }
build() { $(b "$@"); }

# 1. one 300 MB package (incompressible data, stored without compression)
big=$work/big; mkdir -p "$big/tree/DEBIAN" "$big/tree/usr/share/big" "$big/debs"
printf 'Package: big-data\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: bench <bench@example.org>\nDescription: 300 MB\n big.\n' > "$big/tree/DEBIAN/control"
head -c 300M /dev/urandom > "$big/tree/usr/share/big/blob"
"$bin" deb build "$big/tree" -o "$big/debs/" -Z none >/dev/null
rm -rf "$big/tree"
recipes_for "$big/debs" "$work/r-big"
build "$work/r-big" big >/dev/null 2>&1
build "$work/r-big" big --locked >/dev/null 2>&1
read -r t_big m_big < <(best $(b "$work/r-big" big --locked))
read -r t_walk_big _ < <(best find "$work/out-big" -printf '%s %T@\n')
read -r t_cp _ < <(best cp "$big/debs/big-data_1.0-1_amd64.deb" "$work/copy.deb")

# 2. N small packages, and SMALL of them for the memory comparison
pool=/tmp/debforge-bench-pool-$n
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$n" "$pool" >/dev/null
recipes_for "$pool/pool" "$work/r-many"
read -r t_cold m_cold < <(/usr/bin/time -f "%e %M" -o "$work/t" $(b "$work/r-many" many) >/dev/null 2>&1; cat "$work/t")
read -r t_many m_many < <(best $(b "$work/r-many" many --locked))
read -r t_walk_many _ < <(best find "$work/out-many" -printf '%s %T@\n')
mkdir -p "$work/r-few/packages"
ls "$work/r-many/packages" | sed -n "1,${small}p" | while read -r f; do cp "$work/r-many/packages/$f" "$work/r-few/packages/"; done
read -r t_few_cold m_few_cold < <(/usr/bin/time -f "%e %M" -o "$work/t" $(b "$work/r-few" few) >/dev/null 2>&1; cat "$work/t")

echo "== no-op build --locked (best of 9)"
printf '  one 300 MB package:  debforge %6.3f s   stat walk %6.3f s   cp of the file %6.2f s   ratio to walk %s\n' "$t_big" "$t_walk_big" "$t_cp" "$(ratio "$t_big" "$t_walk_big")"
printf '  %d small packages: debforge %6.3f s   stat walk %6.3f s   ratio to walk %s (goal <= 2.0)\n' "$n" "$t_many" "$t_walk_many" "$(ratio "$t_many" "$t_walk_many")"
echo "== peak RSS of a cold build"
printf '  %5d packages: %8s KB (%.2f s)\n' "$small" "$m_few_cold" "$t_few_cold"
printf '  %5d packages: %8s KB (%.2f s)   ratio %s\n' "$n" "$m_cold" "$t_cold" "$(ratio "$m_cold" "$m_few_cold")"
echo "  no-op 300 MB build peak RSS: $m_big KB"
