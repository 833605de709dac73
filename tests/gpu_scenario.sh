#!/bin/sh
# A scenario on the simulator, then trained for real on the GPU target with the simulated summary
# to compare against: both must finish, and the GPU run must print and record measured beside
# predicted.  Exit 77 (skipped) where the GPU target finds no device.
#   gpu_scenario.sh MPIEXEC SIM_BINARY GPU_BINARY SCENARIO OUTDIR
set -u
mpiexec=$1 sim=$2 gpu=$3 scenario=$4 out=$5
rm -rf "$out" && mkdir -p "$out"
"$sim" run "$scenario" --out "$out/sim" || { echo "simulated run failed"; exit 1; }
"$mpiexec" -np 1 "$gpu" run "$scenario" --out "$out/gpu" --compare "$out/sim/summary.json"
rc=$?
if [ $rc -eq 77 ]; then echo "no CUDA device found: skipping the GPU scenario"; exit 77; fi
[ $rc -eq 0 ] || { echo "GPU run failed with $rc"; exit 1; }
grep -q '"target": "nccl"' "$out/gpu/summary.json" || { echo "summary does not name the nccl target"; exit 1; }
grep -q '"compared"' "$out/gpu/summary.json" || { echo "summary has no comparison"; exit 1; }
echo "GPU scenario: measured beside predicted in $out/gpu/summary.json"
