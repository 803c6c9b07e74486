#!/usr/bin/env bash
# Benchmark (not a test): the lab's real case. A signed repository of 12 real
# NVIDIA-built debs (Debian's CUDA 11.8 libraries from bookworm non-free,
# ~554 MB, downloaded by apt at bench time into ~/.cache/debforge-bench/),
# taken by `debforge build` from a signed flat upstream shaped like NVIDIA's
# (apt-ftparchive's Packages with MD5sum/SHA1/SHA256/SHA512, Release +
# Release.gpg) with a cold debforge cache, against reprepro (`includedeb`)
# and aptly (`repo add` + `publish`) given the same files, and the floor:
# `openssl dgst -sha256` of every byte once. Best of ROUNDS (default 3) for
# each, all from the page cache, all signing with Ed25519.
#   bash benches/real-debs.sh        (needs aptly, reprepro, apt-utils, openssl)
# Goals (issue 24): debforge ≤ 2× the floor and ≤ 0.4× reprepro; exits 1 when
# either is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
[ -n "${BIN:-}" ] || cargo build --release -q
bin=${BIN:-$PWD/target/release/debforge}
# Any set of debs may stand in (DEBS=dir; on a machine without the network);
# reprepro and aptly are skipped where they are not installed.
have() { command -v "$1" >/dev/null; }
PACKAGES="libcublaslt11 libcusparse11 libcufft10 libcublas11 libcurand10 libcusolver11
  libnvrtc11.2 libcudart11.0 libnvblas11 libnppc11 libnvidia-ml-dev libnvjpeg11"

# The debs, by apt from Debian's archive (its own keyring vouches for them).
debs=${DEBS:-$HOME/.cache/debforge-bench/cuda-11.8}
if [ -z "${DEBS:-}" ] && [ "$(ls "$debs"/*.deb 2>/dev/null | wc -l)" -lt 12 ]; then
  apt_dir=$debs.apt; mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free" > "$apt_dir/sources.list"
  A=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State=$apt_dir" -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir"
     -o "Dir::State::status=/dev/null" -o Debug::NoLocking=1 -o APT::Architecture=amd64)
  apt-get "${A[@]}" update -q >/dev/null
  (cd "$debs" && apt-get "${A[@]}" download $PACKAGES)
fi
work=$(mktemp -d /tmp/debforge-real-debs.XXXXXX)
trap 'gpgconf --homedir "$work/gnupg" --kill all 2>/dev/null || true; [ -n "${UPSTREAM_DIR:-}" ] && rm -rf "$UPSTREAM_DIR"; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
cat "$debs"/*.deb > /dev/null
bytes=$(cat "$debs"/*.deb | wc -c)

export GNUPGHOME=$work/gnupg; mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key 'bench <bench@example.org>' ed25519 sign never 2>/dev/null
fpr=$(gpg --with-colons --list-keys bench | awk -F: '/^fpr/ {print $10; exit}')
"$bin" keygen --keys "$work/keys" --name bench >/dev/null 2>&1

# The upstream: NVIDIA's flat layout, its files as apt-ftparchive indexes them.
# UPSTREAM_DIR on another filesystem (/dev/shm) measures the copying path
# (a USB snapshot, as a download would): files cannot be linked then.
up=${UPSTREAM_DIR:-$work/upstream}; mkdir -p "$up"
cp -l "$debs"/*.deb "$up/" 2>/dev/null || cp "$debs"/*.deb "$up/"
if have apt-ftparchive; then
  (cd "$up" && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release.tmp && mv Release.tmp Release)
else
  # No apt-utils (the GPU machine): our own index, a Release by hand.
  (cd "$up" && "$bin" index . --no-cache > Packages 2>/dev/null && python3 -c '
import hashlib
d = open("Packages", "rb").read()
open("Release", "w").write("Date: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n %s %d Packages\n" % (hashlib.sha256(d).hexdigest(), len(d)))')
fi
gpg --batch --quiet -abs -u "$fpr" -o "$up/Release.gpg" "$up/Release"
gpg --batch --armor --export "$fpr" > "$work/upstream.asc"
mkdir -p "$work/recipes/packages"
printf '[source.cuda]\nurl = "file://%s/"\nlayout = "flat"\nkey = "%s"\nfingerprint = "%s"\n' "$up" "$work/upstream.asc" "$fpr" > "$work/recipes/sources.toml"
for f in "$debs"/*.deb; do
  b=$(basename "$f" .deb); name=${b%%_*}; rest=${b#*_}; version=$(printf '%s' "${rest%_*}" | sed 's/%3a/:/')
  printf 'name = "%s"\nversion = "%s"\narchitecture = "amd64"\nfrom = { source = "cuda" }\naction = "keep"\npin = false\n' "$name" "$version" > "$work/recipes/packages/$name.toml"
done

# best CMD…: the best wall time of $rounds runs, and that run's CPU time
# (user + system); $setup runs before each.
best() {
  local b=999999 cpu=0 t
  for _ in $(seq "$rounds"); do
    eval "$setup"
    /usr/bin/time -f "%e %U %S" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    read -r t u s < "$work/t"
    if awk -v a="$t" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$t; cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }'); fi
  done
  echo "$b $cpu"
}

setup=:
read -r t_floor c_floor < <(best openssl dgst -sha256 "$debs"/*.deb)

setup='rm -rf "$work/cache" "$work/out" "$work/.out.generations" "$work/.out.stamp" "$work/recipes/debforge.lock"'
read -r t_df c_df < <(best "$bin" build --recipes "$work/recipes" --cache "$work/cache" --keys "$work/keys" --out "$work/out")
listed=$(grep -c '^Package: ' "$work/out/dists/bionic/main/binary-amd64/Packages")
[ "$listed" = "$(ls "$debs"/*.deb | wc -l)" ] || { echo "debforge listed $listed packages, not every deb" >&2; exit 1; }

t_rp=0 c_rp=0 t_ap=0 c_ap=0
if have reprepro; then
  setup='rm -rf "$work/reprepro/db" "$work/reprepro/dists" "$work/reprepro/pool"; mkdir -p "$work/reprepro/conf"; printf "Codename: bionic\nArchitectures: amd64\nComponents: main\nSignWith: %s\n" "$fpr" > "$work/reprepro/conf/distributions"'
  read -r t_rp c_rp < <(best reprepro -b "$work/reprepro" includedeb bionic "$debs"/*.deb)
fi
if have aptly; then
  cat > "$work/aptly.conf" <<JSON
{ "rootDir": "$work/aptly", "architectures": ["amd64"], "gpgProvider": "gpg" }
JSON
  setup='rm -rf "$work/aptly"; aptly -config="$work/aptly.conf" repo create -distribution=bionic -component=main lab >/dev/null'
  read -r t_ap c_ap < <(best bash -c "aptly -config='$work/aptly.conf' repo add lab '$debs' && aptly -config='$work/aptly.conf' publish repo -gpg-key=$fpr -batch lab")
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) printf "n/a"; else printf "%.2f", a / b }'; }
count=$(ls "$debs"/*.deb | wc -l)
echo "== signed repository of $count real debs ($((bytes / 1000000)) MB), cold cache, best of $rounds ($(nproc) cores)"
printf '  %-34s %7.2f s  (cpu %6.2f s)\n' "floor: openssl dgst -sha256" "$t_floor" "$c_floor" \
  "debforge build" "$t_df" "$c_df" "reprepro includedeb" "$t_rp" "$c_rp" "aptly repo add + publish" "$t_ap" "$c_ap"
r_floor=$(ratio "$t_df" "$t_floor"); r_rp=$(ratio "$t_df" "$t_rp")
echo "  debforge/floor $r_floor (goal <= 2.0); debforge/reprepro $r_rp (goal <= 0.4); debforge/aptly $(ratio "$t_df" "$t_ap")"
awk -v f="$r_floor" -v r="$r_rp" 'BEGIN { exit !(f <= 2.0 && (r == "n/a" || r <= 0.4)) }' && echo "  PASS" || { echo "  FAIL"; exit 1; }
