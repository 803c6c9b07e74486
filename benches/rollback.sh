#!/usr/bin/env bash
# Benchmark (not a test): rolling a published N-package repository back to
# the previous generation on a directory target (`debforge rollback`),
# against aptly switching its published distribution back to the previous
# snapshot (`aptly publish switch`), in one run, both signing with Ed25519.
# Generation 2 drops 10 packages and adds none; the rollback brings them back.
# Prints the time and what the rollback wrote (goal: only indexes and Release
# files, no pool file copied).
#   bash benches/rollback.sh [N]     (default 5000; needs aptly)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
cargo build --release -q
bin=$PWD/target/release/debforge
pool=/tmp/debforge-bench-pool-$n
[ -d "$pool/pool" ] || bash benches/gen-pool.sh "$n" "$pool"
work=$(mktemp -d /tmp/debforge-rollback-bench.XXXXXX)
trap 'gpgconf --homedir "$work/gnupg" --kill all 2>/dev/null || true; rm -rf "$work"' EXIT
measure() { /usr/bin/time -f "%e %M" -o "$work/t" "$@" >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }; cat "$work/t"; }

"$bin" keygen --keys "$work/keys" --name "bench" >/dev/null 2>&1
export GNUPGHOME=$work/gnupg; mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key 'bench <bench@example.org>' ed25519 sign never
fpr=$(gpg --with-colons --list-keys bench | awk -F: '/^fpr/ {print $10; exit}')

mkdir -p "$work/recipes/packages"
find "$pool/pool" -name '*.deb' | sort | while read -r f; do
  b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=${rest%_*}; arch=${rest##*_}
  printf 'name = "%s"\nversion = "%s"\narchitecture = "%s"\nfrom = { path = "%s" }\n' "$name" "$version" "$arch" "$f" > "$work/recipes/packages/$name.toml"
done
build() { "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/repo-out" >/dev/null 2>&1; }
publish() { "$bin" publish --to "$work/www" --out "$work/repo-out" >/dev/null; }
build; publish
dropped=$(ls "$work/recipes/packages" | sed -n 1,10p)
for r in $dropped; do rm "$work/recipes/packages/$r"; done
build; publish
before=$(find "$work/www/pool" -type f | wc -l)
read -r t_df m_df < <(measure "$bin" rollback --to "$work/www" --out "$work/repo-out" --keys "$work/keys" --cache "$work/cache")
copied=$(grep -c '^copied ' "$work/out" || true)
copied_pool=$(grep -c '^copied      pool/' "$work/out" || true)
listed=$(grep -c '^Package: ' "$work/www/dists/bionic/main/binary-amd64/Packages")
[ "$listed" = "$n" ] || { echo "rollback left $listed packages listed, not $n" >&2; exit 1; }

# aptly: the same two states as snapshots, the second published, then switched back.
cat > "$work/aptly.conf" <<JSON
{ "rootDir": "$work/aptly", "architectures": ["amd64"], "gpgProvider": "gpg" }
JSON
a() { aptly -config="$work/aptly.conf" "$@" >/dev/null; }
a repo create -distribution=bionic -component=main lab
a repo add lab "$pool/pool"
a snapshot create s1 from repo lab
for r in $dropped; do a repo remove lab "Name (${r%.toml})"; done
a snapshot create s2 from repo lab
a publish snapshot -gpg-key="$fpr" -batch s2
read -r t_ap m_ap < <(measure aptly -config="$work/aptly.conf" publish switch -gpg-key="$fpr" -batch bionic s1)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== rollback of a published $n-package repository to the previous generation (directory target)"
printf '  debforge rollback          %7.2f s  %8s KB  files copied: %s (pool files: %s; pool on target: %s)\n' "$t_df" "$m_df" "$copied" "$copied_pool" "$before"
printf '  aptly publish switch       %7.2f s  %8s KB\n' "$t_ap" "$m_ap"
echo "  debforge/aptly $(ratio "$t_df" "$t_ap") (goal <= 1.0)"
