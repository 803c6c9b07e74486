#!/usr/bin/env bash
# Benchmark (not a test): the pure-Rust crypto backend (the default: it
# builds on a fresh machine) against sequoia's OpenSSL backend (the one
# debforge used before), side by side in one run: key generation, InRelease
# signing, InRelease and Release.gpg verification, Ed25519 and RSA-4096.
#   bash benches/crypto.sh      (the OpenSSL build needs libssl-dev, pkg-config, libclang-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/debforge-crypto-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cargo bench -q --bench crypto 2>/dev/null | tee "$work/rust"
CARGO_TARGET_DIR=target/bench-openssl cargo bench -q --bench crypto --no-default-features --features crypto-openssl 2>/dev/null | tee "$work/openssl"
echo "== pure Rust / OpenSSL (rates: above 1 means Rust is faster; keygen: time, below 1 means Rust is faster)"
join "$work/rust" "$work/openssl" | awk '{
  printf "  %-8s keygen time %.2fx  sign %.2fx  verify InRelease %.2fx  verify Release.gpg %.2fx\n",
    $1, $3 / $11, $5 / $13, $7 / $15, $9 / $17 }'
