#!/usr/bin/env python3
"""Merge the tables written from committed run records into the top-level tables.

Usage: python3 repro_results/merge-tables.py EXPERIMENT [RECORDS_DIR] [TOP_DIR]
       (defaults: repro_results/records/EXPERIMENT and repro_results)

Why: the top-level `repro_results/EXPERIMENT.{csv,md,tex}` also hold rows measured before the
per-run records were committed (tenth session), so they cannot simply be rewritten by
`aecm reproduce --tables-only`. Rows are keyed by (data set, model, init, variant, metric): a row
of the records' tables replaces the top-level row with the same key or is added; every other
top-level row is kept as it is. Rows are then ordered as `aecm reproduce` orders them (data set,
model, init alphabetically, the variant with its number as a number (K5 before K10); metrics in the order ari, nmi, acc, homogeneity). Each file
is written to a temporary file and renamed over the old one. The lines after the Markdown table
(a figure, the notes of records rebuilt by hand, the per-run class notes) are the records' table's,
replacing the top-level file's.
"""

import os
import shutil
import sys

METRICS = ["ari", "nmi", "acc", "homogeneity"]


def natural_key(s):
    """As `reproduce::natural_key`: K5 before K10 (text head, then its number, then the rest)."""
    head = ""
    for c in s:
        if c.isdigit():
            break
        head += c
    digits = ""
    for c in s[len(head):]:
        if not c.isdigit():
            break
        digits += c
    return (head, int(digits) if digits else 0, s[len(head) + len(digits):])


def sort_key(key):
    dataset, model, init, variant, metric = key
    rank = METRICS.index(metric) if metric in METRICS else len(METRICS)
    return (dataset, model, init, natural_key(variant), rank, metric)


def split_csv(lines):
    """Header lines, {key: line}, footer lines."""
    rows = {}
    for line in lines[1:]:
        if line.strip():
            fields = line.split(",")
            rows[tuple(fields[1:6])] = line  # after the experiment column
    return lines[:1], rows, []


def split_table(lines, starts_rows, is_row, cells):
    """Head lines (up to the line where `starts_rows`), {key: row line}, tail lines."""
    head, rows, tail = [], {}, []
    state = "head"
    for line in lines:
        if state == "head":
            head.append(line)
            if starts_rows(line):
                state = "rows"
        elif state == "rows" and is_row(line):
            rows[tuple(cells(line)[:5])] = line
        else:
            state = "tail"
            tail.append(line)
    return head, rows, tail


def split_md(lines):
    # The rows follow the separator line "| --- |".
    return split_table(
        lines,
        lambda line: line.startswith("| ---"),
        lambda line: line.startswith("| "),
        lambda line: [c.strip() for c in line.strip().strip("|").split("|")],
    )


def split_tex(lines):
    # The rows lie between \midrule and \bottomrule.
    return split_table(
        lines,
        lambda line: line.strip() == "\\midrule",
        lambda line: line.strip() != "\\bottomrule",
        lambda line: [c.strip() for c in line.replace("\\\\", "").split("&")],
    )


def merge(kind, records_path, top_path):
    split = {"csv": split_csv, "md": split_md, "tex": split_tex}[kind]
    with open(top_path) as f:
        top_lines = f.read().splitlines()
    with open(records_path) as f:
        rec_lines = f.read().splitlines()
    # What follows the table (the K sweep's figure, the notes of hand-rebuilt records, what
    # each run did to the classes) is written by `aecm reproduce` from the records alone, so the
    # records' version replaces the top-level one.
    head, rows, _ = split(top_lines)
    _, new_rows, tail = split(rec_lines)
    replaced = sum(1 for k in new_rows if k in rows)
    rows.update(new_rows)
    out = head + [rows[k] for k in sorted(rows, key=sort_key)] + tail
    tmp = top_path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, top_path)
    print(f"{top_path}: {replaced} rows replaced, {len(new_rows) - replaced} added, {len(rows)} in all")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    exp = sys.argv[1]
    records = sys.argv[2] if len(sys.argv) > 2 else os.path.join("repro_results", "records", exp)
    top = sys.argv[3] if len(sys.argv) > 3 else "repro_results"
    for kind in ("csv", "md", "tex"):
        src = os.path.join(records, f"{exp}.{kind}")
        dst = os.path.join(top, f"{exp}.{kind}")
        if not os.path.exists(src):
            sys.exit(f"{src}: not found (run `aecm reproduce --experiment {exp} --out {records} --tables-only` first)")
        if not os.path.exists(dst):
            sys.exit(f"{dst}: not found (nothing to merge into)")
        merge(kind, src, dst)
    # The K sweep's figure is drawn from the records alone: copied as it is.
    for kind in ("svg", "png"):
        src = os.path.join(records, f"{exp}.{kind}")
        if os.path.exists(src):
            dst = os.path.join(top, f"{exp}.{kind}")
            shutil.copyfile(src, dst + ".tmp")
            os.replace(dst + ".tmp", dst)
            print(f"{dst}: copied from {src}")


if __name__ == "__main__":
    main()
