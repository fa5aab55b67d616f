"""Every epoch of one `aecm train --eval-every 1 --eval-budget 0 --out OUT` run, as a text table.

Usage: python3 epoch-table.py OUT/summary.json TITLE COMMAND RECORD WHEN > FILE
TITLE, COMMAND and WHEN (session, machine, wall) head the file; RECORD names the stored
`aecm reproduce` record the run repeats, whose L_sp the run's own is printed beside.
Reads the summary's history (loss terms, L_sp, metrics, clusters x classes counts per epoch).
Every table it made names it in its header ("table by repro_results/epoch-table.py") beside the session
and machine it ran on, so `grep -l "table by repro_results/epoch-table.py" repro_results/*.txt` lists them;
REPRODUCTION.md's K-sweep section says what each one shows.
"""
import json
import sys

from record_check import same_run_line


def main():
    summary, title, cmd, record, when = sys.argv[1:6]
    d = json.load(open(summary))
    h = d["history"]
    print("# " + title)
    print("# " + cmd)
    print("# %s (run wall %.0f s); table by repro_results/epoch-table.py." % (when, d["run_wall_s"]))
    print(same_run_line(record, d, "evaluating every epoch does not change the training"))
    print("# Columns from OUT/summary.json's history: the train loss (a mini-batch's sum, averaged over the epoch's batches) and its five terms, as `aecm train`")
    print("# names them: rec = beta * deep reconstruction, cm_rec = the CM's reconstruction of the embedding, sparsity = sum_i sum_k g_ik (1 - g_ik)")
    print("# (%d * (1 - 1/K) when every point's responsibilities are uniform), prior = the Dirichlet prior, orth = lambda * orthonormality;"
          % d["config"]["batch"])
    print("# then L_sp, ARI x100 and the cluster sizes (sorted) at the epoch's end. Epoch %d is the averaging epoch." % h[-1]["epoch"])
    print("%5s %12s %11s %11s %9s %9s %9s %9s %5s  %s" % ("epoch", "loss", "rec", "cm_rec", "sparsity", "prior", "orth", "L_sp", "ARI", "cluster sizes"))
    for e in h:
        t = e["terms"]
        m = e["metrics"]
        ari = "%5.1f" % (100 * m["ari"]) if m else "    -"
        lsp = "%9.1f" % e["l_sp"] if e["l_sp"] is not None else "        -"
        sizes = " ".join(str(s) for s in sorted(sum(c) for c in e["counts"])) if e.get("counts") else "-"
        print("%5d %12.4g %11.4g %11.4g %9.4g %9.4g %9.4g %s %s  %s" % (
            e["epoch"], e["loss"], t["rec"], t["cm_rec"], t["sparsity"], t["prior"], t["orth"], lsp, ari, sizes))
    m = d["metrics"]
    print("# final: ARI %.1f NMI %.1f ACC %.1f homogeneity %.1f, L_sp %.1f; k-means (K = %d) on the final embedding: ARI %.1f" % (
        100 * m["ari"], 100 * m["nmi"], 100 * m["acc"], 100 * m["homogeneity"], d["l_sp"], d["k"], 100 * d["km_on_embedding"]["ari"]))


if __name__ == "__main__":
    main()
