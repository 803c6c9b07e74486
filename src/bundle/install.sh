#!/bin/sh
# install.sh: set up this debforge bundle as an apt source on an offline
# machine, or bring a mirror directory inside the air gap up to date. A full
# bundle holds the whole repository; a delta (it holds DELTA) only what the
# generation it was made from lacks, and applies onto that generation alone.
# Everything is checked first; the new generation is assembled beside the
# one in force and switched in with one rename, so apt sees the old
# repository or the new, never a mix. Killed midway, run it again.
# Run as root from the unpacked bundle:
#   tar -xf lab.tar && sh debforge-bundle/install.sh
# DEBFORGE_BUNDLE_DIR (default /var/lib/debforge-bundle): where the
# repository lives; apt reads DEBFORGE_BUNDLE_DIR/current/.
# DEBFORGE_BUNDLE_APT=no: leave apt's configuration alone (a mirror).
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
fail() { echo "install.sh: $*; nothing was changed" >&2; exit 1; }
# A test stops the script here, as a power cut would.
killed_at() { [ "${DEBFORGE_BUNDLE_TEST_KILL:-}" != "$1" ] || kill -9 $$; }
# Only regular files and directories, each file once, no hard links: a
# symlink, FIFO or device here is not from debforge (and could point at
# /etc/shadow or hang the check below).
odd=$(find . ! -type f ! -type d | head -n 5)
[ -z "$odd" ] || fail "the bundle holds something that is not a regular file: $odd"
linked=$(find . -type f -links +1 | head -n 5)
[ -z "$linked" ] || fail "the bundle holds hard-linked files: $linked"
# A list of '<sha256>  <path>' lines: each well formed, no . or .., no
# path twice.
check_sums() {
    if grep -v -E '@SUMS_LINE@' "$1" | grep -q .; then
        fail "$2 has a line that is not '<sha256>  <path>'"
    fi
    if cut -c67- "$1" | grep -q -E '(^|/)\.\.?(/|$)|//'; then
        fail "$2 lists a path with . or .."
    fi
    [ -z "$(cut -c67- "$1" | LC_ALL=C sort | uniq -d)" ] || fail "$2 lists a file twice"
}
# Exactly the files SHA256SUMS lists, none outside.
check_sums SHA256SUMS SHA256SUMS
listed=$(cut -c67- SHA256SUMS | LC_ALL=C sort)
present=$(find . -type f ! -path ./SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort)
[ "$listed" = "$present" ] || fail "the files here are not exactly those SHA256SUMS lists"
if ! sha256sum --check --quiet --strict SHA256SUMS; then
    fail "the bundle is corrupted (SHA256SUMS does not match); copy it again"
fi
dest=${DEBFORGE_BUNDLE_DIR:-/var/lib/debforge-bundle}
case "$dest" in
    /*) ;;
    *) fail "DEBFORGE_BUNDLE_DIR must be an absolute path, not $dest" ;;
esac
case "$dest" in
    *[!A-Za-z0-9._/+-]*) fail "DEBFORGE_BUNDLE_DIR=$dest: apt's file: URIs take no spaces or special characters; choose a plain path" ;;
esac
mkdir -p "$dest"
# One install at a time: a second would remove the first's work.
exec 9>"$dest/.lock"
flock -n 9 || fail "another install.sh is working on $dest"
suite=@SUITE@
gens=$dest/generations
trusted=$dest/trusted.gpg
hex64() {
    [ "${#1}" -eq 64 ] || return 1
    case "$1" in *[!0-9a-f]*) return 1 ;; esac
}
# The generation in force (set up by an older install.sh: DEST itself),
# named by its InRelease's SHA-256.
have=
if [ -L "$dest/current" ]; then
    have=$dest/current
elif [ -f "$dest/dists/$suite/InRelease" ]; then
    have=$dest
fi
current=none
if [ -n "$have" ] && [ -f "$have/dists/$suite/InRelease" ]; then
    current=$(sha256sum < "$have/dists/$suite/InRelease" | cut -c1-64)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What was checked above, kept: the bundle is not read twice.
cp SHA256SUMS "$work/sums"
if [ -f DELTA ]; then
    [ -f "$trusted" ] || fail "a delta applies onto a repository a full bundle set up; $dest has none (no $trusted)"
    if ! gpgv --keyring "$trusted" --output "$work/manifest" DELTA 2>"$work/gpgv"; then
        fail "DELTA is not signed by a key of $trusted: $(tail -n 2 "$work/gpgv")"
    fi
    field() { sed -n "s/^$1: //p" "$work/manifest"; }
    base=$(field Base)
    target=$(field Target)
    hex64 "$base" && hex64 "$target" || fail "DELTA names no base or target generation"
    [ "$(field Suite)" = "$suite" ] || fail "DELTA is for suite $(field Suite), not $suite"
    # The target's every file, as the signed manifest lists it.
    sed -n '/^Files:$/,$p' "$work/manifest" | sed -e '1d' -e '/^$/d' > "$work/files"
    sed 's/^ \([0-9a-f]*\) [0-9]* /\1  /' "$work/files" > "$work/target.sums"
    check_sums "$work/target.sums" DELTA
    # Already in force (a run killed after the switch): the steps after it
    # are done again.
    [ "$current" = "$base" ] || [ "$current" = "$target" ] || fail "this delta applies onto generation $base only; $dest has $current: apply the deltas in order, or a full bundle"
else
    target=$(sha256sum < "repo/dists/$suite/InRelease" | cut -c1-64)
    hex64 "$target" || fail "the bundle holds no dists/$suite/InRelease"
    sed -n 's|^\([0-9a-f]\{64\}\)  repo/|\1  |p' "$work/sums" > "$work/target.sums"
fi
new=$gens/$target
if [ ! -d "$new" ]; then
    tmp=$gens/.new-$target
    rm -rf "$tmp"
    mkdir -p "$tmp"
    n=0
    while read -r sum path; do
        mkdir -p "$tmp/$(dirname "$path")"
        if [ -f "repo/$path" ]; then
            cp "repo/$path" "$tmp/$path"
        elif [ -n "$have" ] && [ -f "$have/$path" ]; then
            ln "$have/$path" "$tmp/$path" 2>/dev/null || cp "$have/$path" "$tmp/$path"
        else
            fail "$path is neither in this bundle nor in the generation in force"
        fi
        n=$((n + 1))
        [ "$n" != 1 ] || killed_at first-file
    done < "$work/target.sums"
    if ! (cd "$tmp" && sha256sum --check --quiet --strict "$work/target.sums"); then
        fail "the new generation does not match what the bundle lists"
    fi
    chmod -R a+rX "$tmp"
    mv "$tmp" "$new"
fi
killed_at assembled
# In force: one rename.
ln -sfn "generations/$target" "$dest/current.new"
mv -T "$dest/current.new" "$dest/current"
killed_at switched
install -m 644 "$new/debforge-archive-keyring.gpg" "$trusted.new"
mv "$trusted.new" "$trusted"
if [ "${DEBFORGE_BUNDLE_APT:-yes}" != no ]; then
    install -d /usr/share/keyrings /etc/apt/sources.list.d /etc/apt/preferences.d
    install -m 644 "$new/debforge-archive-keyring.gpg" /usr/share/keyrings/debforge-bundle-archive-keyring.gpg
    cat > "$work/sources" <<EOF
Types: deb
URIs: file:$dest/current/
Suites: @SUITE@
Components: @COMPONENT@
Signed-By: /usr/share/keyrings/debforge-bundle-archive-keyring.gpg
EOF
    install -m 644 "$work/sources" /etc/apt/sources.list.d/debforge-bundle.sources
    install -m 644 "$new/debforge.pref" /etc/apt/preferences.d/debforge-bundle.pref
fi
# What an older install.sh put at the top goes aside, not away (anything
# put there by hand goes with it); the generations before the last two go
# (the one just replaced stays, for a step back).
if [ "$have" = "$dest" ]; then
    aside=$dest/old-layout
    mkdir -p "$aside"
    for f in dists pool debforge-archive-keyring.gpg debforge-archive-keyring.asc debforge.pref .debforge-output; do
        [ ! -e "$dest/$f" ] || mv "$dest/$f" "$aside/"
    done
    echo "install.sh: what an older install.sh left in $dest is now in $aside: remove it once apt works from $dest/current"
fi
for g in "$gens"/* "$gens"/.new-*; do
    [ -e "$g" ] || continue
    case "$g" in
        "$new" | "$gens/$current") ;;
        *) rm -rf "$g" ;;
    esac
done
if [ "$current" = "$target" ]; then
    echo "install.sh: generation $target is already in force at $dest/current (set up again)"
else
    echo "install.sh: generation $target in force at $dest/current; now run: apt-get update && apt-get install gpu-stack-cu101"
fi
