# Sourced by the other scripts: installs what is missing on a fresh Debian
# machine (Open MPI, gfortran, a C toolchain, libclang for rsmpi's bindgen),
# lets Open MPI run as root and oversubscribe cores, and defines build_slab.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpif90 >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v gfortran >/dev/null 2>&1 || need+=(gfortran)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* >/dev/null 2>&1 || need+=(libclang-dev)
command -v bindfs >/dev/null 2>&1 || need+=(bindfs)   # the FUSE test (tests/fuse.rs)
if ((${#need[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${need[*]}" >&2
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
    # shellcheck disable=SC1091
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found: install Rust with rustup" >&2; exit 1; }
fi

# Open MPI refuses root unless told; many ranks share few cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Signal files of the scripts' runs stay inside the build tree.
export SOSLB_SIGNAL_DIR="${SOSLB_SIGNAL_DIR:-$ROOT/target/soslb-signals}"

# Build the static library and the Fortran example target/release/slab.
build_slab() {
    cargo build --release --lib
    local out="$ROOT/target/release/fortran"
    mkdir -p "$out"
    mpif90 -O2 -J "$out" -o "$ROOT/target/release/slab" \
        fortran/soslb.f90 examples/slab.f90 target/release/libsoslb.a -lpthread -ldl -lm
}
