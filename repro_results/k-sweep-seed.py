#!/usr/bin/env python3
"""The facts a K-sweep history paragraph gives about one seed's runs, from the stored records.

Usage: python3 repro_results/k-sweep-seed.py DATASET SEED K [K ...] [--records DIR]
       (default DIR: repro_results/records/k-sweep; reads DIR/runs/DATASET/aecm-random-KN/seed-*.json)

For each K, first the row of the paragraph's table (values x100):
    | K | ARI / homogeneity of SEED | its wall time | mean ± std ARI of the other seeds |
    | mean ± std ARI with SEED | mean homogeneity with SEED |
(std is the population std, as `aecm reproduce` writes it), then SEED's rank by ARI among the stored
seeds, the medians without and with it, its L_sp as a multiple of the K's median L_sp (with SEED)
and of the lowest L_sp of the other seeds, whether it is the lowest-L_sp pick (for a seed just
added: whether the pick moves to it), its smallest cluster, the ARI of k-means on its embedding (its
gap against the CM ranked, on its side of zero, among every stored run of the data set at K = 5-20,
and the others' widest there), and from its clusters x classes counts every class without a cluster
of its own (a cluster is a class's own when the class is its largest), every class spread over
several own clusters, and every cluster in which a second class holds 15% or more. The degenerate
runs of REPRODUCTION.md stand out by their L_sp multiple, smallest cluster and k-means score.

With several K, a last line sums them up as the batch paragraphs quote them: the largest move of
the mean and of the median that SEED makes (with its K, without -> with), the range of its L_sp
multiples, its smallest cluster, the range of k-means on its embedding against the CM, and the
range of its wall times.
"""

import functools
import importlib
import statistics
import sys

# The records are read, and the L_sp multiple of the K's median computed, by k-sweep-summary.py (this script's folder is on sys.path).
summary = importlib.import_module("k-sweep-summary")


@functools.lru_cache(maxsize=None)
def stored(records, dataset, k):
    """The stored runs of one data set at one K, read once per run of this script (`load` and
    `all_gaps` both read through it)."""
    return tuple(summary.load(records, dataset, k))


def load(records, dataset, k):
    """The stored runs of one data set at one K, by seed."""
    return {run["seed"]: run for run in stored(records, dataset, k)}


def ari(run):
    return 100 * run["scores"]["ari"]


def hom(run):
    return 100 * run["scores"]["homogeneity"]


def confusions(counts):
    """Lines on the classes a clustering merges or splits (counts: clusters x classes)."""
    classes = len(counts[0])
    totals = [sum(c[j] for c in counts) for j in range(classes)]
    major = [max(range(classes), key=lambda j: c[j]) for c in counts]
    lines = []
    for j in range(classes):
        own = [i for i, m in enumerate(major) if m == j and sum(counts[i]) > 0]
        if not own:
            best = max(range(len(counts)), key=lambda i: counts[i][j])
            lines.append(f"{j}s: no cluster of their own, {100 * counts[best][j] / totals[j]:.0f}% in one of the {major[best]}s")
        elif len(own) > 1:
            shares = ", ".join(f"{100 * counts[i][j] / totals[j]:.0f}%" for i in own)
            lines.append(f"{j}s: over {len(own)} clusters ({shares})")
    for i, c in enumerate(counts):
        size = sum(c)
        if size == 0:
            continue
        parts = sorted(((n, j) for j, n in enumerate(c)), reverse=True)
        mixed = [f"{j}s {100 * n / size:.0f}%" for n, j in parts if n / size >= 0.15]
        if len(mixed) > 1:
            lines.append(f"cluster {i} ({size} points): {', '.join(mixed)}")
    return lines


@functools.lru_cache(maxsize=None)
def all_gaps(records, dataset):
    """Every stored run's k-means-minus-CM gap (x100) with its K and seed, read once per data set."""
    return [(100 * run["km_on_embedding"]["ari"] - ari(run), k, run["seed"])
            for k in summary.KS for run in stored(records, dataset, k) if run.get("km_on_embedding")]


def gap_place(records, dataset, seed, k, gap):
    """Where a run's k-means-minus-CM gap stands among every stored run of the data set (all K)."""
    gaps = [g for g in all_gaps(records, dataset) if (g[1], g[2]) != (k, seed)]
    if not gaps:
        return "no other run of the data set has k-means on its embedding"
    if gap < 0:
        place, side, widest = 1 + sum(g < gap for g, _, _ in gaps), "below", min(gaps)
    else:
        place, side, widest = 1 + sum(g > gap for g, _, _ in gaps), "above", max(gaps)
    return (f"its gap is the {ordinal(place)} widest {side} the CM of the data set's {len(gaps) + 1} stored runs "
            f"(the others' widest {side}: {widest[0]:+.1f} at K = {widest[1]} seed {widest[2]})")


def ordinal(n):
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def report(records, dataset, seed, k):
    runs = load(records, dataset, k)
    if seed not in runs:
        sys.exit(f"{records}: no run stored for {dataset} seed {seed} at K = {k} "
                 f"(expected runs/{dataset}/aecm-random-K{k}/seed-{seed}.json)")
    me = runs[seed]
    others = [r for s, r in runs.items() if s != seed]
    every = list(runs.values())
    before = [ari(r) for r in others]
    after = [ari(r) for r in every]
    mean_sd = lambda xs: f"{statistics.mean(xs):.1f} ± {statistics.pstdev(xs):.1f}" if xs else "-"
    fact = {"k": k, "wall": me["wall_s"]}
    print(f"| {k} | {ari(me):.1f} / {hom(me):.1f} | {me['wall_s']:.0f} s | {mean_sd(before)} | "
          f"{mean_sd(after)} | {statistics.mean(hom(r) for r in every):.1f} |")
    rank = 1 + sum(a > ari(me) for a in after)
    print(f"  rank {rank} of {len(every)}; mean {statistics.mean(after):.2f} "
          f"(without it {statistics.mean(before):.2f})" if before else f"  rank 1 of 1")
    if before:
        fact["mean"] = (statistics.mean(before), statistics.mean(after))
        fact["median"] = (statistics.median(before), statistics.median(after))
        print(f"  median {statistics.median(after):.2f} (without it {statistics.median(before):.2f})")
        lowest = min(others, key=lambda r: r["lsp"])
        multiple = summary.summarize(every)["multiples"][seed]
        fact["multiple"] = multiple
        print(f"  L_sp {me['lsp']:.2f}: {multiple:.2f} x the K's median, "
              f"{me['lsp'] / lowest['lsp']:.2f} x the lowest of the others (seed {lowest['seed']}, ARI {ari(lowest):.1f}); "
              f"the lowest-L_sp pick: {'yes' if me['lsp'] < lowest['lsp'] else 'no'}")
    counts = me.get("counts")
    km = me.get("km_on_embedding")
    if counts:
        sizes = sorted(sum(c) for c in counts)
        fact["smallest"] = sizes[0]
        print(f"  smallest clusters {sizes[:3]}")
    if km:
        fact["km"] = 100 * km["ari"] - ari(me)
        print(f"  k-means on its embedding {100 * km['ari']:.1f} ({fact['km']:+.1f} against the CM)")
        print("  " + gap_place(records, dataset, seed, k, fact["km"]))
    for line in confusions(counts) if counts else []:
        print(f"    {line}")
    return fact


def batch(facts):
    """The one line summing up several K's facts (each a dict from report)."""
    parts = []
    for key, name in (("mean", "means"), ("median", "medians")):
        moved = [f for f in facts if key in f]
        if moved:
            f = max(moved, key=lambda f: abs(f[key][1] - f[key][0]))
            a, b = f[key]
            parts.append(f"the {name} move by {abs(b - a):.2f} or less (K = {f['k']} {a:.2f} -> {b:.2f})")
    for key, fmt, name in (("multiple", "{:.2f}", "L_sp multiples of the K's median"),
                           ("km", "{:+.1f}", "k-means on the embedding against the CM"),
                           ("wall", "{:.0f}", "wall times (s)")):
        values = [f[key] for f in facts if key in f]
        if values:
            parts.append(f"{name} {fmt.format(min(values))} to {fmt.format(max(values))}")
    small = [f for f in facts if "smallest" in f]
    if small:
        f = min(small, key=lambda f: f["smallest"])
        parts.append(f"smallest cluster {f['smallest']} points (K = {f['k']})")
    ks = ", ".join(str(f["k"]) for f in facts)
    print(f"Over K = {ks}: " + "; ".join(parts) + ".")


def main():
    args = sys.argv[1:]
    records = "repro_results/records/k-sweep"
    if "--records" in args:
        i = args.index("--records")
        if i + 1 >= len(args):
            sys.exit("--records needs a folder")
        records = args[i + 1]
        del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    try:
        seed, ks = int(args[1]), [int(k) for k in args[2:]]
    except ValueError:
        sys.exit(f"SEED and K must be integers, got {' '.join(args[1:])}")
    facts = [report(records, args[0], seed, k) for k in ks]
    if len(facts) > 1:
        batch(facts)


if __name__ == "__main__":
    main()
