#!/usr/bin/env python3
"""Copies scikit-learn's bundled `digits` and `iris` data sets (BSD-3-Clause) from its wheel.

Usage: pip install scikit-learn==1.5.2 && python3 convert_sklearn.py

- digits: sklearn/datasets/data/digits.csv.gz (1,797 8x8 images, 64 values 0..16, then the digit)
  is written as digits/digits.csv with a header row (p0..p63,label).
- iris: sklearn/datasets/data/iris.csv is copied unchanged (its first row is scikit-learn's
  header: n_samples, n_features, target names), which aecm's CSV loader understands.
"""
import gzip, os, shutil
import sklearn

src = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data")
here = os.path.dirname(os.path.abspath(__file__))
with gzip.open(os.path.join(src, "digits.csv.gz"), "rt") as f:
    rows = [l.strip() for l in f if l.strip()]
os.makedirs(os.path.join(here, "digits"), exist_ok=True)
with open(os.path.join(here, "digits", "digits.csv"), "w") as f:
    f.write(",".join([f"p{i}" for i in range(64)] + ["label"]) + "\n")
    for r in rows:
        vals = r.split(",")
        f.write(",".join(str(int(float(v))) for v in vals) + "\n")
os.makedirs(os.path.join(here, "iris"), exist_ok=True)
shutil.copyfile(os.path.join(src, "iris.csv"), os.path.join(here, "iris", "iris.csv"))
print(len(rows), "digits; iris copied; scikit-learn", sklearn.__version__)
