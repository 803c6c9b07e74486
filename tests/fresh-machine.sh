#!/usr/bin/env bash
# Proves README's first command on a fresh machine: a clean Debian 12 root
# (mmdebstrap, variant apt) with a C compiler and nothing else — no libclang,
# no -dev package, no pkg-config — and the host's Rust toolchain bind-mounted
# read-only. `cargo run --release -- build` must compile and run: it makes the
# signing key and goes as far as a machine without NVIDIA's server can (the
# upstream is not reachable from here, so it stops with that one error).
#   bash tests/fresh-machine.sh [bookworm|noble]      (root; CI runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-bookworm}
case $suite in
  bookworm) mirror=http://deb.debian.org/debian ;;
  noble) mirror=http://archive.ubuntu.com/ubuntu
         # Ubuntu's archive key, as shipped (the host may lack ubuntu-keyring).
         KEYRING=${KEYRING:-$PWD/keys/ubuntu-archive-keyring.gpg} ;;
  *) echo "fresh-machine.sh: bookworm or noble, not $suite" >&2; exit 2 ;;
esac
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=$(dirname "$(command -v cargo)")
root=$(mktemp -d /tmp/debforge-fresh.XXXXXX)
cleanup() {
  for m in "$root/rustup" "$root/cargo-bin" "$root/proc" "$root/dev"; do umount "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

echo "== a clean $suite root: gcc and libc6-dev only"
mmdebstrap --quiet --variant=apt --include=gcc,libc6-dev,ca-certificates \
  ${KEYRING:+--keyring="$KEYRING"} "$suite" "$root" "$mirror"
for pkg in libclang-dev libssl-dev liblzma-dev pkg-config pkgconf clang libzstd-dev; do
  if chroot "$root" dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q installed; then
    echo "fresh-machine.sh: $pkg is in the root; it would not prove anything" >&2; exit 1
  fi
done

mkdir -p "$root/rustup" "$root/cargo-bin" "$root/src"
mount --bind -o ro "$rustup_home" "$root/rustup"
mount --bind -o ro "$cargo_bin" "$root/cargo-bin"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's CA bundle: where TLS is inspected, its CA is what a fresh
# machine of this place trusts too (crates are downloaded from the registry).
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The project as a fresh clone has it: tracked and untracked-but-not-ignored files.
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/src"

echo "== cargo run --release -- build, in the root"
start=$(date +%s)
set +e
chroot "$root" env -i HOME=/root PATH=/cargo-bin:/usr/bin:/bin RUSTUP_HOME=/rustup CARGO_HOME=/cargo \
  sh -c 'cd /src && cargo run --release --locked -q -- build' >"$root/out.txt" 2>&1
rc=$?
set -e
tail -n 15 "$root/out.txt"
echo "== exit $rc after $(( $(date +%s) - start )) s"
# It compiled and ran: the key was made (the crypto backend works) and the
# build stopped where a machine without NVIDIA's server must, naming the source.
if ! grep -q 'could not compile\|linking with\|Unable to find' "$root/out.txt" \
   && ls "$root"/src/keys/signing/*.key >/dev/null 2>&1 \
   && { [ $rc -eq 0 ] || grep -q "source 'nvidia-ml'.*cannot be reached\|the upstream cannot be reached" "$root/out.txt"; }; then
  echo "fresh-machine: passed ($suite)"
else
  echo "fresh-machine: FAILED ($suite)" >&2
  exit 1
fi
