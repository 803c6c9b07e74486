#!/usr/bin/env bash
# The fast tier, for developers between commits: the whole suite but the
# tests that make real roots (mmdebstrap, the bionic chroot), start moto,
# read the real archives, or load a server. CI runs everything
# (`cargo test --locked`, README). Extra arguments go to the test binary.
#   bash tests/fast.sh [FILTER...]
set -euo pipefail
cd "$(dirname "$0")/.."
slow=(
  support::chroot:: machines:: publish_remote:: real_archives:: gpu_check:: support::corpus::
  # The tests below install into the bionic root.
  stack::a_machine_with_nvidias_own_builds stack::a_version_suffix_flows
  stack::air_gapped_install stack::apt_install_gpu_stack_from_debforge_serve
  stack::forward_one_generation_then_rollback stack::held_nvidia_builds
  stack::installed_in_a_chroot stack::publish_over_rsync_to_an_nginx_mirror
  stack::publish_to_a_directory_served_by_nginx stack::publish_to_s3
  bundles::hostile_bundles_are_refused
  # Load tests, bombs and mutants (memory limits, thousands of packages).
  serve::serve_degrades serve::serve_holds_up bombs:: mutants::
)
args=()
for s in "${slow[@]}"; do args+=(--skip "$s"); done
start=$(date +%s)
# Many tests wait on servers and timeouts: more threads than cores helps.
cargo test --locked -q -- --test-threads 4 "${args[@]}" "$@"
echo "fast tier: $(( $(date +%s) - start )) s (the full suite: cargo test --locked)"
