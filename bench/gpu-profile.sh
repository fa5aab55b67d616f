#!/usr/bin/env bash
# Where the time of a training step goes on a GPU (wgpu):
#   bench/gpu-profile.sh AECM_BINARY OUT_DIR
# 1. `aecm bench --device wgpu` on the step cases, with the process's CPU time per step;
# 2. aecm-mnist with CUBECL_AUTOTUNE_LEVEL minimal and extensive;
# 3. the same under CubeCL's kernel profiler (every kernel is timed, with a wait after each, so
#    the steps are slower): the heaviest kernels of the steady state, per case.
set -u
BIN=$(realpath "$1")
OUT=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
LOG=$OUT/profile.log
echo "=== bench (no profiler)" | tee -a "$LOG"
timeout 100 "$BIN" bench --device wgpu --cases cm-mnist,aecm-mnist,aecm-pendigits --reps 5 2>&1 | tee -a "$LOG"
# the autotuner's effort: does a more extensive search find faster products for these shapes?
for lvl in minimal extensive; do
  echo "=== CUBECL_AUTOTUNE_LEVEL=$lvl (tuning caches cleared first)" | tee -a "$LOG"
  # CubeCL keeps tuning results in ./target/environment under a Cargo project, else ~/.cache/cubecl
  rm -rf target/environment "$HOME/.cache/cubecl"
  CUBECL_AUTOTUNE_LEVEL=$lvl timeout 100 "$BIN" bench --device wgpu --cases aecm-mnist --reps 5 2>&1 | tee -a "$LOG"
done
for c in aecm-mnist cm-mnist; do
  P=$(mktemp -d)
  printf '[profiling]\nlogger = { level = "basic", file = "%s/prof.log", append = false }\n' "$P" >"$P/cubecl.toml"
  echo "=== $c under the CubeCL profiler" | tee -a "$LOG"
  (cd "$P" && timeout 80 "$BIN" bench --device wgpu --cases "$c" --reps 3 2>&1) | tee -a "$LOG"
  python3 "$HERE/cubecl_profile.py" "$P/prof.log" 0.4 30 2>&1 | tee -a "$LOG"
  gzip -c "$P/prof.log" >"$OUT/prof-$c.log.gz"
done
echo "=== done" | tee -a "$LOG"
