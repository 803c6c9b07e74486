#!/usr/bin/env bash
# Benchmark (not a test): the whole signed repository for N debs (pool,
# Packages/.gz/.xz, Release, Release.gpg, InRelease) with `debforge build`
# against aptly (`repo add` + `publish`) and reprepro (`includedeb`), in one
# run, all signing with an Ed25519 key.
#   bash benches/repo.sh [N]     (default 5000; needs aptly and reprepro)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
cargo build --release -q
bin=$PWD/target/release/debforge
pool=/tmp/debforge-bench-pool-$n
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$n" "$pool"
work=$(mktemp -d /tmp/debforge-repo-bench.XXXXXX)
trap 'gpgconf --homedir "$work/gnupg" --kill all 2>/dev/null || true; rm -rf "$work"' EXIT
measure() { /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; cat "$work/t"; }

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
read -r t_df m_df < <(measure "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/repo-out")
read -r t_df2 m_df2 < <(measure "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/repo-out" --locked)
# One recipe of N gone: the lock, one pool file and the indexes change.
rm "$(ls "$work"/recipes/packages/*.toml | sed -n "$((n / 2))p")"
read -r t_df3 m_df3 < <(measure "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/repo-out")

# aptly
cat > "$work/aptly.conf" <<JSON
{ "rootDir": "$work/aptly", "architectures": ["amd64"], "gpgProvider": "gpg" }
JSON
aptly -config="$work/aptly.conf" repo create -distribution=bionic -component=main lab >/dev/null
read -r t_ap m_ap < <(measure bash -c "aptly -config='$work/aptly.conf' repo add lab '$pool/pool' && aptly -config='$work/aptly.conf' publish repo -gpg-key=$fpr -batch lab")

# reprepro
mkdir -p "$work/reprepro/conf"
printf 'Codename: bionic\nArchitectures: amd64\nComponents: main\nSignWith: %s\n' "$fpr" > "$work/reprepro/conf/distributions"
read -r t_rp m_rp < <(measure bash -c "find '$pool/pool' -name '*.deb' -print0 | xargs -0 reprepro -b '$work/reprepro' includedeb bionic")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== whole signed repository, $n debs"
printf '  debforge build (cold cache)   %7.2f s  %8s KB\n' "$t_df" "$m_df"
printf '  debforge build --locked again %7.2f s  %8s KB\n' "$t_df2" "$m_df2"
printf '  debforge build, one recipe gone %5.2f s  %8s KB\n' "$t_df3" "$m_df3"
printf '  aptly repo add + publish      %7.2f s  %8s KB\n' "$t_ap" "$m_ap"
printf '  reprepro includedeb           %7.2f s  %8s KB\n' "$t_rp" "$m_rp"
faster=$(awk -v a="$t_ap" -v b="$t_rp" 'BEGIN { print (a < b) ? a : b }')
echo "  debforge/aptly $(ratio "$t_df" "$t_ap"); debforge/reprepro $(ratio "$t_df" "$t_rp"); debforge/faster $(ratio "$t_df" "$faster") (goal <= 0.5)"
echo "  again/cold $(ratio "$t_df2" "$t_df"); one recipe gone/cold $(ratio "$t_df3" "$t_df") (goal <= 0.2 each)"
