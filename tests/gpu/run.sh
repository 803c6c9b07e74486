#!/bin/sh
# The CUDA 13 example stack proven on a real GPU (not part of `cargo test`:
# CI has no GPU). Run as root on a machine with an NVIDIA driver, a GPU and
# NVIDIA's own packages installed (libnccl2/libnccl-dev, libcudnn9-cuda-13,
# libcudnn9-dev-cuda-13, libcudnn9-headers-cuda-13; held or not), no network
# needed:
#
#   sh tests/gpu/run.sh [DEBFORGE]     (default: target/release/debforge)
#
# 1. rebuilds the installed NVIDIA packages as .debs (as dpkg-repack does);
# 2. builds examples/cuda13-ubuntu2404 with them as local files;
# 3. serves it (debforge serve), installs gpu-lab-repo-cu130, follows the
#    command its postinst names for held packages, installs the stack with
#    apt, checking first that apt plans no removal outside the stack;
# 4. runs gpu-stack-check --gpu (timed), which must pass; removes a link and
#    checks that it fails; puts the link back;
# 5. purges the stack and reinstalls NVIDIA's own packages as they were
#    (held again if they were).
set -eu
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DEBFORGE=$(readlink -f "${1:-$REPO/target/release/debforge}")
WORK=$(mktemp -d /tmp/debforge-gpu.XXXXXX)
PORT=18731
STACK="libnccl2 libnccl-dev libcudnn9-cuda-13 libcudnn9-dev-cuda-13 libcudnn9-headers-cuda-13"
step() { echo; echo "=== $*"; }
die() { echo "FAILED: $*"; exit 1; }

step "the machine"
nvidia-smi -L || die "no GPU (nvidia-smi -L)"
cat /proc/driver/nvidia/version | head -n 1
. /etc/os-release; echo "$PRETTY_NAME; $(apt-get --version | head -n 1); python3 $(python3 -c 'import sys; print(sys.version.split()[0])')"
dpkg-query -W -f='${Package} ${Version} ${Status}\n' $STACK
held=$(dpkg-query -W -f='${Status} ${Package}\n' $STACK | sed -n 's/^hold [^ ]* [^ ]* //p' | tr '\n' ' ')
echo "held: ${held:-none}"

step "1. NVIDIA's installed packages rebuilt as .debs"
mkdir -p "$WORK/nvidia"
for p in $STACK; do
    tree="$WORK/tree-$p"
    mkdir -p "$tree/DEBIAN"
    dpkg-query -L "$p" | while read -r f; do
        [ -d "$f" ] && [ ! -L "$f" ] && { mkdir -p "$tree$f"; continue; }
        [ -e "$f" ] || [ -L "$f" ] || continue
        mkdir -p "$tree$(dirname "$f")"
        cp -a "$f" "$tree$f"
    done
    # The control paragraph as dpkg keeps it, less what only the status has.
    dpkg-query -s "$p" | grep -vE '^(Status|Conffiles|Config-Version):' | sed '/^ \//d' > "$tree/DEBIAN/control"
    for s in preinst postinst prerm postrm shlibs triggers conffiles md5sums; do
        [ -e "/var/lib/dpkg/info/$p.$s" ] && cp -a "/var/lib/dpkg/info/$p.$s" "$tree/DEBIAN/$s"
        [ -e "/var/lib/dpkg/info/$p:amd64.$s" ] && cp -a "/var/lib/dpkg/info/$p:amd64.$s" "$tree/DEBIAN/$s"
    done
    v=$(dpkg-query -W -f='${Version}' "$p")
    dpkg-deb --root-owner-group -Zxz -b "$tree" "$WORK/nvidia/${p}_${v}_amd64.deb" >/dev/null
    echo "$(dpkg-deb -f "$WORK/nvidia/${p}_${v}_amd64.deb" Package Version | tr '\n' ' ') $(stat -c %s "$WORK/nvidia/${p}_${v}_amd64.deb") bytes"
    dpkg-deb -f "$WORK/nvidia/${p}_${v}_amd64.deb" Depends Provides Conflicts Replaces Breaks | sed 's/^/    /'
done

step "2. the example project built with them as local files"
cp -r "$REPO/examples/cuda13-ubuntu2404" "$WORK/project"
cd "$WORK/project"
mkdir -p recipes/local
cp "$WORK"/nvidia/*.deb recipes/local/
: > recipes/sources.toml
for f in recipes/packages/lib*.toml; do
    name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$f")
    deb=$(cd recipes/local && ls "${name}"_*.deb)
    sed -i "s|^from = { source = \"nvidia-cuda\" }|from = { path = \"local/$deb\" }|" "$f"
done
t0=$(date +%s%N)
"$DEBFORGE" build --recipes recipes --keys keys --cache "$WORK/cache" --out "$WORK/repo-out" --mirror "http://127.0.0.1:$PORT/" 2>&1
echo "build: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
"$DEBFORGE" verify "$WORK/repo-out"
cat "$WORK/repo-out/debforge.pref" | grep '^Package' | sort -u

step "3. served; gpu-lab-repo-cu130, the held packages' command, the stack with apt"
"$DEBFORGE" serve --out "$WORK/repo-out" --listen "127.0.0.1:$PORT" > "$WORK/serve.log" 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
sleep 1
before=$(dpkg-query -W -f='${Package}\n' | sort)
said=$(dpkg -i "$WORK/repo-out"/pool/main/g/gpu-lab-repo-cu130/gpu-lab-repo-cu130_*_all.deb 2>&1)
echo "$said"
command=$(echo "$said" | sed -n 's/.*to move them: //p')
if [ -n "$held" ]; then [ -n "$command" ] || die "gpu-lab-repo-cu130 named no command for the held packages"; fi
[ -n "$command" ] || command="sudo apt-get update && sudo apt-get install gpu-stack-cu130"
echo "the command: $command"
# No network here: `apt-get update` reads only our source (the others' lists stay).
mkdir -p "$WORK/sources.d"
cp /etc/apt/sources.list.d/gpu-lab-cu130.sources "$WORK/sources.d/"
run=$(echo "$command" | sed "s/sudo //g; s/apt-get install/apt-get install -y/; s|apt-get update|apt-get update -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=$WORK/sources.d -o APT::List-Cleanup=false|")
# The plan first: nothing outside the stack removed or downgraded.
sh -c "$(echo "$run" | sed 's/apt-get install -y/apt-get -s install/')" > "$WORK/plan" 2>&1 || { cat "$WORK/plan"; die "apt cannot plan the install"; }
grep -E '^(Inst|Remv)' "$WORK/plan"
if grep -E '^Remv' "$WORK/plan" | grep -vE "^Remv ($(echo $STACK | tr ' ' '|'))( |$)"; then die "apt would remove packages outside the stack"; fi
t0=$(date +%s%N)
sh -c "$run" 2>&1 | tail -n 25
echo "install: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
dpkg-query -W -f='${Package} ${Version} ${Status}\n' $STACK gpu-stack-cu130
for p in $before; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || die "$p was removed"
done

step "4. gpu-stack-check --gpu"
t0=$(date +%s%N)
gpu-stack-check --gpu || die "gpu-stack-check --gpu failed"
echo "gpu-stack-check --gpu: $(( ($(date +%s%N) - t0) / 1000000 )) ms end to end"
link=/usr/local/cuda/nccl/lib/libnccl.so.2
target=$(readlink "$link")
rm "$link"
if gpu-stack-check --gpu; then die "gpu-stack-check passed without $link"; fi
echo "(as it should: it fails without $link)"
dpkg-reconfigure libnccl2 2>/dev/null || /var/lib/dpkg/info/libnccl2.postinst configure
test "$(readlink "$link")" = "$target" || die "the link did not come back"
gpu-stack-check --gpu > /dev/null && echo "the link back: gpu-stack-check --gpu passes again"

step "5. purged; NVIDIA's own packages back as they were"
dpkg --purge gpu-stack-cu130 gpu-lab-repo-cu130 $STACK 2>&1 | tail -n 8
test ! -e "$link" || die "$link left behind"
dpkg -i "$WORK"/nvidia/*.deb > /dev/null 2>&1 || die "NVIDIA's packages did not go back"
[ -n "$held" ] && apt-mark hold $held
dpkg-query -W -f='${Package} ${Version} ${Status}\n' $STACK
echo
echo "gpu run: all steps passed"
