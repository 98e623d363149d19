#!/usr/bin/env bash
# Builds everything and runs every test: unit and property tests, file-board
# races, MPI runs under mpirun (16 ranks oversubscribed), the Fortran example.
. "$(dirname "$0")/setup.sh"
cargo build --release --all-targets
build_slab
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --release --no-fail-fast
else
    cargo test --release --no-fail-fast --lib --bins --tests
fi
cargo test --release --doc
echo "test.sh: all tests passed"
