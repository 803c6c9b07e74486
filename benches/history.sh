#!/usr/bin/env bash
# Benchmark (not a test): a build's time and peak RSS as the output's
# history grows. N packages (default 5000); each round removes one recipe,
# then puts it back (two builds, two generations); the build with one
# recipe gone is measured after the first round and after ROUNDS (default
# 15, so 30 generations). A build needs the last generation or few, never
# the whole history: the ratio late/early should stay near 1 (fails above
# 1.25 for time or memory).
#   bash benches/history.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
rounds=${ROUNDS:-15}
cargo build --release -q
bin=$PWD/target/release/debforge
pool=/tmp/debforge-bench-pool-$n
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$n" "$pool" >/dev/null
work=$(mktemp -d /tmp/debforge-history-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" keygen --keys "$work/keys" --name bench >/dev/null 2>&1
mkdir -p "$work/recipes/packages"
find "$pool/pool" -name '*.deb' | sort | while read -r f; do
  b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=${rest%_*}; arch=${rest##*_}
  printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\n' "$name" "$version" "$arch" "$f" > "$work/recipes/packages/$name.toml"
done
args=(build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/out")
build() { "$bin" "${args[@]}"; }
measure() { /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; cat "$work/t"; }
build >/dev/null 2>&1
victim=$(ls "$work"/recipes/packages/*.toml | sed -n "$((n / 2))p")
cp "$victim" "$work/victim.toml"
# One round: the recipe gone (measured), then back.
# (Its line is printed last: `read < <(round)` returns at the first line,
# and the build that puts the recipe back must be over by then.)
round() {
  rm "$victim"
  local line; line=$(measure "$bin" "${args[@]}")
  cp "$work/victim.toml" "$victim"
  build >/dev/null 2>&1
  echo "$line"
}
read -r t_early m_early < <(round)
for _ in $(seq 2 "$rounds"); do round >/dev/null; done
read -r t_late m_late < <(round)
generations=$(ls "$work/.out.generations" | grep -c '\.json$')
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== one recipe of $n gone, as the history grows"
printf '  after 3 generations:  %5.2f s %8s KB\n' "$t_early" "$m_early"
printf '  after %d generations: %5.2f s %8s KB\n' "$generations" "$t_late" "$m_late"
rt=$(ratio "$t_late" "$t_early"); rm_=$(ratio "$m_late" "$m_early")
echo "  late/early: time $rt, memory $rm_ (goal <= 1.25 each: flat in the history)"
awk -v a="$rt" -v b="$rm_" 'BEGIN { exit !(a <= 1.25 && b <= 1.25) }' && echo "  PASS" || { echo "  FAIL"; exit 1; }
