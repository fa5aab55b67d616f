#!/usr/bin/env bash
# Runs `aecm bench` and the PyTorch reference on this machine, one after the other, with the
# same thread count, and prints one line per case: CASE aecm_ms torch_ms ratio
# (ratio = torch_ms / aecm_ms: above 1 means aecm is faster).
# PyTorch comes from PyPI into a virtual environment of its own (pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=2.15.0
VENV=${AECM_BENCH_VENV:-$HOME/.cache/aecm-bench-venv}
THREADS=${THREADS:-$(nproc)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/aecm-target}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION"
fi
cargo build --release --quiet
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
"$CARGO_TARGET_DIR/release/aecm" bench --device cpu --threads "$THREADS" --json "$OUT/aecm.json" >&2
"$VENV/bin/python" bench/reference.py --threads "$THREADS" > "$OUT/torch.json"
python3 - "$OUT/aecm.json" "$OUT/torch.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
t = json.load(open(sys.argv[2]))
tm = {c["name"]: c["ms_per_step"] for c in t["cases"]}
print(f"# aecm {a['device']} vs torch {t['torch']} ({t['threads']} threads)")
for c in a["cases"]:
    if c["name"] in tm:
        print(f"{c['name']} {c['ms_per_step']:.3f} {tm[c['name']]:.3f} {tm[c['name']] / c['ms_per_step']:.2f}")
PY
