#!/usr/bin/env bash
# Benchmark (not a test): `debforge deb repack` of a large real package,
# adding a postinst, against in the same run (a) the floor, `cp` plus
# `openssl dgst -sha256` of the copy, and (b) the manual way, `dpkg-deb -R`
# then `dpkg-deb -b`.
#   DEB=/path/to/libcublaslt11_*.deb bash benches/repack.sh
# Get the package (206 MB) with a scratch sources list adding non-free:
#   mkdir -p /tmp/nf/lists/partial /tmp/nf/cache/archives/partial
#   echo 'deb http://deb.debian.org/debian bookworm main contrib non-free' > /tmp/nf/sources.list
#   o="-o Dir::Etc::SourceList=/tmp/nf/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=/tmp/nf/lists -o Dir::Cache=/tmp/nf/cache"
#   apt-get $o update && (cd /tmp/nf && apt-get $o download libcublaslt11)
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${DEB:-$(ls /tmp/nf/libcublaslt11_*.deb /tmp/nf/dl/libcublaslt11_*.deb 2>/dev/null | head -1 || true)}
[ -f "$deb" ] || { echo "set DEB to a large .deb (see the comment at the top)" >&2; exit 2; }
cargo build --release -q
bin=$PWD/target/release/debforge
work=$(mktemp -d /tmp/debforge-repack-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf '#!/bin/sh\nset -e\nldconfig\n' > "$work/postinst"; chmod 755 "$work/postinst"
measure() { /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; cat "$work/t"; }
best() { local b=999999 m=0 t mm; for _ in 1 2 3; do read -r t mm < <(measure "$@"); if awk -v a="$t" -v b="$b" 'BEGIN{exit !(a<b)}'; then b=$t; m=$mm; fi; rm -f "$work"/out*.deb; done; echo "$b $m"; }
read -r t_ours m_ours < <(best "$bin" deb repack "$deb" -o "$work/out.deb" --postinst "$work/postinst")
read -r t_floor m_floor < <(best bash -c "cp '$deb' '$work/out2.deb' && openssl dgst -sha256 '$work/out2.deb'")
read -r t_manual m_manual < <(measure bash -c "dpkg-deb -R '$deb' '$work/tree' && cp '$work/postinst' '$work/tree/DEBIAN/postinst' && dpkg-deb -b '$work/tree' '$work/out3.deb'")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== repack of $(basename "$deb") ($(stat -c %s "$deb") bytes), adding a postinst"
printf '  debforge deb repack        %8.2f s  %8s KB RSS (best of 3)\n' "$t_ours" "$m_ours"
printf '  cp + openssl dgst -sha256  %8.2f s  %8s KB RSS (best of 3)\n' "$t_floor" "$m_floor"
printf '  dpkg-deb -R + dpkg-deb -b  %8.2f s  %8s KB RSS\n' "$t_manual" "$m_manual"
echo "  debforge/floor $(ratio "$t_ours" "$t_floor"); manual/debforge $(ratio "$t_manual" "$t_ours")"
