#!/usr/bin/env bash
# Benchmark (not a test): `debforge fetch` of a 200 MB file from a loopback
# HTTP server against `curl -o` + `sha256sum` of the same file, in one run.
#   bash benches/fetch.sh [SIZE_MB]     (default 200; RUNS=3)
# Prints best wall times, peak RSS, and the ratio debforge/curl.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-200}
runs=${RUNS:-3}
cargo build --release -q
bin=$PWD/target/release/debforge
work=$(mktemp -d /tmp/debforge-fetch-bench.XXXXXX)
cleanup() { [ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

mkdir -p "$work/www" "$work/project/recipes/packages"
head -c $((size_mb * 1024 * 1024)) /dev/urandom > "$work/www/big.deb"
sha=$(sha256sum "$work/www/big.deb" | cut -d' ' -f1)
size=$(stat -c %s "$work/www/big.deb")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
url="http://127.0.0.1:$port/big.deb"
cat > "$work/project/recipes/packages/big.toml" <<TOML
name = "big"
version = "1.0"
architecture = "all"
from = { url = "$url", sha256 = "$sha", size = $size }
TOML

best() { sort -g | head -1; }
t_curl=(); t_ours=(); rss_ours=0; rss_curl=0
for i in $(seq "$runs"); do
  rm -f "$work/curl.bin"
  /usr/bin/time -f "%e %M" -o "$work/t" bash -c "curl -s -o '$work/curl.bin' '$url' && sha256sum '$work/curl.bin' >/dev/null"
  read -r t m < "$work/t"; t_curl+=("$t"); rss_curl=$m
  rm -rf "$work/cache"
  /usr/bin/time -f "%e %M" -o "$work/t" "$bin" fetch --recipes "$work/project/recipes" --cache "$work/cache" >/dev/null 2>&1
  read -r t m < "$work/t"; t_ours+=("$t"); rss_ours=$m
done
bc=$(printf '%s\n' "${t_curl[@]}" | best); bo=$(printf '%s\n' "${t_ours[@]}" | best)
printf 'file: %s MB over loopback, best of %s\n' "$size_mb" "$runs"
printf 'curl -o + sha256sum: %6.2f s  (RSS of the last step %s KB)\n' "$bc" "$rss_curl"
printf 'debforge fetch:      %6.2f s  peak RSS %s KB (SHA256 and SHA512 checked)\n' "$bo" "$rss_ours"
awk -v a="$bo" -v b="$bc" 'BEGIN { printf "ratio debforge/curl: %.2f\n", a / b }'
