"""How much of each MNIST AE-CM run's ARI is lost to the 4-9 mix (nineteenth session probe).

Usage: python3 mnist-4-9-decomposition.py SOURCE... [--save-counts FILE]
(needs numpy, scipy and scikit-learn). A SOURCE is a folder of `aecm reproduce` run records
(seed-N.json with their clusters x classes `counts`), an `aecm train --out` folder (its
assignments.csv: index,cluster,label), or a JSON file {run name: counts} as --save-counts writes it.

Per run: ARI, ACC and NMI as trained; the share of the 4s and the 9s in the two clusters that hold
most of them; and the three after an oracle fix of that pair only (every 4 in those two clusters
moved to the 4s' one, every 9 to the other; all other counts unchanged). Then the means per group of
runs (the part of a run's name after its last comma), and last the ARI and ACC of a partition that
is perfect but for 4 and 9 split half and half between two clusters (MNIST's class sizes).
"""
import glob, json, sys
import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score


def labels(c):
    """(classes, clusters) label vectors of a clusters x classes count matrix, one entry a point."""
    k, j = np.nonzero(c)
    w = c[k, j]
    return np.repeat(j, w), np.repeat(k, w)


def ari(c):
    return adjusted_rand_score(*labels(c))


def nmi(c):
    """NMI with the arithmetic mean (scikit-learn's default)."""
    return normalized_mutual_info_score(*labels(c))


def acc(c):
    """Accuracy under the best one-to-one matching of clusters to classes (Hungarian)."""
    r, q = linear_sum_assignment(-c)
    return c[r, q].sum() / c.sum()


def fix_4_9(c):
    c = c.copy()
    a, b = np.argsort(c[:, 4] + c[:, 9])[-2:]  # the two clusters holding most 4s and 9s
    if c[a, 4] - c[a, 9] < c[b, 4] - c[b, 9]:
        a, b = b, a  # a: the 4s' cluster, b: the 9s'
    c[a, 4] += c[b, 4]
    c[b, 4] = 0
    c[b, 9] += c[a, 9]
    c[a, 9] = 0
    return c, (a, b)


def runs(sources):
    for p in sources:
        if p.endswith('.json'):
            for name, c in json.load(open(p)).items():
                yield name, np.array(c, dtype=np.int64)
            continue
        recs = sorted(glob.glob(p + '/seed-*.json'), key=lambda s: int(s.split('-')[-1][:-5]))
        for f in recs:
            r = json.load(open(f))
            if r.get('counts'):
                # a record's epochs count the averaging epoch
                yield 'seed %d, %d epochs' % (r['seed'], r['epochs'] - 1), np.array(r['counts'], dtype=np.int64)
        if not recs:
            a = np.loadtxt(p + '/assignments.csv', delimiter=',', skiprows=1, dtype=np.int64)
            c = np.zeros((a[:, 1].max() + 1, a[:, 2].max() + 1), dtype=np.int64)
            np.add.at(c, (a[:, 1], a[:, 2]), 1)
            yield p.rstrip('/').split('/')[-1], c


args = sys.argv[1:]
save = None
if '--save-counts' in args:
    i = args.index('--save-counts')
    save = args[i + 1]
    del args[i:i + 2]
seen, groups = {}, {}
for name, c in runs(args):
    seen[name] = c.tolist()
    f, (a, b) = fix_4_9(c)
    m = [100 * metric(x) for metric in (ari, acc, nmi) for x in (c, f)]  # each as trained, then fixed
    groups.setdefault(name.split(', ')[-1], []).append(m)
    share = lambda cl, j: 100 * c[cl, j] / c[:, j].sum()
    print(f"{name}: ARI {m[0]:5.1f} ACC {m[2]:5.1f} NMI {m[4]:5.1f} | 4s {share(a, 4):3.0f}/{share(b, 4):3.0f}%,"
          f" 9s {share(a, 9):3.0f}/{share(b, 9):3.0f}% in clusters {a},{b} | 4-9 fixed: ARI {m[1]:5.1f}"
          f" ACC {m[3]:5.1f} NMI {m[5]:5.1f}")
for g, v in groups.items():
    v = np.array(v)
    gain = v[:, 1] - v[:, 0]
    print(f"mean of the {len(v)} runs of {g}: ARI {v[:, 0].mean():.1f}, with 4-9 fixed {v[:, 1].mean():.1f};"
          f" ACC {v[:, 2].mean():.1f}, with 4-9 fixed {v[:, 3].mean():.1f}; NMI {v[:, 4].mean():.1f}, with"
          f" 4-9 fixed {v[:, 5].mean():.1f}; the fix adds {gain.min():.1f}-{gain.max():.1f} ARI points")
if save:
    json.dump(seen, open(save, 'w'), indent=None)
sizes = np.array(next(iter(seen.values()))).sum(0)
c = np.diag(sizes)
c[4, 4], c[9, 4] = sizes[4] // 2, sizes[4] - sizes[4] // 2
c[9, 9], c[4, 9] = sizes[9] // 2, sizes[9] - sizes[9] // 2
print(f"perfect but for 4 and 9 half and half: ARI {100 * ari(c):.1f} ACC {100 * acc(c):.1f}"
      f" (class sizes {sizes.tolist()})")
