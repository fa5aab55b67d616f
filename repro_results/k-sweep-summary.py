#!/usr/bin/env python3
"""One line per K of the K sweep: the stored runs' ARI and homogeneity on Pendigits and USPS.

Usage: python3 repro_results/k-sweep-summary.py [RECORDS_DIR]
       (default: repro_results/records/k-sweep; reads RUNS/DATASET/aecm-random-KN/seed-*.json)

Prints a Markdown table: for each data set the mean ± std of the ARI (population std, as
`aecm reproduce` writes it) over the stored seeds,
its median (which a single degenerate run barely moves, unlike the mean), the ARI of the run with
the lowest L_sp (the paper's model selection), and the mean homogeneity; values x100, one decimal.
The highest mean and the highest median of each data set are in bold. A line above the table says how
many runs each K has; if the K of a data set do not all have the same seeds, each set of seeds is
listed with the K that have it, so a partial column cannot pass for a full one; it ends with the
runs in all and how many of them name the CPU they ran on (the records' `cpu`). The numbers are the ones `repro_results/k-sweep.md`
gives (mean, std, L_sp-selected) plus the median, which that table does not carry.

Below the table, one line per data set and pair of K among 9-12 (the K around the maximum): over
the seeds both K have, on how many the higher K scores the higher ARI, and the seed-by-seed
difference (higher K minus lower) as its mean, sample standard deviation and standard error
(sample std / sqrt(seeds)), which says how far the seeds stored can order the two K.

Last, one line per data set and number of seeds n (seeds 0..n-1, over the K that have them all): the
K with the highest mean and the K with the highest median ARI, each with its lead over the runner-up
(the difference of the two values as printed, to two decimals), which the Pendigits and USPS
bullets of REPRODUCTION.md sum up (up to the eighty-second session they listed them one by one).
Then, per data set, that sum: over the seed counts from TALLY_FROM seeds on that every K has, how
often the highest mean (and the highest median) changed hands from one count to the next, and for
each leading K at how many counts it led, at which, and its smallest and largest lead.

Last of all, per data set, the MULTIPLES largest L_sp multiples: each run's L_sp over the median L_sp
of its K, with the K and seed, the figures the degenerate-runs and USPS bullets quote (the
degenerate runs stand among them; which runs are degenerate is read in REPRODUCTION.md, not here);
and, per data set, each K's ARI std (population) without its largest-L_sp run, which is a
degenerate one at every K that has any, the figure the degenerate-runs bullet quotes for K = 13 and 18.
"""

import glob
import itertools
import json
import math
import os
import statistics
import sys

DATASETS = ["pendigits", "usps"]
NAMES = {"pendigits": "Pendigits", "usps": "USPS"}
KS = range(5, 21)
PAIRED_KS = [9, 10, 11, 12]
# The leader tally starts at twenty seeds: below that the sweep had seeds 0..n-1 at some K only
# (seeds were first added around the true K), and the REPRODUCTION.md bullets count from there.
TALLY_FROM = 20
MULTIPLES = 30


def load(records, dataset, k):
    runs = []
    for path in glob.glob(os.path.join(records, "runs", dataset, f"aecm-random-K{k}", "seed-*.json")):
        with open(path) as f:
            runs.append(json.load(f))
    return runs


def summarize(runs):
    by_seed = {r["seed"]: 100 * r["scores"]["ari"] for r in runs}
    ari = list(by_seed.values())
    hom = [100 * r["scores"]["homogeneity"] for r in runs]
    pick = min(runs, key=lambda r: r["lsp"])
    lsp_median = statistics.median(r["lsp"] for r in runs)
    top = max(runs, key=lambda r: r["lsp"])
    rest = [100 * r["scores"]["ari"] for r in runs if r is not top]
    return {
        "std_without_top": (top["seed"], statistics.pstdev(rest) if rest else float("nan")),
        "multiples": {r["seed"]: r["lsp"] / lsp_median for r in runs},
        "seeds": sorted(by_seed),
        "by_seed": by_seed,
        "mean": statistics.mean(ari),
        "std": statistics.pstdev(ari),
        "median": statistics.median(ari),
        "pick": 100 * pick["scores"]["ari"],
        "hom": statistics.mean(hom),
    }


def ranges(values):
    """Sorted integers as runs: [0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    out = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def main():
    records = sys.argv[1] if len(sys.argv) > 1 else "repro_results/records/k-sweep"
    table = {}
    total = named = 0
    for ds in DATASETS:
        for k in KS:
            runs = load(records, ds, k)
            if not runs:
                sys.exit(f"{records}: no runs stored for {ds} at K = {k} (expected runs/{ds}/aecm-random-K{k}/seed-*.json)")
            table[ds, k] = summarize(runs)
            total += len(runs)
            named += sum(1 for r in runs if r.get("cpu"))
    heads = []
    for ds in DATASETS:
        groups = {}
        for k in KS:
            groups.setdefault(tuple(table[ds, k]["seeds"]), []).append(k)
        if len(groups) == 1:
            s = next(iter(groups))
            heads.append(f"{NAMES[ds]}: {len(s)} runs at every K (seeds {ranges(s)})")
        else:
            parts = [f"{len(s)} runs (seeds {ranges(s)}) at K = {ranges(ks)}" for s, ks in sorted(groups.items(), key=lambda g: g[1][0])]
            heads.append(NAMES[ds] + ": " + "; ".join(parts))
    print("Runs. " + ". ".join(heads) + f". In all {total:,} runs, {named:,} of them naming their CPU.")
    print()
    cols = ["ARI mean ± std", "median", "lowest L_sp", "homogeneity"]
    print("| K | " + " | ".join(f"{NAMES[ds]} {c}" if i == 0 else c for ds in DATASETS for i, c in enumerate(cols)) + " |")
    print("| --- " * (1 + len(cols) * len(DATASETS)) + "|")
    best = {(ds, f): max(KS, key=lambda k: table[ds, k][f]) for ds in DATASETS for f in ("mean", "median")}
    for k in KS:
        cells = [str(k)]
        for ds in DATASETS:
            t = table[ds, k]
            mean = f"{t['mean']:.1f} ± {t['std']:.1f}"
            median = f"{t['median']:.1f}"
            cells += [
                f"**{mean}**" if best[ds, "mean"] == k else mean,
                f"**{median}**" if best[ds, "median"] == k else median,
                f"{t['pick']:.1f}",
                f"{t['hom']:.1f}",
            ]
        print("| " + " | ".join(cells) + " |")
    print()
    for ds in DATASETS:
        for a, b in itertools.combinations(PAIRED_KS, 2):
            lo, hi = table[ds, a]["by_seed"], table[ds, b]["by_seed"]
            common = sorted(set(lo) & set(hi))
            diffs = [hi[s] - lo[s] for s in common]
            if len(diffs) < 2:
                continue
            sd = statistics.stdev(diffs)
            print(
                f"{NAMES[ds]}, K = {b} - K = {a}: {len(diffs)} seeds, K = {b} higher on {sum(d > 0 for d in diffs)}; "
                f"mean difference {statistics.mean(diffs):+.2f}, sample std {sd:.2f}, standard error {sd / math.sqrt(len(diffs)):.2f}."
            )
    print()
    for ds in DATASETS:
        rows = leaders(table, ds)
        for row in rows:
            print(row["line"])
        print(tally(rows, ds))
    print()
    for ds in DATASETS:
        runs = sorted(((m, k, seed) for k in KS for seed, m in table[ds, k]["multiples"].items()), reverse=True)
        listed = "; ".join(f"{m:.2f}, K = {k} seed {seed}" for m, k, seed in runs[:MULTIPLES])
        print(f"{NAMES[ds]}, the {MULTIPLES} largest L_sp multiples of their K's median L_sp: {listed}.")
    for ds in DATASETS:
        stds = "; ".join(
            f"K = {k} {table[ds, k]['std_without_top'][1]:.1f} (seed {table[ds, k]['std_without_top'][0]})" for k in KS
        )
        print(f"{NAMES[ds]}, the ARI std without each K's largest-L_sp run: {stds}.")


def leaders(table, dataset):
    """For each n from 2 up, the K with the highest mean and the K with the highest median ARI over
    seeds 0..n-1 (the K that have all of them), each with its lead over the runner-up (the printed
    values' difference), which the K-sweep bullets of REPRODUCTION.md sum up. Returns one dict per n:
    the printed line, whether every K has the n seeds, and per statistic the leader K and its lead."""
    by_k = {k: table[dataset, k]["by_seed"] for k in KS}  # the records main() already read
    rows = []
    n = 2
    while True:
        ks = [k for k in KS if all(s in by_k[k] for s in range(n))]
        if len(ks) < 2:
            break
        parts = []
        lead_by = {}
        for name, f in (("mean", statistics.mean), ("median", statistics.median)):
            v = sorted(((f([by_k[k][s] for s in range(n)]), k) for k in ks), reverse=True)
            # The lead is the difference of the two values as printed (two decimals), as a reader
            # of "64.50 against 64.37" computes it.
            lead = round(v[0][0], 2) - round(v[1][0], 2)
            parts.append(f"highest {name} K = {v[0][1]} ({v[0][0]:.2f}) by {lead:.2f} over K = {v[1][1]} ({v[1][0]:.2f})")
            lead_by[name] = (v[0][1], lead)
        only = "" if len(ks) == len(KS) else f" (only K = {ranges(ks)} have them)"
        line = f"{NAMES[dataset]}, seeds 0-{n - 1}{only}: " + "; ".join(parts) + "."
        rows.append({"n": n, "every_k": len(ks) == len(KS), "lead": lead_by, "line": line})
        n += 1
    return rows


def tally(rows, dataset):
    """One line summing up leaders()'s rows from TALLY_FROM seeds on (those every K has): per
    statistic, how often the leader changed from one seed count to the next, and per leading K the
    counts it led at and its smallest and largest lead."""
    rows = [r for r in rows if r["n"] >= TALLY_FROM and r["every_k"]]
    if not rows:
        return f"{NAMES[dataset]}: fewer than {TALLY_FROM} seeds at every K, no leader tally."
    parts = []
    for name in ("mean", "median"):
        seq = [(r["n"], *r["lead"][name]) for r in rows]
        changes = sum(a[1] != b[1] for a, b in zip(seq, seq[1:]))
        per_k = []
        for k in sorted({k for _, k, _ in seq}):
            at = [(n, lead) for n, kk, lead in seq if kk == k]
            leads = [lead for _, lead in at]
            by = f"{min(leads):.2f}" if min(leads) == max(leads) else f"{min(leads):.2f}-{max(leads):.2f}"
            counts = "count" if len(at) == 1 else "counts"
            per_k.append(f"K = {k} at {len(at)} {counts} ({ranges([n for n, _ in at])} seeds; by {by})")
        parts.append(f"highest {name} changed hands {changes} times; " + ", ".join(per_k))
    head = f"{NAMES[dataset]}, leaders over the {len(rows)} seed counts {rows[0]['n']}-{rows[-1]['n']}: "
    return head + "; ".join(parts) + "."


if __name__ == "__main__":
    main()
