"""The mini-batch steps of one `aecm train --step-log --out OUT` run around its loss spikes, as text.

Usage: python3 step-table.py OUT/steps-seed-S.csv OUT/summary.json TITLE COMMAND RECORD WHEN > FILE
TITLE, COMMAND and WHEN (session, machine, wall) head the file; RECORD names the stored
`aecm reproduce` record the run repeats, whose L_sp the run's own is printed beside (`-`: none,
a probe with settings of its own).
Part 1, one line per epoch: the median step loss, the prior term of the epoch's last (partial)
batch, the median prior of its other batches, the difference, and the largest step loss among
the next epoch's first 10 steps over this epoch's median step loss. Part 2: for each epoch with a
step over 3 times the epoch before's median step loss (a spike), every step from 6 before the
first such step: from the epoch before's last 2 steps when it is among its epoch's first 20 steps,
else from 12 steps before it, to 12 steps after it.
Every table it made names it in its header ("table by repro_results/step-table.py") beside the session
and machine it ran on, so `grep -l "table by repro_results/step-table.py" repro_results/*.txt` lists them;
REPRODUCTION.md's K-sweep section says what each one shows.
"""
import csv
import json
import statistics
import sys

from record_check import same_run_line

TERMS = ["loss", "rec", "cm_rec", "sparsity", "prior", "orth"]


def main():
    steps, summary, title, cmd, record, when = sys.argv[1:7]
    d = json.load(open(summary))
    rows = list(csv.DictReader(open(steps)))
    ep = {}
    for r in rows:
        ep.setdefault(int(r["epoch"]), []).append(r)
    n, b = d["n"], d["config"]["batch"]
    last = max(ep)
    print("# " + title)
    print("# " + cmd)
    print("# %s (run wall %.0f s); table by repro_results/step-table.py." % (when, d["run_wall_s"]))
    if record == "-":
        print("# A probe with settings of its own (no stored record to repeat); its L_sp %.4f." % d["l_sp"])
    else:
        print(same_run_line(record, d, "the step log does not change the training"))
    if d["config"].get("drop_last"):
        print("# N = %d in batches of %d: %d steps an epoch; --drop-last skips each epoch's last, partial batch (its %d points), so the last batch is a full one; %d rows in OUT/steps-seed-S.csv." % (
            n, b, len(ep[1]), n % b, len(rows)))
    else:
        print("# N = %d in batches of %d: %d steps an epoch, the last of %d samples (ALGORITHM.md: the last partial batch is kept); %d rows in OUT/steps-seed-S.csv." % (
            n, b, len(ep[1]), n % b or b, len(rows)))
    print("# Terms as `aecm train` names them (a batch's values; the epoch values of summary.json are their means): rec = beta * deep reconstruction,")
    print("# cm_rec = the CM's reconstruction of the embedding, sparsity = sum_i sum_k g_ik (1 - g_ik), prior = sum_k (1 - alpha_k) log(mean_i g_ik + 1e-10),")
    print("# orth = lambda * orthonormality. Epoch %d is the averaging epoch." % last)
    print("#")
    print("# Part 1. Per epoch: median step loss; the last batch's prior, the median prior of the other batches and their difference;")
    print("# next10 = the largest step loss of the next epoch's first 10 steps / this epoch's median step loss; over30 = the epoch's batches")
    print("# whose prior stands over 30 above that median prior (their steps in brackets).")
    print("%5s %12s %10s %10s %9s %10s  %s" % ("epoch", "median loss", "last prior", "med prior", "excess", "next10", "over30"))
    spikes = []
    for e in range(1, last + 1):
        rs, nxt = ep[e], ep.get(e + 1)
        med = statistics.median(float(r["loss"]) for r in rs[:-1])
        medp = statistics.median(float(r["prior"]) for r in rs[:-1])
        lastp = float(rs[-1]["prior"])
        nx = max(float(r["loss"]) for r in nxt[:10]) / med if nxt else float("nan")
        if nxt:
            first = next((int(r["step"]) for r in nxt if float(r["loss"]) > 3 * med), None)
            if first is not None:
                spikes.append((e + 1, first))
        over = [r["step"] for r in rs if float(r["prior"]) - medp > 30]
        print("%5d %12.4g %10.4g %10.4g %9.1f %10.3g  %d%s" % (
            e, med, lastp, medp, lastp - medp, nx, len(over), " [%s]" % " ".join(over) if over else ""))
    print("#")
    print("# Part 2. Around each spike (a step over 3 x the epoch before's median step loss; the first such step of epochs %s)," % (
        ", ".join("%d (step %d, the epoch's %d.)" % (e, j, j - int(ep[e][0]["step"]) + 1) for e, j in spikes) or "none"))
    print("# every step from the epoch before's last 2 (a spike among its epoch's first 20 steps) or from 12 steps before it, to 12 after it.")
    print("%6s %5s %11s %11s %11s %10s %10s %10s" % ("step", "epoch", *TERMS))
    for e, j in spikes:
        e0 = int(ep[e][0]["step"])
        start = e0 - 2 if j - e0 < 20 else j - 12
        for r in rows[start - 1 : j + 12]:
            print("%6s %5s %s" % (r["step"], r["epoch"], " ".join(
                ("%11.4g" if i < 3 else "%10.4g") % float(r[t]) for i, t in enumerate(TERMS))))
        print("#")
    m = d["metrics"]
    print("# final: ARI %.1f NMI %.1f ACC %.1f, L_sp %.1f" % (100 * m["ari"], 100 * m["nmi"], 100 * m["acc"], d["l_sp"]))


if __name__ == "__main__":
    main()
