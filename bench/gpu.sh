#!/usr/bin/env bash
# The GPU measurements of BENCHMARKS.md and REPRODUCTION.md in one script, for a machine with a
# GPU and a Vulkan driver:
#   bench/gpu.sh AECM_BINARY DATA_DIR OUT_DIR [SECONDS]
# 1. `aecm devices` (which adapter wgpu sees),
# 2. `aecm bench --device wgpu --data-dir DATA_DIR` (the four cases, the GEMM probe, one warm
#    epoch of cm-mnist and aecm-mnist on all 70,000 MNIST images),
# 3. the PyTorch reference on CUDA (`bench/reference.py --device cuda --epoch`), when python3 has
#    torch with CUDA,
# 4. AE-CM from random init with the paper's settings (150 epochs) on MNIST, Pendigits and USPS,
#    seed after seed, until SECONDS (default 420) have passed since the start:
#    `aecm reproduce --experiment aecm-table --only aecm-random --device wgpu`.
# Everything is logged to OUT_DIR/gpu.log; the reproduction's runs and tables end in
# OUT_DIR/repro.tgz. Each step has its own time limit, so a slow step cannot eat the others.
set -u
BIN=$1
DATA=$2
OUT=$3
BUDGET=${4:-420}
# shellcheck source=bench/gpu-common.sh
. "$(dirname "$0")/gpu-common.sh"

nvidia-smi -L 2>&1 | tee -a "$LOG"
# where the Vulkan loader and the drivers' manifests are (for when no adapter shows up)
{ ldconfig -p | grep -i vulkan; ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d \
  /usr/local/nvidia/share/vulkan/icd.d 2>&1; } | tee -a "$LOG"
say "aecm devices"
need_hardware
run 170 "$BIN" bench --device wgpu --data-dir "$DATA" --reps 5 --json "$OUT/bench-wgpu.json"
if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  run 90 python3 bench/reference.py --device cuda --reps 5 --epoch >"$OUT/torch-cuda.json"
  cat "$OUT/torch-cuda.json" | tee -a "$LOG"
fi
R=$OUT/repro
for runs in 1 2 3 4 5; do
  for ds in mnist pendigits usps; do
    [ "$(left)" -le 30 ] && break 2
    run 400 "$BIN" reproduce --experiment aecm-table --data-dir "$DATA" --datasets "$ds" \
      --only aecm-random --runs "$runs" --device wgpu --out "$R" --quiet
  done
done
[ -f "$R/aecm-table.md" ] && tee -a "$LOG" <"$R/aecm-table.md"
tar czf "$OUT/repro.tgz" -C "$OUT" repro 2>/dev/null
say "done"
