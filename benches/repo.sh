#!/usr/bin/env bash
# Benchmark (not a test): the whole signed repository for N debs (pool,
# Packages/.gz/.xz, Release, Release.gpg, InRelease) with `debforge build`
# against aptly (`repo add` + `publish`) and reprepro (`includedeb`), in one
# run, all signing with an Ed25519 key.
# Each figure is the best wall time of ROUNDS runs (default 3; its peak RSS
# beside it): one slow run of a noisy disk moved a ratio by a third.
#   bash benches/repo.sh [N]     (default 5000; needs aptly and reprepro)
#   DEBFORGE=/path/to/debforge bash benches/repo.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
rounds=${ROUNDS:-3}
# DEBFORGE=BIN measures another build of debforge (an earlier one, for a
# before and after on the same machine).
if [ -n "${DEBFORGE:-}" ]; then bin=$DEBFORGE; else
  cargo build --release -q
  bin=$PWD/target/release/debforge
fi
pool=/tmp/debforge-bench-pool-$n
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$n" "$pool"
work=$(mktemp -d /tmp/debforge-repo-bench.XXXXXX)
trap 'gpgconf --homedir "$work/gnupg" --kill all 2>/dev/null || true; rm -rf "$work"' EXIT
# best CMD…: the best wall time of $rounds runs and that run's peak RSS;
# $setup runs (unmeasured) before each. Timed by bash's clock to the
# microsecond (time(1)'s %e is to the hundredth: a 0.2 s build would read
# as 0.20 or 0.21, a ratio moved by 5%).
best() {
  local b=999999 m=0 t r start
  for _ in $(seq "$rounds"); do
    eval "$setup"
    start=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    t=$(awk -v a="$EPOCHREALTIME" -v s="$start" 'BEGIN { printf "%.4f", a - s }')
    read -r r < "$work/t"
    if awk -v a="$t" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$t; m=$r; fi
  done
  echo "$b $m"
}

# Keys: debforge's own, and a GnuPG one for aptly and reprepro.
"$bin" keygen --keys "$work/keys" --name "bench" >/dev/null 2>&1
export GNUPGHOME=$work/gnupg; mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key 'bench <bench@example.org>' ed25519 sign never
fpr=$(gpg --with-colons --list-keys bench | awk -F: '/^fpr/ {print $10; exit}')

# debforge: one path recipe per deb.
mkdir -p "$work/recipes/packages"
find "$pool/pool" -name '*.deb' | sort | while read -r f; do
  b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=${rest%_*}; arch=${rest##*_}
  printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\n' "$name" "$version" "$arch" "$f" > "$work/recipes/packages/$name.toml"
done
build=("$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/repo-out")
victim=$(ls "$work"/recipes/packages/*.toml | sed -n "$((n / 2))p")
cp "$victim" "$work/victim"
setup='cp "$work/victim" "$victim"; rm -rf "$work/cache" "$work/repo-out" "$work"/.repo-out.* "$work/recipes/debforge.lock"'
read -r t_df m_df < <(best "${build[@]}")
setup=:
read -r t_df2 m_df2 < <(best "${build[@]}" --locked)
# One recipe of N gone: the lock, one pool file and the indexes change.
# (Before each: the recipe back and built, unmeasured.)
setup='cp "$work/victim" "$victim"; "${build[@]}" >/dev/null 2>&1; rm "$victim"'
read -r t_df3 m_df3 < <(best "${build[@]}")
# The same once the pool is older than the racy window. A build takes the
# last build's listing of a pool directory only where the directory did not
# change in the 2 s before that listing (file times are coarse: FAT's are
# 2 s), so the builds above, within seconds of the cold ones that made the
# pool, list all of it again. A lab's next build comes minutes later.
setup='sleep 2.1; cp "$work/victim" "$victim"; "${build[@]}" >/dev/null 2>&1; rm "$victim"'
read -r t_df4 m_df4 < <(best "${build[@]}")

# aptly
cat > "$work/aptly.conf" <<JSON
{ "rootDir": "$work/aptly", "architectures": ["amd64"], "gpgProvider": "gpg" }
JSON
setup='rm -rf "$work/aptly"; aptly -config="$work/aptly.conf" repo create -distribution=bionic -component=main lab >/dev/null'
read -r t_ap m_ap < <(best bash -c "aptly -config='$work/aptly.conf' repo add lab '$pool/pool' && aptly -config='$work/aptly.conf' publish repo -gpg-key=$fpr -batch lab")

# reprepro
setup='rm -rf "$work/reprepro"; mkdir -p "$work/reprepro/conf"; printf "Codename: bionic\nArchitectures: amd64\nComponents: main\nSignWith: %s\n" "$fpr" > "$work/reprepro/conf/distributions"'
read -r t_rp m_rp < <(best bash -c "find '$pool/pool' -name '*.deb' -print0 | xargs -0 reprepro -b '$work/reprepro' includedeb bionic")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== whole signed repository, $n debs, best of $rounds"
printf '  debforge build (cold cache)   %7.3f s  %8s KB\n' "$t_df" "$m_df"
printf '  debforge build --locked again %7.3f s  %8s KB\n' "$t_df2" "$m_df2"
printf '  debforge build, one recipe gone, within 2 s of the pool made %5.3f s  %8s KB\n' "$t_df3" "$m_df3"
printf '  debforge build, one recipe gone, the pool older %7.3f s  %8s KB\n' "$t_df4" "$m_df4"
printf '  aptly repo add + publish      %7.3f s  %8s KB\n' "$t_ap" "$m_ap"
printf '  reprepro includedeb           %7.3f s  %8s KB\n' "$t_rp" "$m_rp"
faster=$(awk -v a="$t_ap" -v b="$t_rp" 'BEGIN { print (a < b) ? a : b }')
echo "  debforge/aptly $(ratio "$t_df" "$t_ap"); debforge/reprepro $(ratio "$t_df" "$t_rp"); debforge/faster $(ratio "$t_df" "$faster") (goal <= 0.5)"
echo "  again/cold $(ratio "$t_df2" "$t_df"); one recipe gone/cold $(ratio "$t_df4" "$t_df"), within 2 s of the pool made $(ratio "$t_df3" "$t_df") (goal <= 0.2 each)"
