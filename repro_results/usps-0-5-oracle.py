"""How much of each pre-trained USPS AE-CM run's ARI is lost to the 0-split / 5-merge (twenty-sixth session).

Usage: python3 usps-0-5-oracle.py RECORDS_FOLDER
(standard library only). RECORDS_FOLDER holds `aecm reproduce` run records (seed-N.json with their
clusters x classes `counts`), e.g. records/aecm-table/runs/usps/aecm-pretrained.

Per run: which classes own no cluster and which own two or more (each cluster counted for its
majority class), the ARI as trained, and the ARI after an oracle fix: the clusters whose majority is
class 0 merged into one, and every 5 moved out of its cluster into a new one (all other counts
unchanged). Then the means over the runs with exactly the pattern "5 without a cluster, 0 in two".
"""
import glob
import json
import sys
from math import comb


def ari(t):
    """Adjusted Rand index of a contingency table (rows: clusters, columns: classes)."""
    n = sum(map(sum, t))
    sa = sum(comb(sum(r), 2) for r in t)
    sb = sum(comb(sum(c), 2) for c in zip(*t))
    s = sum(comb(x, 2) for r in t for x in r)
    e = sa * sb / comb(n, 2)
    m = (sa + sb) / 2
    return (s - e) / (m - e)


def fixed(c):
    """The oracle's table: 0-clusters merged, the 5s in a cluster of their own."""
    classes = len(c[0])
    maj = [max(range(classes), key=lambda j: row[j]) for row in c]
    zero = [i for i, m in enumerate(maj) if m == 0]
    t = [list(row) for i, row in enumerate(c) if i not in zero]
    t.append([sum(c[i][j] for i in zero) for j in range(classes)])
    fives = [0] * classes
    for row in t:
        fives[5] += row[5]
        row[5] = 0
    t.append(fives)
    return [row for row in t if sum(row) > 0]


def main(folder):
    files = glob.glob(folder.rstrip("/") + "/seed-*.json")
    runs = sorted((json.load(open(f)) for f in files), key=lambda r: r["seed"])
    before, after = [], []
    for r in runs:
        c = r["counts"]
        classes = len(c[0])
        maj = [max(range(classes), key=lambda j: row[j]) for row in c]
        own = [maj.count(j) for j in range(classes)]
        none = [j for j in range(classes) if own[j] == 0]
        two = [j for j in range(classes) if own[j] > 1]
        a, b = ari(c) * 100, ari(fixed(c)) * 100
        print(f"seed {r['seed']}: no cluster {none}, two or more {two}: ARI {a:.1f} -> {b:.1f}")
        if none == [5] and two == [0]:
            before.append(a)
            after.append(b)
    if before:
        print(
            f"{len(before)} runs with the pattern: mean ARI {sum(before) / len(before):.1f}"
            f" -> {sum(after) / len(after):.1f}, best {max(after):.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
