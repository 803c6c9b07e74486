#!/usr/bin/env bash
# Benchmark (not a test): mutation fuzz of the package reader, and the
# bombs, under a 2 GB address-space limit. Counts panics (exit 101), aborts
# (signals), exit 0 on a package dpkg-deb refuses, and the peak RSS.
#   bash benches/fuzz.sh [N per base]   (default 1000; 3 bases: none, gzip, xz)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
cargo build --release -q
bin=$PWD/target/release/debforge
work=$(mktemp -d /tmp/debforge-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=1556000000
runs=0 panics=0 aborts=0 accepted_bad=0 peak=0
check() { # FILE DEBFORGE-ARGS… -- DPKG-DEB-FLAG
  local f=$1 flag=${*: -1}; local args=("${@:2:$#-3}")
  local code=0
  ( ulimit -v 2097152; /usr/bin/time -f "%M" -o "$work/rss" "$bin" "${args[@]}" "$f" >/dev/null 2>"$work/err" ) || code=$?
  runs=$((runs + 1))
  rss=$(tail -n1 "$work/rss" 2>/dev/null || echo 0); [[ $rss =~ ^[0-9]+$ ]] || rss=0
  (( rss > peak )) && peak=$rss
  if grep -q panicked "$work/err"; then panics=$((panics + 1)); echo "panic: $f ${args[*]}"; fi
  if (( code > 2 )); then aborts=$((aborts + 1)); echo "exit $code: $f ${args[*]}"; fi
  if (( code == 0 )) && ! dpkg-deb "$flag" "$f" >/dev/null 2>&1; then accepted_bad=$((accepted_bad + 1)); echo "accepted, dpkg-deb refuses: $f ${args[*]}"; fi
}
for z in none gzip xz; do
  "$bin" deb build -Z "$z" recipes/trees/debforge-hello -o "$work/base-$z.deb" >/dev/null
  python3 tests/fixtures/make-mutants.py "$work/base-$z.deb" "$work/m-$z" "$n"
  for f in "$work/m-$z"/*.deb; do
    check "$f" deb info -- --info
    check "$f" deb contents -- --contents
  done
done
python3 tests/fixtures/make-bombs.py "$work/bombs"
for f in "$work/bombs"/*.deb; do
  check "$f" deb info -- --info
  check "$f" deb contents -- --contents
  echo "bomb $(basename "$f"): peak RSS $(tail -n1 "$work/rss") KB"
done
echo "== mutation fuzz: $runs runs on $((3 * n)) mutants and $(ls "$work/bombs" | wc -l) bombs (2 GB limit)"
echo "  panics $panics, aborts $aborts, exit 0 where dpkg-deb refuses $accepted_bad, peak RSS $peak KB"
