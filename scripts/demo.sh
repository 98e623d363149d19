#!/usr/bin/env bash
# The main job: the Fortran slab example on 6 ranks, rank 5 four times slower
# (examples/slab.ron), balanced. Prints the per-rank summary and the statistics,
# which are the same bit for bit whatever the balancing did. The example is
# built as a user builds against an installed soslb (build_slab, setup.sh).
# SOSLB_MPI=mpich runs it under MPICH (setup.sh).
. "$(dirname "$0")/setup.sh"
build_slab
total="${1:-40000}"
mpi_launch 6 "$(target_dir)/release/slab" "$total" examples/slab.ron
