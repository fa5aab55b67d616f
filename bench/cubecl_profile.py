#!/usr/bin/env python3
"""Sums the kernel times of a CubeCL profiling log (cubecl.toml: [profiling] logger level
"basic" to a file) by kernel, over the last FRACTION of the launches (the steady state: the
first launches are warm-up and autotuning), and prints the heaviest kernels.

    bench/cubecl_profile.py LOG [FRACTION=0.4] [TOP=25]
"""
import collections
import sys


def ms(s):
    s = s.strip()
    for unit, f in (("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if s.endswith(unit):
            try:
                return float(s[: -len(unit)]) * f
            except ValueError:
                return None
    return None


def main():
    log = sys.argv[1]
    frac = float(sys.argv[2]) if len(sys.argv) > 2 else 0.4
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    launches = []
    for line in open(log, errors="replace"):
        if not line.startswith("| "):
            continue
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        t = ms(parts[0])
        if t is None or len(parts) < 2:
            continue
        name = parts[1] if len(parts) == 2 else parts[1] + " .. " + parts[-1]
        launches.append((name, t))
    launches = launches[int(len(launches) * (1 - frac)) :]
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for name, t in launches:
        tot[name] += t
        cnt[name] += 1
    all_ms = sum(tot.values())
    print(f"last {frac:.0%} of the launches: {len(launches)} launches, {all_ms:.1f} ms of kernel time")
    for k, v in sorted(tot.items(), key=lambda x: -x[1])[:top]:
        print(f"{v:10.2f} ms {100 * v / max(all_ms, 1e-9):5.1f}% {cnt[k]:6d}x {v / cnt[k]:9.4f} ms/launch  {k[:160]}")


if __name__ == "__main__":
    main()
