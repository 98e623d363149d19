#!/usr/bin/env bash
# Checks the formatting, builds everything, runs clippy and rustdoc (no
# warnings) and every test: unit and property tests, file-board races, MPI
# runs under mpirun (16 ranks oversubscribed), the Fortran programs, the
# installed library (pkg-config and CMake builds of the README's example),
# the FUSE file-system tests, the tests on a cluster of namespaces
# (scripts/cluster.sh).
. "$(dirname "$0")/setup.sh"
# The tests' tools: CMake builds against an installed prefix; FUSE mounts;
# the cluster's namespaces.
need_commands cmake=cmake bindfs=bindfs fusermount3=fuse3 unshare=util-linux mount=mount \
    nsenter=util-linux findmnt=util-linux setsid=util-linux
need_cargo_components fmt clippy
cargo fmt --check || { echo "test.sh: cargo fmt --check failed: run cargo fmt" >&2; exit 1; }
cargo build --release --all-targets
cargo clippy --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
build_slab
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --release --no-fail-fast
else
    cargo test --release --no-fail-fast --lib --bins --tests
fi
cargo test --release --doc
echo "test.sh: all tests passed"
