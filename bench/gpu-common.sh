# Helpers of bench/gpu.sh, bench/gpu-step.sh and bench/gpu-long.sh (sourced right after their
# arguments are read): the caller sets BUDGET (seconds) and OUT (a folder); sourcing creates OUT,
# starts the clock (START) and names the log OUT/SCRIPT.log (LOG).
mkdir -p "$OUT"
LOG=$OUT/$(basename "$0" .sh).log
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }
say() { echo "=== [$((SECONDS - START)) s] $*" | tee -a "$LOG" >&2; }
run() { # run LIMIT CMD...: at most LIMIT seconds (and never past the budget)
  local lim=$1
  shift
  local l
  l=$(left)
  [ "$lim" -gt "$l" ] && lim=$l
  if [ "$lim" -le 5 ]; then
    say "skipped (budget spent): $*"
    return 1
  fi
  say "$* (limit ${lim} s)"
  timeout "$lim" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  say "exit $rc"
  return "$rc"
}
# true when `BIN devices` (listed into OUT/devices.txt and the log) shows a hardware adapter
hardware() { "$BIN" devices 2>&1 | tee "$OUT/devices.txt" | tee -a "$LOG"; ! grep -q "^auto: cpu" "$OUT/devices.txt"; }
# a hardware adapter, trying the NVIDIA driver's Vulkan manifest when none shows up; exits if none
need_hardware() {
  if ! hardware; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    say "no hardware adapter: again with VK_DRIVER_FILES=$VK_DRIVER_FILES"
    if ! hardware; then
      say "no hardware adapter: giving up"
      exit 3
    fi
  fi
}
