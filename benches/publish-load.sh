#!/usr/bin/env bash
# Consistency under load: sandboxed `apt-get update` (then a download of the
# packages it now lists) runs in a loop against a
# published directory (served by `debforge serve`) while `debforge publish`
# runs ROUNDS times, each with new content (new package versions, new
# payloads, a package coming and going). Prints the count of failed updates;
# the goal is 0.
#   benches/publish-load.sh [ROUNDS]   (default 20)
#   SAME=1 benches/publish-load.sh     rebuilds at the same version: the same
#                                       inputs again (no SOURCE_DATE_EPOCH: the
#                                       bytes must come out the same), and every
#                                       third round other bytes at that version,
#                                       which publish must refuse
#   NAIVE=1 benches/publish-load.sh    the control: a plain `rsync -a --delete`
#                                       (alphabetical order: InRelease before
#                                       the indexes it lists) in place of publish
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-20}
cargo build --release -q
BIN=$PWD/target/release/debforge
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT

# A build-only project: no upstream, three packages with a payload each.
P=$W/project
mkdir -p "$P/recipes/packages" "$P/recipes/files"
: > "$P/recipes/sources.toml"
cat > "$P/recipes/repository.toml" <<'TOML'
[repository]
origin = "load"
label = "load"
suite = "bionic"
codename = "bionic"
component = "main"
architectures = ["amd64"]
description = "publish-under-load test"
TOML
echo "Copyright: none" > "$P/recipes/files/copyright"
recipe() { # name version payload-file
  cat > "$P/recipes/packages/$1.toml" <<TOML
name = "$1"
version = "$2"
architecture = "all"
action = "build"

[build]
maintainer = "Load <load@example.org>"
section = "misc"
priority = "optional"
summary = "load test package $1"
description = " Payload that changes every round."
files = [ { path = "/usr/share/$1/payload", source = "files/$3", mode = "644" } ]
copyright = "files/copyright"
TOML
}
"$BIN" keygen --keys "$P/keys" --name "Load test" >/dev/null

round() { # n
  local n=$1
  if [ -n "${SAME:-}" ]; then
    # Every third round other bytes at the same version (publish must
    # refuse them); the round after goes back to the published bytes.
    for pkg in alpha beta gamma; do
      [ -e "$P/recipes/files/$pkg-same" ] || head -c 4000000 /dev/urandom > "$P/recipes/files/$pkg-same"
      if (( n % 3 == 0 && n > 0 )); then
        head -c 4000000 /dev/urandom > "$P/recipes/files/$pkg-other"
        recipe "$pkg" "1.0-1" "$pkg-other"
      else
        recipe "$pkg" "1.0-1" "$pkg-same"
      fi
    done
    "$BIN" build --recipes "$P/recipes" --cache "$W/cache" --keys "$P/keys" --out "$W/out" >/dev/null 2>&1
    return
  fi
  for pkg in alpha beta gamma; do
    head -c $((4000000 + n * 1000)) /dev/urandom > "$P/recipes/files/$pkg-$n"
    recipe "$pkg" "1.$n-1" "$pkg-$n"
  done
  # One package comes and goes.
  if (( n % 2 )); then recipe delta "1.$n-1" "alpha-$n"; else rm -f "$P/recipes/packages/delta.toml"; fi
  "$BIN" build --recipes "$P/recipes" --cache "$W/cache" --keys "$P/keys" --out "$W/out" >/dev/null 2>&1
}

round 0
"$BIN" publish --to "$W/www" --out "$W/out" >/dev/null
PORT=$((20000 + RANDOM % 20000))
"$BIN" serve --listen 127.0.0.1:$PORT --out "$W/www" 2>/dev/null &
sleep 0.5

# The apt sandbox.
A=$W/apt
mkdir -p "$A"/{etc/apt.conf.d,etc/sources.list.d,etc/preferences.d,state/lists/partial,cache/archives/partial,log}
: > "$A/state/status"
cat > "$A/etc/sources.list.d/load.sources" <<SRC
Types: deb
URIs: http://127.0.0.1:$PORT/
Suites: bionic
Components: main
Signed-By: $W/out/debforge-archive-keyring.gpg
SRC
cat > "$A/apt.conf" <<CONF
Dir::Etc "$A/etc"; Dir::Etc::main "/dev/null"; Dir::Etc::parts "$A/etc/apt.conf.d";
Dir::Etc::sourcelist "$A/etc/sources.list"; Dir::Etc::sourceparts "$A/etc/sources.list.d";
Dir::Etc::preferences "$A/etc/preferences"; Dir::Etc::preferencesparts "$A/etc/preferences.d";
Dir::State "$A/state"; Dir::State::status "$A/state/status"; Dir::Cache "$A/cache"; Dir::Log "$A/log";
APT::Architecture "amd64"; APT::Architectures { "amd64"; }; Acquire::Languages "none";
APT::Sandbox::User "root"; Debug::NoLocking "true";
CONF

# The update loop, until the publishes are done.
: > "$W/updates"
(
  while [ ! -e "$W/done" ]; do
    rm -f "$A"/cache/archives/*.deb
    if APT_CONFIG=$A/apt.conf apt-get update -q > "$W/last" 2>&1 && ! grep -q '^[WE]:' "$W/last" &&
       APT_CONFIG=$A/apt.conf apt-get install -q -y --download-only alpha beta gamma >> "$W/last" 2>&1; then
      echo ok >> "$W/updates"
    else
      echo fail >> "$W/updates"; cat "$W/last" >> "$W/failures"
    fi
  done
) &
LOOP=$!

START=$(date +%s.%N)
REFUSED=0
for n in $(seq 1 "$ROUNDS"); do
  round "$n"
  if [ -n "${NAIVE:-}" ]; then
    rsync -a --delete --exclude='.*' "$W/out/" "$W/www/"
  elif ! "$BIN" publish --to "$W/www" --out "$W/out" >/dev/null 2>"$W/publish-err"; then
    # Only a same-version change of bytes may be refused.
    grep -q "would change under clients of the Release in force" "$W/publish-err" || { cat "$W/publish-err"; exit 1; }
    REFUSED=$((REFUSED + 1))
  fi
done
END=$(date +%s.%N)
touch "$W/done"; wait $LOOP
OKS=$(grep -c '^ok' "$W/updates" || true)
FAILS=$(grep -c '^fail' "$W/updates" || true)
echo "${NAIVE:+naive rsync }${SAME:+same-version }publishes: $ROUNDS ($REFUSED refused) in $(awk "BEGIN { printf \"%.1f\", $END - $START }") s; apt-get update runs: $((OKS + FAILS)); failed: $FAILS"
if [ "$FAILS" -gt 0 ]; then head -40 "$W/failures"; exit 1; fi
