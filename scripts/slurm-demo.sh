#!/usr/bin/env bash
# The demo as a grid user runs it: the Fortran slab example (6 ranks, rank 5
# four times slower, examples/slab.ron) submitted with sbatch to the one-node
# Slurm of scripts/slurm.sh (started here when it does not run, and stopped
# again at the end), with a walltime of 5 minutes that soslb learns from Slurm
# itself. Waits for the job and prints its output file: the summary table and
# the `stats:` line. SOSLB_MPI=mpich runs it under MPICH (setup.sh).
#
# usage: scripts/slurm-demo.sh [total]   (default 40000)
. "$(dirname "$0")/setup.sh"
total="${1:-40000}"
build_slab
slab="$(target_dir)/release/slab"

eval "$(bash scripts/slurm.sh env)"
started=0
if ! scontrol ping >/dev/null 2>&1; then
    bash scripts/slurm.sh start
    started=1
fi
stop_slurm() { ((started == 0)) || bash scripts/slurm.sh stop; }
trap stop_slurm EXIT

out_dir="$ROOT/target/slurm-demo"
mkdir -p "$out_dir"
job="$out_dir/slab.sh"
cat >"$job" <<EOF
#!/bin/bash
#SBATCH --job-name=slab
#SBATCH --ntasks=6
#SBATCH --overcommit
#SBATCH --time=5
#SBATCH --output=$out_dir/slab-%j.out
# The walltime comes from Slurm; rank 0 warns if the job will not end in time.
export SOSLB_ON_DEADLINE=Stop
cd "$ROOT"
$MPIEXEC -n \$SLURM_NTASKS "$slab" $total examples/slab.ron
EOF
id=$(sbatch --parsable --wait "$job") || {
    echo "slurm-demo.sh: the job failed: $(ls -t "$out_dir"/slab-*.out 2>/dev/null | head -1)" >&2
    exit 1
}
echo "slurm-demo.sh: job $id: $(sacct -X -n -P -j "$id" -o State,Elapsed,Timelimit | tr '|' ' ')" >&2
echo "slurm-demo.sh: its output, $out_dir/slab-$id.out:" >&2
cat "$out_dir/slab-$id.out"
