"""The header line epoch-table.py and step-table.py print about the stored record a run repeats.

It reads the record (`aecm reproduce`'s run JSON, its `lsp` and `scores.ari`) and compares them
with the run's summary.json (`l_sp`, `metrics.ari`), so the claim that the run gives the record
again is checked, not assumed: where they differ the line says so with both values and a warning
goes to stderr.
"""
import json
import sys


def same_run_line(record, summary, what):
    """`what` ends the line where they agree, e.g. "the step log does not change the training"."""
    r = json.load(open(record))
    r_lsp, r_ari = r["lsp"], r["scores"]["ari"]
    s_lsp, s_ari = summary["l_sp"], summary["metrics"]["ari"]
    if abs(r_lsp - s_lsp) <= 1e-9 * max(1.0, abs(r_lsp)) and abs(r_ari - s_ari) <= 1e-9:
        return "# The same settings as %s, whose L_sp (%.4f) and ARI this run gives again: %s." % (record, s_lsp, what)
    print("warning: %s has L_sp %.6f and ARI %.6f, this run %.6f and %.6f" % (record, r_lsp, r_ari, s_lsp, s_ari), file=sys.stderr)
    return "# Meant to repeat %s, whose L_sp (%.4f) and ARI (%.1f) this run does NOT give again (its own: %.4f, %.1f)." % (
        record, r_lsp, 100 * r_ari, s_lsp, 100 * s_ari)
