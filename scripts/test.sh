#!/usr/bin/env bash
# Checks the formatting and the structure (scripts/check-layers.sh,
# scripts/check-sizes.sh), builds everything, runs clippy and rustdoc (no
# warnings) and every test, in three passes. The tests, the emulator and the
# simulator need the cargo feature `emulate`, which the installed library
# never has (scripts/check-product.sh, first in the openmpi pass, checks it):
#
#   openmpi  against Open MPI (target/): the library as installed has no
#            emulation; unit and property tests, file-board
#            races, MPI runs under mpirun (16 ranks oversubscribed), the
#            Fortran programs, the installed library (pkg-config and CMake
#            builds of the README's example), the FUSE file-system tests,
#            the tests on a cluster of namespaces (scripts/cluster.sh)
#   mpich    against MPICH (target/mpich, mpiexec.mpich): the MPI, Fortran,
#            liveness, grid-job and install tests again
#   slurm    the grid-job tests under a one-node Slurm on this machine
#            (scripts/slurm.sh start, then stop), against Open MPI
#
# usage: scripts/test.sh [openmpi] [mpich] [slurm]   (default: all three)
# Each pass says how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
passes=("$@")
((${#passes[@]})) || passes=(openmpi mpich slurm)
for p in "${passes[@]}"; do
    case "$p" in
        openmpi | mpich | slurm) ;;
        *) echo "usage: scripts/test.sh [openmpi] [mpich] [slurm]" >&2; exit 2 ;;
    esac
done

# cargo nextest run, or cargo test where nextest is missing; ARGS are cargo's
# feature and target selection (--features emulate, --lib, --test NAME, ...).
run_tests() {
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --release --no-fail-fast "$@"
    else
        cargo test --release --no-fail-fast "$@"
    fi
}

# Every integration test but the Slurm ones (they need a running Slurm).
tests_but_slurm() {
    local f
    for f in tests/*.rs; do
        f=${f##*/}
        [ "$f" = slurm.rs ] || printf -- '--test\n%s\n' "${f%.rs}"
    done
}

# The structure: no import loop and no oversized file or function in src/;
# and the loop check does fail on trees with a loop (copies of src/ where
# the error type imports the balancer, above its tests, or the host
# transfers import the policy's ledger, which is no file loop but one of
# the policy/ folder with transfer.rs).
structure_checks() {
    bash scripts/check-layers.sh
    bash scripts/check-sizes.sh
    loop_found src/error.rs 'use crate::balancer::Balancer;' '^  error.rs -> balancer/mod.rs'
    loop_found src/transfer.rs 'use crate::policy::ledger::Ledger;' '^  transfer.rs: transfer.rs -> policy/ledger.rs'
}

# loop_found FILE LINE PATTERN: check-layers.sh fails on a copy of src/ with
# LINE put at the top of FILE, and says PATTERN.
loop_found() {
    local tree
    tree=$(mktemp -d)
    cp -r src "$tree/src"
    sed -i "1i $2" "$tree/$1"
    if bash scripts/check-layers.sh "$tree/src" 2>"$tree/out"; then
        echo "test.sh: check-layers.sh missed the loop of '$2' in $1" >&2; exit 1
    fi
    grep -q "$3" "$tree/out" || { cat "$tree/out" >&2; exit 1; }
    rm -rf "$tree"
}

openmpi_pass() (
    export SOSLB_MPI=openmpi
    . scripts/setup.sh
    # The tests' tools: CMake builds against an installed prefix, and the
    # other MPI's Fortran wrapper (a CMake project that found it is refused);
    # FUSE mounts; the cluster's namespaces.
    need_commands cmake=cmake mpif90.mpich=libmpich-dev bindfs=bindfs fusermount3=fuse3 \
        unshare=util-linux mount=mount nsenter=util-linux findmnt=util-linux setsid=util-linux
    need_fusepy
    need_cargo_components fmt clippy
    cargo fmt --check || { echo "test.sh: cargo fmt --check failed: run cargo fmt" >&2; exit 1; }
    structure_checks
    # Before the builds with the feature: it re-links target/release/libsoslb.a
    # to the library without emulation, which the Fortran tests must not link.
    bash scripts/check-product.sh
    cargo clippy --lib -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
    cargo build --release --all-targets --features emulate
    cargo clippy --all-targets --features emulate -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features emulate
    build_slab
    mapfile -t targets < <(tests_but_slurm)
    run_tests --features emulate --lib --bins "${targets[@]}"
    cargo test --release --doc --features emulate
)

mpich_pass() (
    export SOSLB_MPI=mpich
    . scripts/setup.sh
    need_commands cmake=cmake mpif90.openmpi=libopenmpi-dev
    # Only what these tests run: the library, the emulator and the tests,
    # without the soslb command's plotting crates (the report feature).
    cargo build --release --no-default-features --features emulate --lib --example emulate
    run_tests --no-default-features --features emulate \
        --test mpi --test fortran --test liveness --test grid --test install
)

slurm_pass() (
    export SOSLB_MPI=openmpi
    . scripts/setup.sh
    cargo build --release --features emulate --examples --test slurm
    bash scripts/slurm.sh start
    trap 'bash scripts/slurm.sh stop' EXIT
    eval "$(bash scripts/slurm.sh env)"
    # The jobs sleep more than they compute: all four at once; their output
    # has what sacct says of each job.
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --release --features emulate --no-fail-fast --test-threads 4 \
            --success-output immediate --test slurm
    else
        cargo test --release --features emulate --no-fail-fast --test slurm -- --test-threads 4
    fi
)

for p in "${passes[@]}"; do
    start=$SECONDS
    "${p}_pass"
    echo "test.sh: the $p pass passed in $((SECONDS - start)) s" >&2
done
echo "test.sh: all tests passed (${passes[*]}) in $SECONDS s"
