#!/usr/bin/env python3
"""Copies scikit-learn's bundled `digits`, `iris` and `wine` data sets (BSD-3-Clause) from its wheel.

Usage: pip install scikit-learn==1.5.2 && python3 convert_sklearn.py
   or: pip download scikit-learn==1.5.2 --no-deps && unzip scikit_learn-1.5.2-*.whl 'sklearn/*'
       && python3 convert_sklearn.py sklearn     (an unpacked wheel: no install, no numpy needed)

- digits: sklearn/datasets/data/digits.csv.gz (1,797 8x8 images, 64 values 0..16, then the digit)
  is written as digits/digits.csv with a header row (p0..p63,label).
- iris: sklearn/datasets/data/iris.csv is copied unchanged (its first row is scikit-learn's
  header: n_samples, n_features, target names), which aecm's CSV loader understands.
- wine: sklearn/datasets/data/wine_data.csv is copied unchanged (178 x 13, 3 classes; same header
  form as iris).
"""
import gzip, os, shutil, sys

if len(sys.argv) > 1:
    pkg, version = sys.argv[1], "(unpacked wheel)"
else:
    import sklearn

    pkg, version = os.path.dirname(sklearn.__file__), sklearn.__version__
src = os.path.join(pkg, "datasets", "data")
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
os.makedirs(os.path.join(here, "wine"), exist_ok=True)
shutil.copyfile(os.path.join(src, "wine_data.csv"), os.path.join(here, "wine", "wine_data.csv"))
print(len(rows), "digits; iris and wine copied; scikit-learn", version)
