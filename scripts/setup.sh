# shellcheck shell=bash
# Sourced by the other scripts. Makes sure the tools of the build are there:
# on Debian or Ubuntu it installs what is missing with apt-get (as root, or
# through sudo); elsewhere (a cluster login node) it stops and says what to
# install, or which variable points the build to what the machine has. Then it
# lets Open MPI run as root and oversubscribe cores, and defines build_slab.
#
# Which MPI: SOSLB_MPI=openmpi or SOSLB_MPI=mpich picks Debian's Open MPI or
# MPICH by their own tools (mpicc.openmpi, mpicc.mpich, ...), whatever the
# system's mpicc/mpirun alternatives point to; the MPICH build goes to its
# own target directory (target/mpich), so the two never mix. Unset, the build
# uses MPICC or MPI_PKG_CONFIG when set, else mpicc, mpif90 and mpirun.
# Exported for the scripts: MPICC, MPIFC (Fortran wrapper), MPIEXEC (launcher).
#
# For the scripts that source it:
#   need_commands CMD=PACKAGE...   install the Debian package of each missing command
#   need_cargo_components NAME...  cargo subcommands from rustup components (clippy, fmt)
#   have_libclang                  does the `mpi` crate's bindgen find what it needs?
#   build_slab                     the release library (with the feature `emulate`:
#                                  the demo's slow rank is emulated) and
#                                  <target>/release/slab
#   mpi_launch NP PROGRAM ARGS...  run PROGRAM on NP ranks with $MPIEXEC
#
# SOSLB_SETUP=0 skips the checks and installs (you provide the tools).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

setup_say() { echo "setup: $*" >&2; }

# Packages to install, and what each one is for (for the messages).
SETUP_PACKAGES=()
SETUP_MISSING=()

setup_want() { # PACKAGE WHAT
    local p
    SETUP_MISSING+=("$2 (Debian package $1)")
    for p in ${SETUP_PACKAGES[@]+"${SETUP_PACKAGES[@]}"}; do
        [ "$p" = "$1" ] && return 0
    done
    SETUP_PACKAGES+=("$1")
}

# No way to install here: say what is missing and how to provide it, and stop.
setup_cannot_install() { # REASON
    {
        echo "setup: cannot install the missing tools: $1. Missing:"
        printf '  - %s\n' "${SETUP_MISSING[@]}"
        echo "Install them with the system's package manager, for example"
        echo "  Debian, Ubuntu:      apt-get install ${SETUP_PACKAGES[*]}"
        cat <<'EOF'
  RHEL, Rocky, Fedora: dnf install clang-devel openmpi-devel gcc-gfortran gcc pkgconf-pkg-config
                       (then: module load mpi/openmpi-x86_64)
  SUSE:                zypper install clang-devel openmpi4-devel gcc-fortran gcc pkg-config
or, on a cluster, load modules (module load llvm openmpi ...), or point the
build to what the machine has:
  LIBCLANG_PATH=DIR    the directory of libclang.so or libclang-<n>.so (the mpi
                       crate's bindgen); clang's headers must be in
                       DIR/clang/<version>/include, or add -I for them in
                       BINDGEN_EXTRA_CLANG_ARGS
  MPICC=PATH           the C compiler wrapper of the MPI library to build against,
  MPI_PKG_CONFIG=FILE  or its pkg-config file (CRAY_MPICH_DIR on Cray)
  MPIFC=PATH           the Fortran compiler wrapper (default mpif90)
then run the script again. SOSLB_SETUP=0 skips these checks.
EOF
    } >&2
    exit 1
}

# Install the queued packages, or stop with what to do instead.
setup_install() {
    ((${#SETUP_PACKAGES[@]})) || return 0
    local sudo=""
    command -v apt-get >/dev/null 2>&1 || setup_cannot_install "apt-get is not available"
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || setup_cannot_install "not root, and no sudo"
        sudo="sudo"
    fi
    setup_say "installing ${SETUP_PACKAGES[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${SETUP_PACKAGES[@]}" >&2
    SETUP_PACKAGES=()
    SETUP_MISSING=()
}

# Queue the package of every missing command; CMD=PACKAGE pairs.
setup_want_commands() {
    local pair
    for pair in "$@"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || setup_want "${pair#*=}" "the command ${pair%%=*}"
    done
}

# need_commands CMD=PACKAGE...: install the package of each missing command,
# then check that the commands are there.
need_commands() {
    [ "${SOSLB_SETUP:-1}" = 0 ] && return 0
    local pair
    setup_want_commands "$@"
    setup_install
    for pair in "$@"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || {
            setup_say "${pair#*=} is installed but there is still no command ${pair%%=*}"
            exit 1
        }
    done
}

# need_fusepy: Debian's python3-fusepy, for tests/fuse/stale_view.py (an
# NFSv3 client's view) on /usr/bin/python3.
need_fusepy() {
    [ "${SOSLB_SETUP:-1}" = 0 ] && return 0
    /usr/bin/python3 -c 'import fusepy' 2>/dev/null && return 0
    setup_want python3-fusepy "the Python module fusepy of /usr/bin/python3"
    setup_install
}

# have_libclang: does the build of the `mpi` crate find what its bindgen needs?
# bindgen loads libclang at run time (clang-sys's `runtime` feature), and looks
# for it exactly so: in $LIBCLANG_PATH alone when that is set (a directory, or
# the file itself), else in `llvm-config --prefix`/{bin,lib,lib64}, in
# $LD_LIBRARY_PATH and in the system library directories, for libclang.so,
# libclang-<n>.so, libclang.so.<n> or libclang-<n>.so.<m>, but never
# libclang-cpp (a different library that Debian ships without libclang). It
# then parses mpi.h, which includes <stddef.h>: clang's own headers
# (clang/<version>/include, Debian's libclang-common-<n>-dev) must be there too.
# Sets LIBCLANG_FOUND to the library found.
have_libclang() {
    local dirs=() patterns=() libs=() d f ld
    LIBCLANG_FOUND=""
    if [ -n "${LIBCLANG_PATH:-}" ]; then
        if [ -f "$LIBCLANG_PATH" ]; then
            LIBCLANG_FOUND=$LIBCLANG_PATH
            return 0
        fi
        dirs=("$LIBCLANG_PATH")
    else
        if command -v llvm-config >/dev/null 2>&1 && d=$(llvm-config --prefix 2>/dev/null); then
            dirs+=("$d/bin" "$d/lib" "$d/lib64")
        fi
        IFS=: read -r -a ld <<<"${LD_LIBRARY_PATH:-}"
        for d in ${ld[@]+"${ld[@]}"}; do [ -n "$d" ] && dirs+=("$d"); done
        patterns=(/usr/local/llvm*/lib* /usr/local/lib*/*/* /usr/local/lib*/* /usr/local/lib*
            /usr/lib*/*/* /usr/lib*/* /usr/lib*)
    fi
    local restore
    restore=$(shopt -p nullglob || true)
    shopt -s nullglob
    for d in ${dirs[@]+"${dirs[@]}"}; do
        libs+=("$d"/libclang.so "$d"/libclang-*.so "$d"/libclang.so.* "$d"/libclang-*.so.*)
    done
    for d in ${patterns[@]+"${patterns[@]}"}; do
        # shellcheck disable=SC2206 # the directory patterns are globs
        libs+=($d/libclang.so $d/libclang-*.so $d/libclang.so.* $d/libclang-*.so.*)
    done
    for f in ${libs[@]+"${libs[@]}"}; do
        case "${f##*/}" in *-cpp.*) continue ;; esac
        # A dangling link (the library's package removed) does not count.
        if [ -f "$f" ] && [ -r "$f" ]; then
            LIBCLANG_FOUND=$f
            break
        fi
    done
    local headers=()
    if [ -n "$LIBCLANG_FOUND" ]; then
        headers=("${LIBCLANG_FOUND%/*}"/clang/*/include/stddef.h /usr/lib/llvm-*/lib/clang/*/include/stddef.h
            /usr/lib*/clang/*/include/stddef.h /usr/local/lib*/clang/*/include/stddef.h)
    fi
    eval "$restore"
    [ -n "$LIBCLANG_FOUND" ] || return 1
    # A user who names the library knows where its headers are.
    [ -n "${LIBCLANG_PATH:-}" ] && return 0
    ((${#headers[@]})) || {
        setup_say "$LIBCLANG_FOUND is there, but not clang's headers (clang/<version>/include/stddef.h)"
        return 1
    }
}

# need_cargo_components NAME...: `cargo NAME` works (clippy, fmt), with rustup's
# help if need be.
need_cargo_components() {
    [ "${SOSLB_SETUP:-1}" = 0 ] && return 0
    local c missing=()
    for c in "$@"; do
        cargo "$c" --version >/dev/null 2>&1 || missing+=("$c")
    done
    ((${#missing[@]})) || return 0
    local components=("${missing[@]/#fmt/rustfmt}")
    if command -v rustup >/dev/null 2>&1; then
        setup_say "adding the Rust components ${components[*]}"
        rustup component add "${components[@]}"
    else
        setup_say "cargo ${missing[*]} not found: install the Rust components ${components[*]} (rustup component add ${components[*]})"
        exit 1
    fi
}

# The MPI to build and run with (SOSLB_MPI): its packages' commands, and
# the variables that point the build, the scripts and the tests to it.
case "${SOSLB_MPI:-}" in
    "")
        MPI_COMMANDS=(mpirun=openmpi-bin mpif90=libopenmpi-dev)
        [ -n "${MPICC:-}${MPI_PKG_CONFIG:-}${CRAY_MPICH_DIR:-}" ] || MPI_COMMANDS+=(mpicc=libopenmpi-dev)
        export MPIFC=${MPIFC:-mpif90} MPIEXEC=${MPIEXEC:-mpirun} ;;
    openmpi)
        MPI_COMMANDS=(mpirun.openmpi=openmpi-bin mpicc.openmpi=libopenmpi-dev mpif90.openmpi=libopenmpi-dev)
        export MPICC=mpicc.openmpi MPIFC=mpif90.openmpi MPIEXEC=mpirun.openmpi ;;
    mpich)
        MPI_COMMANDS=(mpiexec.mpich=mpich mpicc.mpich=libmpich-dev mpif90.mpich=libmpich-dev)
        export MPICC=mpicc.mpich MPIFC=mpif90.mpich MPIEXEC=mpiexec.mpich
        # rsmpi's build does not notice a change of MPICC: a tree of its own.
        export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/mpich} ;;
    *)
        setup_say "SOSLB_MPI=$SOSLB_MPI: say openmpi or mpich, or unset it (then MPICC or mpicc)"
        exit 1 ;;
esac
# The scripts' own SOSLB_* variables stay in this shell: soslb reads every
# SOSLB_* variable of a rank's environment as configuration, and refuses
# names it does not know.
export -n SOSLB_MPI SOSLB_SETUP SOSLB_SLURM_DIR 2>/dev/null || true

if [ "${SOSLB_SETUP:-1}" != 0 ]; then
    if ! command -v cargo >/dev/null 2>&1; then
        # shellcheck disable=SC1091
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
        command -v cargo >/dev/null 2>&1 || {
            setup_say "cargo not found: install Rust with rustup (https://rustup.rs)"
            exit 1
        }
    fi
    # MPICH and Open MPI share the mpicc/mpirun alternatives: note where they
    # point, so that installing one cannot switch what the other's build uses.
    mpi_default=$(readlink -f "$(command -v mpicc 2>/dev/null || echo /none)")
    setup_want_commands "${MPI_COMMANDS[@]}" gfortran=gfortran \
        cc=build-essential ar=binutils strip=binutils pkg-config=pkg-config
    if ! have_libclang; then
        if [ -n "${LIBCLANG_PATH:-}" ]; then
            setup_say "LIBCLANG_PATH=$LIBCLANG_PATH holds no libclang.so, libclang-<n>.so or libclang.so.<n>: set it to the directory of one, or unset it"
            exit 1
        fi
        setup_want libclang-dev "libclang and clang's headers, for the bindgen of the mpi crate"
    fi
    setup_install
    if [ "$mpi_default" != /none ] && [ "$(readlink -f "$(command -v mpicc)")" != "$mpi_default" ]; then
        setup_say "the install switched mpicc from $mpi_default to $(readlink -f "$(command -v mpicc)"): see update-alternatives --display mpi"
        exit 1
    fi
    setup_want_commands "${MPI_COMMANDS[@]}" gfortran=gfortran \
        cc=build-essential ar=binutils strip=binutils pkg-config=pkg-config
    have_libclang || setup_want libclang-dev "libclang and clang's headers, for the bindgen of the mpi crate"
    ((${#SETUP_MISSING[@]} == 0)) || {
        printf 'setup: still missing after the install: %s\n' "${SETUP_MISSING[@]}" >&2
        exit 1
    }
fi

# Open MPI refuses root unless told; many ranks share few cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Signal files of the scripts' runs stay inside the build tree.
export SOSLB_SIGNAL_DIR="${SOSLB_SIGNAL_DIR:-$ROOT/target/soslb-signals}"

# Cargo's target directory (CARGO_TARGET_DIR or a cargo config may move it).
target_dir() {
    local d
    d=$(cargo metadata --no-deps --format-version 1 2>/dev/null |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    echo "${d:-$ROOT/target}"
}

# Build the release library with the feature `emulate` (examples/slab.ron
# slows a rank down by emulation), install it into target/release/prefix the
# way a user does (scripts/install.sh), and build the Fortran example
# target/release/slab against that prefix with pkg-config.
build_slab() {
    cargo build --release --lib --features emulate
    local release
    release="$(target_dir)/release"
    bash "$ROOT/scripts/install.sh" --quiet --lib "$release/libsoslb.a" "$release/prefix"
    local flags
    flags=$(PKG_CONFIG_PATH="$release/prefix/lib/pkgconfig" pkg-config --cflags --libs soslb)
    mkdir -p "$release/slab-build"
    # shellcheck disable=SC2086 # flags are words
    (cd "$release/slab-build" && "$MPIFC" -O2 -o ../slab "$ROOT/examples/slab.f90" $flags)
}

# mpi_launch NP PROGRAM ARGS...: PROGRAM on NP ranks of this machine, with
# the launcher of the MPI the build uses (Open MPI's mpirun oversubscribes
# through OMPI_MCA_rmaps_base_oversubscribe; MPICH's Hydra always may).
mpi_launch() {
    local np=$1
    shift
    "$MPIEXEC" -n "$np" "$@"
}
