#!/usr/bin/env bash
# Installs soslb into a prefix, as an HPC library:
#
#   PREFIX/lib/libsoslb.a                     the library and the compiled Fortran module
#   PREFIX/include/soslb.h                    the C interface
#   PREFIX/include/soslb.mod                  the Fortran module, compiled by $MPIFC (mpif90)
#   PREFIX/lib/pkgconfig/soslb.pc             mpif90 prog.f90 $(pkg-config --cflags --libs soslb)
#   PREFIX/lib/cmake/soslb/soslbConfig.cmake  find_package(soslb): the target soslb::soslb
#   PREFIX/share/soslb/soslb.f90              the module's source, for another compiler
#   PREFIX/bin/soslb                          the soslb command, when it was built
#                                             beside the library (cargo build --release)
#
# The MPI the library was built against (Open MPI, or MPICH and its ABI:
# Intel MPI, MVAPICH, Cray MPICH) is recorded in soslb.pc (`pkg-config
# --variable=mpi soslb`) and in the CMake package, which refuses a project
# that found the other MPI; `soslb --version` prints it too. The install
# refuses a Fortran wrapper of another MPI than the library's, and a prefix
# that holds soslb built with another MPI.
#
# usage: scripts/install.sh [--lib LIBSOSLB_A] [--keep-debug] [--quiet] PREFIX
#
#   --lib FILE     install this libsoslb.a instead of building the release one
#                  (cargo build --release --lib, after the set-up of setup.sh)
#   --keep-debug   keep the debug information (line tables) in the archive; by
#                  default it is stripped (the LLVM bitcode that only rustc reads
#                  is always stripped)
#   --quiet        print nothing on success
#
# Environment: MPIFC, the MPI Fortran compiler wrapper (default mpif90;
# SOSLB_MPI=mpich makes it mpif90.mpich, see setup.sh), which
# compiles the module: a .mod file is read only by the compiler (and version)
# that wrote it. FCFLAGS, its flags (default -O2 -fPIC).
set -euo pipefail
usage="usage: scripts/install.sh [--lib LIBSOSLB_A] [--keep-debug] [--quiet] PREFIX"
lib="" keep_debug=0 quiet=0 prefix=""
while (($#)); do
    case "$1" in
        --lib)
            (($# >= 2)) || { echo "$usage" >&2; exit 2; }
            lib=$2
            shift 2 ;;
        --keep-debug) keep_debug=1; shift ;;
        --quiet) quiet=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "install: unknown option $1" >&2; echo "$usage" >&2; exit 2 ;;
        *)
            [ -z "$prefix" ] || { echo "install: one PREFIX only" >&2; echo "$usage" >&2; exit 2; }
            prefix=$1
            shift ;;
    esac
done
[ -n "$prefix" ] || { echo "$usage" >&2; exit 2; }
# Relative paths are relative to where the script was started (setup.sh changes
# to the repository).
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
case "$lib" in "" | /*) ;; *) lib="$PWD/$lib" ;; esac

fail() { echo "install: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "$lib" ]; then
    # shellcheck source=scripts/setup.sh
    . "$ROOT/scripts/setup.sh"
    cargo build --release --lib
    lib="$(target_dir)/release/libsoslb.a"
fi
[ -f "$lib" ] || fail "no library $lib"
mpifc=${MPIFC:-mpif90}
command -v "$mpifc" >/dev/null 2>&1 ||
    fail "no MPI Fortran compiler wrapper $mpifc: install Open MPI or MPICH with Fortran, or set MPIFC"
for tool in ar nm strip objcopy; do
    command -v "$tool" >/dev/null 2>&1 || fail "no $tool: install binutils"
done
version=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$ROOT/Cargo.toml" | head -1)
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/soslb-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The Fortran module: soslb.mod and its object code, which goes into the archive.
# shellcheck disable=SC2086 # FCFLAGS are words
(cd "$work" && "$mpifc" ${FCFLAGS:--O2 -fPIC} -c "$ROOT/fortran/soslb.f90" -o soslb_fortran.o) ||
    fail "$mpifc could not compile fortran/soslb.f90"
[ -f "$work/soslb.mod" ] || fail "$mpifc wrote no soslb.mod"

# The archive: the Rust library, lean, plus the module's object. The LLVM
# bitcode of Rust's objects serves only rustc's link-time optimisation.
cp "$lib" "$work/libsoslb.a"
if ((keep_debug)); then
    objcopy --remove-section=.llvmbc --remove-section=.llvmcmd "$work/libsoslb.a"
else
    strip --strip-debug --remove-section=.llvmbc --remove-section=.llvmcmd "$work/libsoslb.a"
fi
ar rs "$work/libsoslb.a" "$work/soslb_fortran.o"
nm "$work/libsoslb.a" >"$work/symbols" 2>/dev/null || true
grep -q ' T soslb_init$' "$work/symbols" || fail "$lib does not define soslb_init: is it soslb's library?"
ar t "$work/libsoslb.a" >"$work/members"
grep -qx soslb_fortran.o "$work/members" || fail "the Fortran module's object is not in the archive"

# Which MPI: the library's, from its undefined symbols (Open MPI's mpi.h makes
# MPI_COMM_WORLD a global, ompi_mpi_comm_world; MPICH's handles are
# integers), and the Fortran wrapper's, from the library it links
# (MPI_Get_library_version, callable before MPI_Init).
family() { case "$1" in *"Open MPI"*) echo openmpi ;; *) echo mpich ;; esac; }
if grep -q ' U ompi_mpi_comm_world$' "$work/symbols"; then lib_mpi=openmpi; else lib_mpi=mpich; fi
cat >"$work/mpi_version.f90" <<'EOF'
program which_mpi
   use mpi
   implicit none
   character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: v
   integer :: n, ierr
   call MPI_Get_library_version(v, n, ierr)
   write (*, '(a)') v(1:n)
end program which_mpi
EOF
(cd "$work" && "$mpifc" -o mpi_version mpi_version.f90 >/dev/null 2>&1) ||
    fail "$mpifc could not build a program that asks its MPI library for its version"
# The first line, blanks squeezed, up to the first comma:
# "MPICH Version: 4.0.2", "Open MPI v4.1.4".
mpi_version=$("$work/mpi_version" | head -1 | tr -s ' \t' '  ' | sed 's/,.*//; s/ *$//')
[ -n "$mpi_version" ] || fail "$work/mpi_version printed no version"
[ "$(family "$mpi_version")" = "$lib_mpi" ] ||
    fail "$lib was built against $lib_mpi, but $mpifc is $mpi_version: build the library with the same MPI (SOSLB_MPI, MPICC) or set MPIFC to its Fortran wrapper"
if [ -f "$prefix/lib/pkgconfig/soslb.pc" ]; then
    before=$(sed -n 's/^mpi=//p' "$prefix/lib/pkgconfig/soslb.pc")
    [ -z "$before" ] || [ "$(family "$before")" = "$lib_mpi" ] ||
        fail "$prefix holds soslb built with $before; this one is built with $mpi_version: install into another prefix, or remove $prefix first"
fi

# What Rust's std needs from the system (rustc --print native-static-libs,
# without the MPI library, which the MPI compiler wrapper or MPI::MPI_* adds).
syslibs="-lgcc_s -lutil -lrt -lpthread -lm -ldl"

cat >"$work/soslb.pc" <<EOF
# soslb: load balancing of Monte-Carlo realisations over MPI ranks.
# Build with the MPI compiler wrapper, which adds the MPI libraries:
#   mpif90 prog.f90 \$(pkg-config --cflags --libs soslb)
#   mpicc prog.c \$(pkg-config --cflags --libs soslb)
# Built with $mpi_version: link with the same MPI (pkg-config --variable=mpi soslb).
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include
mpi=$mpi_version
mpi_family=$lib_mpi

Name: soslb
Description: Load balancing of Monte-Carlo realisations over MPI ranks (Fortran and C), built with $mpi_version
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lsoslb $syslibs
EOF

cat >"$work/soslbConfig.cmake" <<EOF
# The MPI this soslb was built with: $mpi_version.
set(soslb_MPI "$mpi_version")
set(soslb_MPI_FAMILY "$lib_mpi")
EOF
cat >>"$work/soslbConfig.cmake" <<'EOF'
# The CMake package of soslb (written by scripts/install.sh):
#
#   find_package(MPI REQUIRED COMPONENTS Fortran)
#   find_package(soslb REQUIRED)
#   target_link_libraries(prog PRIVATE soslb::soslb MPI::MPI_Fortran)
#
# soslb::soslb is the static library (with the compiled Fortran module), the
# include directory of soslb.mod and soslb.h, and what the library needs at
# link time: MPI's library and the system libraries of Rust's std. The library
# was built against one MPI: use the same one.
if(TARGET soslb::soslb)
  return()
endif()
get_filename_component(_soslb_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
foreach(_soslb_file IN ITEMS lib/libsoslb.a include/soslb.mod include/soslb.h)
  if(NOT EXISTS "${_soslb_prefix}/${_soslb_file}")
    set(soslb_FOUND FALSE)
    set(soslb_NOT_FOUND_MESSAGE "${_soslb_prefix}/${_soslb_file} is missing: install soslb again")
    return()
  endif()
endforeach()

# The library calls MPI's C functions: use the MPI the project found, or find
# it for the project's languages.
if(NOT TARGET MPI::MPI_C AND NOT TARGET MPI::MPI_Fortran)
  get_property(_soslb_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(_soslb_components "")
  foreach(_soslb_language IN ITEMS C Fortran)
    list(FIND _soslb_languages ${_soslb_language} _soslb_index)
    if(NOT _soslb_index EQUAL -1)
      list(APPEND _soslb_components ${_soslb_language})
    endif()
  endforeach()
  if(NOT _soslb_components)
    set(soslb_FOUND FALSE)
    set(soslb_NOT_FOUND_MESSAGE "soslb needs the Fortran or the C language: project(... LANGUAGES Fortran)")
    return()
  endif()
  include(CMakeFindDependencyMacro)
  find_dependency(MPI COMPONENTS ${_soslb_components})
endif()
if(TARGET MPI::MPI_C)
  set(_soslb_mpi MPI::MPI_C)
  set(_soslb_found "${MPI_C_LIBRARIES}")
else()
  set(_soslb_mpi MPI::MPI_Fortran)
  set(_soslb_found "${MPI_Fortran_LIBRARIES}")
endif()
# Open MPI and MPICH are not interchangeable: refuse the other one (Open
# MPI's libraries include libopen-pal).
if(_soslb_found)
  if(_soslb_found MATCHES "open-pal|mpi_mpifh")
    set(_soslb_family openmpi)
  else()
    set(_soslb_family mpich)
  endif()
  if(NOT _soslb_family STREQUAL soslb_MPI_FAMILY)
    set(soslb_FOUND FALSE)
    set(soslb_NOT_FOUND_MESSAGE "soslb in ${_soslb_prefix} was built with ${soslb_MPI}, but the project found another MPI (${_soslb_found}): point CMake to the same MPI (-DMPI_Fortran_COMPILER=..., -DMPI_C_COMPILER=...) or use a soslb built with that one")
    return()
  endif()
endif()

add_library(soslb::soslb STATIC IMPORTED)
set_target_properties(soslb::soslb PROPERTIES
  IMPORTED_LOCATION "${_soslb_prefix}/lib/libsoslb.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_soslb_prefix}/include"
  INTERFACE_LINK_LIBRARIES "${_soslb_mpi};gcc_s;util;rt;pthread;m;dl")
set(soslb_INCLUDE_DIR "${_soslb_prefix}/include")
set(soslb_LIBRARY "${_soslb_prefix}/lib/libsoslb.a")
EOF

# Compatible: the same major version, or while that is 0 the same minor one.
major=${version%%.*} minor=$(echo "$version" | cut -d. -f2)
same="PACKAGE_FIND_VERSION_MAJOR EQUAL $major"
[ "$major" != 0 ] || same="$same AND PACKAGE_FIND_VERSION_MINOR EQUAL $minor"
cat >"$work/soslbConfigVersion.cmake" <<EOF
# find_package(soslb X.Y[.Z]) accepts soslb $version when X.Y.Z is not newer
# and ($same).
set(PACKAGE_VERSION "$version")
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR NOT ($same))
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
EOF

install -d "$prefix/lib/pkgconfig" "$prefix/lib/cmake/soslb" "$prefix/include" "$prefix/share/soslb"
install -m 644 "$work/libsoslb.a" "$prefix/lib/libsoslb.a"
install -m 644 "$ROOT/fortran/soslb.h" "$work/soslb.mod" "$prefix/include/"
install -m 644 "$work/soslb.pc" "$prefix/lib/pkgconfig/soslb.pc"
install -m 644 "$work/soslbConfig.cmake" "$work/soslbConfigVersion.cmake" "$prefix/lib/cmake/soslb/"
install -m 644 "$ROOT/fortran/soslb.f90" "$prefix/share/soslb/soslb.f90"
# The soslb command, when it was built beside the library.
if [ -x "$(dirname "$lib")/soslb" ]; then
    install -d "$prefix/bin"
    install -m 755 "$(dirname "$lib")/soslb" "$prefix/bin/soslb"
fi

if ((!quiet)); then
    size=$(wc -c <"$prefix/lib/libsoslb.a" | awk '{printf "%.1f", $1 / 1e6}')
    cat <<EOF
install: soslb $version in $prefix (lib/libsoslb.a: $size MB; module by $(command -v "$mpifc"); $mpi_version)
  pkg-config: export PKG_CONFIG_PATH=$prefix/lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
              ${mpifc##*/} prog.f90 \$(pkg-config --cflags --libs soslb)
  CMake:      cmake -DCMAKE_PREFIX_PATH=$prefix ..   with find_package(soslb) and soslb::soslb
EOF
fi
