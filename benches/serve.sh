#!/usr/bin/env bash
# Benchmark (not a test): `debforge serve` against nginx on the same file,
# with wrk on loopback, side by side in one run (the machine is noisy).
# Goal (issue 23): p99 latency at most nginx's under `wrk -t2 -c64` on a
# 5 MB file. Prints both, the ratio, and PASS/FAIL (exit 1 on FAIL).
#   bash benches/serve.sh [DIR PATH]   (default: a 5 MB file made here)
#   needs: wrk, nginx (apt-get install wrk nginx)
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { echo "serve.sh: needs $tool (apt-get install $tool)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/debforge-serve-bench.XXXXXX)
if [ $# -ge 1 ]; then
  dir=$(cd "$1" && pwd); path=${2:?usage: serve.sh [DIR PATH]}
else
  dir=$work/root; path=pool/main/big_1.0_amd64.deb
  mkdir -p "$dir/pool/main"
  head -c $((5 * 1024 * 1024)) /dev/urandom > "$dir/$path"
fi
cargo build --release -q
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p1=$(port); p2=$(port)
./target/release/debforge serve --listen "127.0.0.1:$p1" --out "$dir" >/dev/null 2>/dev/null & ours=$!
cat > "$work/nginx.conf" <<CONF
daemon off; user root; worker_processes auto; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; default_type application/octet-stream;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen 127.0.0.1:$p2; root $dir; } }
CONF
nginx -c "$work/nginx.conf" -p "$work" </dev/null >/dev/null 2>&1 &
trap 'kill $ours 2>/dev/null; nginx -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null; rm -rf "$work"' EXIT
sleep 1
# Both must serve the same bytes before their speed means anything.
cmp <(curl -sf "http://127.0.0.1:$p1/$path") "$dir/$path"
cmp <(curl -sf "http://127.0.0.1:$p2/$path") "$dir/$path"
# p99 in milliseconds, requests/s.
run() {
  wrk -t2 -c64 -d10s --latency "$1" | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ {rps=$2} /^ +99%/ {p99=ms($2)} END {print rps, p99}'
}
# Three rounds, the two servers alternating; the median round of each.
rounds=${ROUNDS:-3}
: > "$work/ours"; : > "$work/nginx"
echo "== GET /$path ($(stat -c %s "$dir/$path") bytes), wrk -t2 -c64 -d10s, $rounds rounds"
for i in $(seq "$rounds"); do
  run "http://127.0.0.1:$p1/$path" | tee -a "$work/ours" | sed 's/^/  round '"$i"' debforge: req\/s, p99 ms: /'
  run "http://127.0.0.1:$p2/$path" | tee -a "$work/nginx" | sed 's/^/  round '"$i"' nginx:    req\/s, p99 ms: /'
done
median() { sort -n -k"$1" "$2" | awk -v k="$1" '{v[NR]=$k} END {print v[int((NR+1)/2)]}'; }
r1=$(median 1 "$work/ours"); l1=$(median 2 "$work/ours")
r2=$(median 1 "$work/nginx"); l2=$(median 2 "$work/nginx")
echo "  debforge serve  $r1 req/s  p99 ${l1} ms (medians)"
echo "  nginx           $r2 req/s  p99 ${l2} ms (medians)"
awk -v a="$r1" -v b="$r2" -v la="$l1" -v lb="$l2" 'BEGIN {
  printf "  requests/s ratio debforge/nginx: %.2f\n", a / b
  printf "  p99 ratio debforge/nginx: %.2f (goal <= 1.00): %s\n", la / lb, (la <= lb ? "PASS" : "FAIL")
  exit (la <= lb ? 0 : 1) }'
