#!/usr/bin/env bash
# The AE-CM's own GPU step (model/gpu.rs) on a machine with a GPU and a Vulkan driver:
#   bench/gpu-step.sh AECM_BINARY DATA_DIR OUT_DIR [SECONDS] [RUNS]
# 1. `aecm devices`, and the GPU's clocks and load every 0.5 s into OUT_DIR/smi.csv;
# 2. the GPU time of every dispatch of the aecm-mnist step (AECM_GPU_PROFILE=1: each dispatch
#    timed with timestamp queries, steps serialised; the table goes to the log);
#    `aecm bench --device wgpu` on the AE-CM step cases with each product tile choice
#    (AECM_GPU_TILES unset = the vec4 kernels chosen per shape; a22 = the first, array kernel;
#    u = the vec4 kernels unrolled, p = unrolled with the next k tile prefetched; each with its
#    own profile), and with AECM_GPU_TRUSTED=1 (no runtime checks in the products' shaders),
#    and with AECM_GPU_SPLITK=off (split k is on by default since the fifteenth session) and
#    auto:256 (k = 500 products split too; profile and bench);
# 3. one warm AE-CM epoch on all 70,000 MNIST images with its evaluation (`--data-dir`);
# 4. PyTorch's reference step on CUDA, same card (`bench/reference.py --device cuda --epoch`);
# 5. AE-CM from random init with the paper's settings (150 epochs) on MNIST, seeds 0..RUNS-1
#    (default 20, the paper's count), until SECONDS (default 400) have passed: `aecm reproduce
#    --experiment aecm-table --only aecm-random --device wgpu`, resumed from the runs the
#    repository keeps (repro_results/records/aecm-table, copied into OUT_DIR/repro), so only new
#    seeds run (about 75 s each on an H200); the runs and tables end in OUT_DIR/repro.tgz.
# Everything is logged to OUT_DIR/gpu-step.log; each step has its own time limit.
set -u
BIN=$1
DATA=$2
OUT=$3
BUDGET=${4:-400}
RUNS=${5:-20}
# shellcheck source=bench/gpu-common.sh
. "$(dirname "$0")/gpu-common.sh"
nvidia-smi -L 2>&1 | tee -a "$LOG"
need_hardware
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv \
  -lms 500 >"$OUT/smi.csv" 2>&1 &
SMI=$!
AECM_GPU_PROFILE=1 run 40 "$BIN" bench --device wgpu --cases aecm-mnist --reps 1
for t in u p; do
  AECM_GPU_TILES=$t AECM_GPU_PROFILE=1 run 40 "$BIN" bench --device wgpu --cases aecm-mnist --reps 1
done
# the product kernels without naga's bounds checks and loop counters, default and unrolled
for t in auto u; do
  AECM_GPU_TRUSTED=1 AECM_GPU_TILES=$t run 40 "$BIN" bench --device wgpu --cases aecm-mnist,aecm-pendigits \
    --reps 5 --json "$OUT/bench-trusted-$t.json"
done
for t in auto a22 u p; do
  AECM_GPU_TILES=$t run 40 "$BIN" bench --device wgpu --cases aecm-mnist,aecm-pendigits --reps 5 \
    --json "$OUT/bench-$t.json"
done
# without split k for the products of few workgroups and deep k (on by default)
AECM_GPU_SPLITK=off run 40 "$BIN" bench --device wgpu --cases aecm-mnist,aecm-pendigits --reps 5 \
  --json "$OUT/bench-nosplit.json"
AECM_GPU_SPLITK=auto:256 AECM_GPU_PROFILE=1 run 40 "$BIN" bench --device wgpu --cases aecm-mnist --reps 1
AECM_GPU_SPLITK=auto:256 run 40 "$BIN" bench --device wgpu --cases aecm-mnist,aecm-pendigits --reps 5 \
  --json "$OUT/bench-split256.json"
run 90 "$BIN" bench --device wgpu --cases aecm-mnist --data-dir "$DATA" --reps 3 --json "$OUT/bench-real.json"
if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  run 60 python3 bench/reference.py --device cuda --reps 5 --epoch >"$OUT/torch-cuda.json"
  tee -a "$LOG" <"$OUT/torch-cuda.json"
fi
R=$OUT/repro
mkdir -p "$R"
[ -d repro_results/records/aecm-table/runs ] && cp -r repro_results/records/aecm-table/runs "$R/"
# the reproduction only when a step is fast enough for 150 epochs in a few minutes
if ! python3 -c "import json,sys; sys.exit(json.load(open('$OUT/bench-auto.json'))['cases'][0]['ms_per_step'] > ${MAX_MS:-4})"; then
  say "step too slow for the reproduction: skipped"
  RUNS=0
fi
# one seed per call, from the first seed not stored yet
STORED=$(find "$R/runs/mnist/aecm-random" -name 'seed-*.json' 2>/dev/null | wc -l)
for runs in $(seq $((STORED + 1)) "$RUNS"); do
  [ "$(left)" -le 20 ] && break
  run 300 "$BIN" reproduce --experiment aecm-table --data-dir "$DATA" --datasets mnist \
    --only aecm-random --runs "$runs" --device wgpu --out "$R" --quiet
done
[ -f "$R/aecm-table.md" ] && tee -a "$LOG" <"$R/aecm-table.md"
tar czf "$OUT/repro.tgz" -C "$OUT" repro 2>/dev/null
kill "$SMI" 2>/dev/null
say "done"
