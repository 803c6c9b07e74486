#!/usr/bin/env bash
# Benchmark (not a test): peak RSS of a cold `debforge build` of N small
# packages against reprepro's `includedeb` of the same debs, for N in SIZES
# (default 1000 5000 20000), and the curve: how memory grows with the count.
# Goal (issue 24): at 5,000, at most 2x reprepro's; the curve flat. Each
# figure is the least of ROUNDS runs (default 3; a run's peak moved by a
# megabyte or two); "growth" is what each 1,000 more packages cost from the
# size before (the slope: flat is what reprepro's is). "locked" is the same
# cold build with --locked and the lock the first wrote (what a lab's CI
# runs: the lock file is read and compared, nothing else cached).
#   bash benches/memory.sh            (needs reprepro; makes a 20,000-deb pool once)
# DEBFORGE=/abs/path/BIN measures another build of debforge (one copied
# aside: a rebuild of target/ during the run does not change what is
# measured; a relative path is taken from the repository's root).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${SIZES:-1000 5000 20000}
max=$(echo "$sizes" | tr ' ' '\n' | sort -n | tail -1)
if [ -n "${DEBFORGE:-}" ]; then bin=$DEBFORGE; else
  cargo build --release -q
  bin=$PWD/target/release/debforge
fi
pool=/tmp/debforge-bench-pool-$max
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$max" "$pool" >/dev/null
work=$(mktemp -d /tmp/debforge-memory-bench.XXXXXX)
trap 'gpgconf --homedir "$work/gnupg" --kill all 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" keygen --keys "$work/keys" --name bench >/dev/null 2>&1
export GNUPGHOME=$work/gnupg; mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key 'bench <bench@example.org>' ed25519 sign never 2>/dev/null
fpr=$(gpg --with-colons --list-keys bench | awk -F: '/^fpr/ {print $10; exit}')
find "$pool/pool" -name '*.deb' | sort > "$work/all"
rounds=${ROUNDS:-3}
# rss CMD…: the least peak RSS of $rounds runs; $setup runs before each.
rss() {
  local least=999999999 m
  for _ in $(seq "$rounds"); do
    eval "$setup"
    /usr/bin/time -f "%M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    m=$(cat "$work/t"); [ "$m" -lt "$least" ] && least=$m
  done
  echo "$least"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# KB per 1,000 packages from the size before (blank at the first).
growth() { if [ -n "$4" ]; then awk -v a="$1" -v b="$2" -v n="$3" -v p="$4" 'BEGIN { printf "%.0f", (a - b) * 1000 / (n - p) }'; fi; }
echo "== peak RSS of a cold build (KB), least of $rounds"
printf '  %8s %12s %12s %8s %16s %16s %12s %14s\n' packages debforge reprepro ratio "growth debforge" "growth reprepro" locked "growth locked"
prev_n='' prev_df='' prev_rp='' prev_lk=''
for n in $sizes; do
  r=$work/r-$n; mkdir -p "$r/packages"
  head -n "$n" "$work/all" | while read -r f; do
    b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=${rest%_*}; arch=${rest##*_}
    printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\n' "$name" "$version" "$arch" "$f" > "$r/packages/$name.toml"
  done
  setup='rm -rf "$work/out-$n" "$work/.out-$n."* "$work/cache-$n" "$r/debforge.lock"'
  m_df=$(rss "$bin" build --recipes "$r" --cache "$work/cache-$n" --keys "$work/keys" --out "$work/out-$n")
  setup='rm -rf "$work/out-$n" "$work/.out-$n."* "$work/cache-$n"'
  m_lk=$(rss "$bin" build --locked --recipes "$r" --cache "$work/cache-$n" --keys "$work/keys" --out "$work/out-$n")
  setup='rm -rf "$work/rp-$n"; mkdir -p "$work/rp-$n/conf"; printf "Codename: bionic\nArchitectures: amd64\nComponents: main\nSignWith: %s\n" "$fpr" > "$work/rp-$n/conf/distributions"'
  m_rp=$(rss bash -c "head -n $n '$work/all' | xargs reprepro -b '$work/rp-$n' includedeb bionic")
  printf '  %8d %12d %12d %8s %16s %16s %12d %14s\n' "$n" "$m_df" "$m_rp" "$(ratio "$m_df" "$m_rp")" \
    "$(growth "$m_df" "$prev_df" "$n" "$prev_n")" "$(growth "$m_rp" "$prev_rp" "$n" "$prev_n")" \
    "$m_lk" "$(growth "$m_lk" "$prev_lk" "$n" "$prev_n")"
  prev_n=$n prev_df=$m_df prev_rp=$m_rp prev_lk=$m_lk
  rm -rf "$work/out-$n" "$work/.out-$n."* "$work/rp-$n" "$work/cache-$n"
done
