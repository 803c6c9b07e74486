#!/usr/bin/env bash
# Benchmark (not a test): `debforge serve` against nginx on the same files,
# with wrk on loopback (bounded: 10 s, 2 threads, 32 connections each).
#   bash benches/serve.sh DIR [PATH]    (DIR: a built repository; PATH: the file to fetch)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cd "${1:?usage: serve.sh DIR [PATH]}" && pwd)
path=${2:-dists/bionic/Release}
cargo build --release -q
work=$(mktemp -d /tmp/debforge-serve-bench.XXXXXX)
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
run() { wrk -t2 -c32 -d10s --latency "$1" | awk '/Requests\/sec/ {rps=$2} /^ +99%/ {p99=$2} END {print rps, p99}'; }
read -r r1 l1 < <(run "http://127.0.0.1:$p1/$path")
read -r r2 l2 < <(run "http://127.0.0.1:$p2/$path")
echo "== GET /$path, wrk -t2 -c32 -d10s"
echo "  debforge serve  $r1 req/s  p99 $l1"
echo "  nginx           $r2 req/s  p99 $l2"
awk -v a="$r1" -v b="$r2" 'BEGIN { printf "  requests/s ratio debforge/nginx: %.2f\n", a / b }'
