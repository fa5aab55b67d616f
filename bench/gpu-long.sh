#!/usr/bin/env bash
# The training-length probe of REPRODUCTION.md ("AE-CM on MNIST"): one AE-CM run of the paper's
# MNIST setting for more epochs than the 150 of the tables, on a GPU, with ARI/NMI/ACC and L_sp
# every EVERY epochs, so the curve shows whether the clusters keep improving after epoch 150
# (the authors' code trains 1000):
#   bench/gpu-long.sh AECM_BINARY DATA_DIR OUT_DIR [EPOCHS] [SEED] [SECONDS] [EVERY]
# defaults 1000 epochs, seed 6 (ARI 78.0 at 150 epochs on an H200), 540 s, every 50. About 0.5 s
# an epoch on an H200 (BENCHMARKS.md). At SECONDS the run gets SIGINT: it stops after the current
# step and still writes its summary (history up to there, final scores, `"interrupted": true`).
# Writes OUT_DIR/mnist-long/summary.json (and assignments.csv, the final clusters) and prints
# the curve (epoch, ARI, NMI, ACC, L_sp) into OUT_DIR/gpu-long.log.
set -u
BIN=$1
DATA=$2
OUT=$3
EPOCHS=${4:-1000}
SEED=${5:-6}
BUDGET=${6:-540}
EVERY=${7:-50}
# shellcheck source=bench/gpu-common.sh
. "$(dirname "$0")/gpu-common.sh"
need_hardware
say "AE-CM MNIST, seed $SEED, $EPOCHS epochs, scores every $EVERY"
l=$(left)
timeout -s INT "$((l - 10))" "$BIN" train --data "$DATA/mnist" --model aecm --preset mnist \
  --seed "$SEED" --epochs "$EPOCHS" --eval-every "$EVERY" --eval-budget 0 --device wgpu \
  --out "$OUT/mnist-long" 2>&1 | grep -v "epoch .*ETA" | tail -5 | tee -a "$LOG"
python3 - "$OUT/mnist-long/summary.json" <<'EOF' | tee -a "$LOG"
import json, sys
s = json.load(open(sys.argv[1]))
print("epoch phase ARI NMI ACC L_sp")
for h in s["history"]:
    m = h.get("metrics")
    if m:
        print(h["epoch"], h["phase"], *(f"{100 * m[k]:.1f}" for k in ("ari", "nmi", "acc")),
              f"{h['l_sp']:.1f}")
km = s.get("km_on_embedding") or {}
print("final:", {k: round(100 * v, 1) for k, v in s["metrics"].items()},
      "AE-CM+KM ARI:", round(100 * km.get("ari", float("nan")), 1),
      "interrupted:", s["interrupted"], "wall_s:", round(s["wall_s"], 1))
# where each class went (% of the class in its two largest clusters): are 4 and 9 apart?
import csv, collections
counts = collections.defaultdict(collections.Counter)
for row in csv.DictReader(open(sys.argv[1].replace("summary.json", "assignments.csv"))):
    if row.get("label", "") != "":
        counts[row["label"]][row["cluster"]] += 1
for c in sorted(counts, key=lambda v: int(v) if v.isdigit() else 0):
    n = sum(counts[c].values())
    print(f"class {c}:", ", ".join(f"{100 * m / n:.0f}% in cluster {k}" for k, m in counts[c].most_common(2)))
EOF
say "done"
