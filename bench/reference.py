#!/usr/bin/env python3
"""PyTorch reference for `aecm bench`: the same CM / AE-CM training step (losses as sums over the
batch, E4 on the batch mean, Adam with eps 1e-3), same shapes and batch sizes, on the CPU (default) or a CUDA GPU (`--device cuda`).

Prints one JSON object: {"device", "threads", "torch", "cases": [{"name", "ms_per_step", ...}]}.
Timing: warm-up steps excluded, median over repetitions of a block of steps; each block ends by
reading the loss back (and, on CUDA, synchronising). `--epoch` adds one timed epoch of AE-CM at
the MNIST shape over 70,000 samples at batch 256 (after one warm-up epoch), as `aecm bench
--data-dir` measures it.
"""
import argparse
import json
import statistics
import time

import torch

CASES = {
    # name: (kind, d, hidden, p, K, batch)
    "cm-pendigits": ("cm", 16, [], 16, 10, 80),
    "cm-mnist": ("cm", 784, [], 784, 10, 111),
    "aecm-mnist": ("aecm", 784, [500, 500, 2000], 10, 10, 256),
    "aecm-pendigits": ("aecm", 16, [500, 500, 2000], 70, 10, 80),
}


DEV = "cpu"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def glorot(fan_in, fan_out):
    lim = (6.0 / (fan_in + fan_out)) ** 0.5
    return (torch.rand(fan_in, fan_out, device=DEV) * 2 - 1) * lim


def make_params(kind, d, hidden, p, k):
    params = []
    if kind == "aecm":
        widths = [d] + hidden + [p]
        for a, b in zip(widths[:-1], widths[1:]):
            params += [glorot(a, b), torch.zeros(1, b, device=DEV)]
        rev = widths[::-1]
        for a, b in zip(rev[:-1], rev[1:]):
            params += [glorot(a, b), torch.zeros(1, b, device=DEV)]
    params += [glorot(p, k), torch.zeros(1, k, device=DEV), glorot(k, p), torch.zeros(1, p, device=DEV)]
    for t in params:
        t.requires_grad_(True)
    return params


def forward_loss(kind, params, x, alpha, beta=1.0, lam=1.0):
    n_deep = (len(params) - 4) // 2
    n_enc = n_deep // 2
    h = x
    for l in range(n_enc):
        h = h @ params[2 * l] + params[2 * l + 1]
        if l + 1 < n_enc:
            h = torch.nn.functional.leaky_relu(h, 0.2)
    z = h
    c = 2 * n_deep
    g = torch.softmax(z @ params[c] + params[c + 1], dim=1)
    z_hat = g @ params[c + 2] + params[c + 3]
    u = params[c + 2] + params[c + 3]
    prior = (1.0 - alpha) * torch.log(g.mean(0) + 1e-10).sum()
    if kind == "cm":
        e1 = ((z - z_hat) ** 2).sum()
        u2 = (u ** 2).sum(1)
        e2 = ((g * (1 - g)).sum(0) * u2).sum()
        gtg = g.t() @ g
        uut = u @ u.t()
        e3 = -((gtg * uut).sum() - ((g ** 2).sum(0) * u2).sum())
        return e1 + e2 + e3 + prior
    h = z
    for l in range(n_enc):
        h = h @ params[2 * (n_enc + l)] + params[2 * (n_enc + l) + 1]
        if l + 1 < n_enc:
            h = torch.nn.functional.leaky_relu(h, 0.2)
    rec = beta * ((x - h) ** 2).sum()
    cm_rec = ((z - z_hat) ** 2).sum()
    sparsity = (g * (1 - g)).sum()
    k = u.shape[0]
    orth = lam * (u @ u.t() - torch.eye(k, device=DEV)).abs().sum()
    return rec + cm_rec + sparsity + prior + orth


def run_case(name, reps, warmup, n=None):
    kind, d, hidden, p, k, batch = CASES[name]
    torch.manual_seed(0)
    epoch = n is not None
    n = n or batch * 20
    data = torch.rand(n, d, device=DEV)
    params = make_params(kind, d, hidden, p, k)
    opt = torch.optim.Adam(params, lr=1e-3, eps=1e-3)

    perm = torch.randperm(n, device=DEV) if epoch else None

    def step(i):
        s = (i * batch) % n
        # The epoch case gathers shuffled rows, as the trainer does.
        xb = data[perm[s : s + batch]] if epoch else data[s : s + batch]
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(kind, params, xb, alpha=5.0)
        loss.backward()
        opt.step()
        return loss

    steps_per_rep = 20 if kind == "cm" else 5
    if epoch:
        steps_per_rep = (n + batch - 1) // batch
        warmup = steps_per_rep
        reps = 1
    for i in range(warmup):
        step(i)
    sync()
    times = []
    for r in range(reps):
        t = time.perf_counter()
        for i in range(steps_per_rep):
            loss = step(i)
        float(loss.detach())  # synchronise
        sync()
        times.append((time.perf_counter() - t) / steps_per_rep)
    ms = statistics.median(times) * 1e3
    out = {"name": name, "ms_per_step": ms, "steps_per_s": 1e3 / ms}
    if epoch:
        out["name"] = name + "-epoch70k"
        out["epoch_s"] = ms * steps_per_rep / 1e3
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--epoch", action="store_true")
    a = ap.parse_args()
    global DEV
    DEV = a.device
    torch.set_num_threads(a.threads)
    cases = [run_case(c, a.reps, a.warmup) for c in a.cases.split(",") if c]
    if a.epoch:
        cases.append(run_case("aecm-mnist", a.reps, a.warmup, n=70000))
    name = torch.cuda.get_device_name() if DEV == "cuda" else "cpu"
    print(json.dumps({"device": name, "threads": a.threads, "torch": torch.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
