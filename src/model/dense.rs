//! Training steps on the CPU backend in host memory. The autoencoder's: forward pass, loss and
//! closed-form backward pass of the AE-CM (ALGORITHM.md section 2) and of the plain autoencoder's
//! pre-training, with the matrix products in the `gemm` crate (the one burn's `flex` backend
//! calls) and every element-wise pass fused and split over the CPU threads. The clustering
//! module's ([`cm_step`]): the closed-form step of [`super::net::cm_loss_and_grads`] without
//! burn's per-operation cost.
//!
//! Why (BENCHMARKS.md, item 8): on burn's autodiff the AE-CM step spent about 45% of its wall
//! time outside the products, mostly on one core: copies of every parameter and gradient into
//! and out of tensors, the LeakyReLU's backward `mask_where`, the graph's temporary buffers.
//! Here the parameters stay in host vectors between steps (the trainer turns them into tensors
//! only when something reads them), the bias is the product's initial value, and LeakyReLU and
//! its derivative are one pass each.
//!
//! All matrices are row-major `Vec<f32>`; kernels are `fan_in x fan_out` and biases `1 x fan_out`,
//! in the parameter order of [`Arch::layers`] (encoder, decoder, then the CM's `W_enc`, `b_enc`,
//! `W_dec`, `b_dec`). Checked against burn's autodiff on the loss of [`super::net::loss`].

use super::net::{Arch, HostRows, LossWeights, NetKind};
use rayon::prelude::*;

/// The loss a host step differentiates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostLoss {
    /// Plain autoencoder pre-training: mean squared error over the batch's `B x d` entries
    /// (one term).
    AeMse,
    /// The AE-CM loss: `[beta * rec, CM rec, sparsity, prior, lambda * orth]` (five terms).
    AeCm,
}

/// True when [`step`] implements `arch` (AE-CM without the quadratic feature layer).
pub fn supported(arch: &Arch) -> bool {
    arch.kind == NetKind::AeCm && !arch.quadratic
}

/// A strided view of a matrix for `gemm` (`rs`, `cs`: row and column strides in elements).
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `rows x cols` matrix.
    fn rm(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose (no copy).
    fn t(self) -> Self {
        Self {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// True when every element the view names lies inside `data`.
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }
}

/// Products below this many multiply-adds run on one thread (burn-flex's threshold).
const PARALLEL_MACS: usize = 192 * 192 * 192;

/// `dst (m x n, row-major) = [dst +] a b` through `gemm`.
fn matmul(dst: &mut [f32], acc: bool, a: View<'_>, b: View<'_>) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    // invariants of this module's own calls, not of user input
    assert!(
        b.rows == k && dst.len() == m * n && a.in_bounds() && b.in_bounds(),
        "matmul shapes: {m}x{k} by {}x{n} into {}",
        b.rows,
        dst.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            dst.fill(0.0);
        }
        return;
    }
    let par = if m * n * k >= PARALLEL_MACS {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the three views are in bounds (checked above: the largest offset each one names
    // is inside its slice), `dst` is a distinct, exclusively borrowed `m x n` row-major buffer,
    // and `gemm` reads and writes only the elements the shapes and strides name.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            acc,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

/// Rows per task of the element-wise passes.
const ROWS: usize = 64;

/// LeakyReLU slope (ALGORITHM.md section 2).
const SLOPE: f32 = 0.2;

/// `B x n` filled with the bias row `b`, then `+= a W` (the dense layer's pre-activation).
fn dense(a: View<'_>, w: &[f32], bias: &[f32]) -> Vec<f32> {
    let n = bias.len();
    let mut out = vec![0f32; a.rows * n];
    out.par_chunks_mut(ROWS * n).for_each(|blk| {
        for row in blk.chunks_exact_mut(n) {
            row.copy_from_slice(bias);
        }
    });
    matmul(&mut out, true, a, View::rm(w, a.cols, n));
    out
}

fn leaky_inplace(h: &mut [f32]) {
    h.par_chunks_mut(ROWS * 512).for_each(|c| {
        for v in c {
            *v = if *v < 0.0 { *v * SLOPE } else { *v };
        }
    });
}

/// `delta *= LeakyReLU'(pre-activation)`, read from the activation itself (same sign).
fn leaky_back(delta: &mut [f32], act: &[f32]) {
    delta
        .par_chunks_mut(ROWS * 512)
        .zip(act.par_chunks(ROWS * 512))
        .for_each(|(d, a)| {
            for (d, &a) in d.iter_mut().zip(a) {
                *d = if a < 0.0 { *d * SLOPE } else { *d };
            }
        });
}

/// Column sums of a `rows x n` row-major matrix (`1 x n`).
fn colsum(m: &[f32], n: usize) -> Vec<f32> {
    let part = |c: &[f32]| {
        let mut s = vec![0f32; n];
        for row in c.chunks_exact(n) {
            for (s, v) in s.iter_mut().zip(row) {
                *s += v;
            }
        }
        s
    };
    if m.len() < 1 << 16 {
        return part(m);
    }
    // parts in a fixed order, added in that order: the same bits whatever the thread count or
    // scheduling (rayon's `reduce` adds along a tree that depends on work stealing)
    let parts: Vec<Vec<f32>> = m.par_chunks(ROWS * n).map(part).collect();
    let mut s = vec![0f32; n];
    for p in parts {
        for (a, b) in s.iter_mut().zip(p) {
            *a += b;
        }
    }
    s
}

/// The deep encoder's output `Z` (`rows x p`, row-major) of `x` (`rows x d`), in blocks of rows
/// (prediction over a whole data set). `arch` must be [`supported`].
pub fn encode(arch: &Arch, params: &[Vec<f32>], x: &[f32], rows: usize) -> Vec<f32> {
    let layers = arch.layers();
    let n_enc = (layers.len() - 2) / 2;
    let (d, p) = (arch.input, arch.embed);
    assert!(
        supported(arch) && params.len() == 2 * layers.len() && x.len() == rows * d,
        "host encoder: unsupported architecture or wrong sizes"
    );
    const BLOCK: usize = 2048;
    let mut z = Vec::with_capacity(rows * p);
    for xb in x.chunks(BLOCK * d) {
        let b = xb.len() / d;
        let mut h = dense(View::rm(xb, b, d), &params[0], &params[1]);
        for l in 1..n_enc {
            leaky_inplace(&mut h);
            h = dense(
                View::rm(&h, b, layers[l].0),
                &params[2 * l],
                &params[2 * l + 1],
            );
        }
        z.extend_from_slice(&h);
    }
    z
}

/// Loss terms and gradients of one host step.
pub struct StepOut {
    /// The loss terms as [`super::net::loss`] reports them (AE-CM: five; pre-training: the MSE).
    pub terms: Vec<f32>,
    /// Gradient of the total for every parameter, in parameter order; empty for parameters the
    /// loss does not involve (the CM's during pre-training).
    pub grads: Vec<Vec<f32>>,
}

/// One forward and backward pass on a batch `x` (`b x d`, row-major) with parameters `params`
/// (host vectors in the order of [`Arch::layers`]). `arch` must be [`supported`].
///
/// Shapes: encoder `B x d -> B x p` (LeakyReLU(0.2) after every hidden layer, linear output),
/// decoder `B x p -> B x d`; the CM on `Z` (`B x p`): `G = softmax(Z W_enc + b_enc)` (`B x K`),
/// `Z_hat = G W_dec + b_dec`, `U = W_dec + b_dec` (`K x p`). With `R = Z - Z_hat`, the prior's
/// weights `w_k = 1 - alpha_r(k)` (r(k) the rank of the batch mean `m_k`) and `S = sign(U U^T -
/// I)`:
/// - d(beta ||X - X_hat||^2)/dX_hat = 2 beta (X_hat - X);
/// - dG = -2 R W_dec^T + (1 - 2 G) + w_k / (B (m_k + 1e-10)); the softmax's backward
///   `dlogits = G * (dG - rowsum(dG * G))`;
/// - dU = 2 lambda S U (S is symmetric), added to W_dec and, summed over rows, to b_dec;
/// - dW_dec = -2 G^T R + dU, db_dec = -2 colsum(R) + colsum(dU), dW_enc = Z^T dlogits,
///   db_enc = colsum(dlogits), dZ = 2 R + dlogits W_enc^T + (the decoder's backward).
pub fn step(
    arch: &Arch,
    params: &[Vec<f32>],
    x: &[f32],
    b: usize,
    loss: HostLoss,
    w: &LossWeights,
) -> StepOut {
    let layers = arch.layers();
    let n_deep = layers.len() - 2;
    let n_enc = n_deep / 2;
    let d = arch.input;
    assert!(
        supported(arch) && params.len() == 2 * layers.len() && x.len() == b * d,
        "host step: unsupported architecture or wrong sizes"
    );
    // forward: acts[l] is the input of deep layer l; acts[n_enc] = Z, acts[n_deep] = X_hat
    let mut acts: Vec<Vec<f32>> = Vec::with_capacity(n_deep);
    for (l, &(fin, _)) in layers[..n_deep].iter().enumerate() {
        let input = if l == 0 { x } else { &acts[l - 1] };
        let mut h = dense(View::rm(input, b, fin), &params[2 * l], &params[2 * l + 1]);
        if l + 1 != n_enc && l + 1 != n_deep {
            leaky_inplace(&mut h);
        }
        acts.push(h);
    }
    let act = |l: usize| -> &[f32] { if l == 0 { x } else { &acts[l - 1] } };
    let x_hat = act(n_deep);
    let z = act(n_enc);
    let mut grads: Vec<Vec<f32>> = vec![Vec::new(); params.len()];

    // the deep reconstruction and its gradient with respect to X_hat
    let (scale, terms0) = match loss {
        HostLoss::AeMse => (1.0 / (b * d) as f64, 1.0 / (b * d) as f64),
        HostLoss::AeCm => (w.beta, w.beta),
    };
    let mut delta = vec![0f32; b * d];
    let sq: f64 = delta
        .par_chunks_mut(ROWS * d)
        .zip(x_hat.par_chunks(ROWS * d).zip(x.par_chunks(ROWS * d)))
        .map(|(dl, (xh, xv))| {
            let mut s = 0f64;
            for ((dl, &xh), &xv) in dl.iter_mut().zip(xh).zip(xv) {
                let r = xh - xv;
                s += f64::from(r * r);
                *dl = (2.0 * scale) as f32 * r;
            }
            s
        })
        .collect::<Vec<f64>>()
        .into_iter()
        .sum(); // in block order: the same bits whatever the thread count
    let mut terms = vec![(sq * terms0) as f32];

    // the clustering module on Z: its terms, its parameters' gradients and dZ
    let dz_cm = if loss == HostLoss::AeCm {
        let c = 2 * n_deep;
        let (t, gcm, dz) = cm_part(arch, z, b, &params[c..c + 4], w);
        terms.extend(t);
        for (slot, g) in grads[c..c + 4].iter_mut().zip(gcm) {
            *slot = g;
        }
        Some(dz)
    } else {
        None
    };

    // backward through the decoder, then the encoder
    for l in (0..n_deep).rev() {
        let (fin, fout) = layers[l];
        if l + 1 == n_enc
            && let Some(dz) = &dz_cm
        {
            for (a, b) in delta.iter_mut().zip(dz) {
                *a += b;
            }
        }
        if l + 1 != n_enc && l + 1 != n_deep {
            leaky_back(&mut delta, act(l + 1));
        }
        let mut dw = vec![0f32; fin * fout];
        matmul(
            &mut dw,
            false,
            View::rm(act(l), b, fin).t(),
            View::rm(&delta, b, fout),
        );
        grads[2 * l] = dw;
        grads[2 * l + 1] = colsum(&delta, fout);
        if l > 0 {
            let mut next = vec![0f32; b * fin];
            matmul(
                &mut next,
                false,
                View::rm(&delta, b, fout),
                View::rm(&params[2 * l], fin, fout).t(),
            );
            delta = next;
        }
    }
    StepOut { terms, grads }
}

/// The AE-CM's clustering-module terms on `Z` (`b x p`): `[CM rec, sparsity, prior, lambda *
/// orth]`, the gradients of `[W_enc, b_enc, W_dec, b_dec]` and dZ (`b x p`). `K x p` and `b x
/// K` arrays: plain loops.
#[allow(clippy::needless_range_loop)]
fn cm_part(
    arch: &Arch,
    z: &[f32],
    b: usize,
    cm: &[Vec<f32>],
    w: &LossWeights,
) -> (Vec<f32>, Vec<Vec<f32>>, Vec<f32>) {
    let (p, k) = (arch.embed, arch.k);
    let (we, be, wd, bd) = (&cm[0], &cm[1], &cm[2], &cm[3]);
    // G = softmax(Z W_enc + b_enc)
    let mut g = dense(View::rm(z, b, p), we, be);
    for row in g.chunks_exact_mut(k) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut s = 0f32;
        for v in row.iter_mut() {
            *v = (*v - m).exp();
            s += *v;
        }
        for v in row.iter_mut() {
            *v /= s;
        }
    }
    // R = Z - (G W_dec + b_dec)
    let mut r = dense(View::rm(&g, b, k), wd, bd);
    for (rv, zv) in r.iter_mut().zip(z) {
        *rv = zv - *rv;
    }
    let cm_rec: f64 = r.iter().map(|v| f64::from(v * v)).sum();
    let sparsity: f64 = g.iter().map(|&v| f64::from(v * (1.0 - v))).sum();
    // prior on the batch means, weights by rank
    let colg = colsum(&g, k);
    let mean: Vec<f32> = colg.iter().map(|s| s / b as f32 + 1e-10).collect();
    let logm: Vec<f32> = mean.iter().map(|m| m.ln()).collect();
    let wk = prior_weights(&logm, &w.alpha);
    let prior: f64 = logm.iter().zip(&wk).map(|(l, w)| f64::from(l * w)).sum();
    // U = W_dec + b_dec, M = U U^T, S = sign(M - I)
    let mut u = wd.clone();
    for row in u.chunks_exact_mut(p) {
        for (v, bv) in row.iter_mut().zip(bd) {
            *v += bv;
        }
    }
    let lam = w.lambda as f32;
    let mut orth = 0f64;
    let mut s = vec![0f32; k * k];
    for i in 0..k {
        for j in 0..k {
            let mij: f32 = u[i * p..(i + 1) * p]
                .iter()
                .zip(&u[j * p..(j + 1) * p])
                .map(|(a, b)| a * b)
                .sum();
            let e = mij - if i == j { 1.0 } else { 0.0 };
            orth += f64::from(e.abs());
            s[i * k + j] = if e > 0.0 {
                1.0
            } else if e < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
    }
    let terms = vec![
        cm_rec as f32,
        sparsity as f32,
        prior as f32,
        (orth * w.lambda) as f32,
    ];
    // dG, then dlogits in place
    let mut dl = vec![0f32; b * k];
    matmul(&mut dl, false, View::rm(&r, b, p), View::rm(wd, k, p).t());
    let pw: Vec<f32> = wk
        .iter()
        .zip(&mean)
        .map(|(w, m)| w / (b as f32 * m))
        .collect();
    for (drow, grow) in dl.chunks_exact_mut(k).zip(g.chunks_exact(k)) {
        let mut dot = 0f32;
        for j in 0..k {
            drow[j] = -2.0 * drow[j] + (1.0 - 2.0 * grow[j]) + pw[j];
            dot += drow[j] * grow[j];
        }
        for j in 0..k {
            drow[j] = grow[j] * (drow[j] - dot);
        }
    }
    // dU = 2 lambda S U
    let mut du = vec![0f32; k * p];
    matmul(&mut du, false, View::rm(&s, k, k), View::rm(&u, k, p));
    for v in &mut du {
        *v *= 2.0 * lam;
    }
    let mut dwe = vec![0f32; p * k];
    matmul(&mut dwe, false, View::rm(z, b, p).t(), View::rm(&dl, b, k));
    let dbe = colsum(&dl, k);
    let mut dwd = du.clone();
    // -2 G^T R
    let mut gtr = vec![0f32; k * p];
    matmul(&mut gtr, false, View::rm(&g, b, k).t(), View::rm(&r, b, p));
    for (a, v) in dwd.iter_mut().zip(&gtr) {
        *a -= 2.0 * v;
    }
    let colr = colsum(&r, p);
    let cold = colsum(&du, p);
    let dbd: Vec<f32> = colr.iter().zip(&cold).map(|(r, c)| c - 2.0 * r).collect();
    // dZ = 2 R + dlogits W_enc^T
    let mut dz = r;
    for v in &mut dz {
        *v *= 2.0;
    }
    matmul(&mut dz, true, View::rm(&dl, b, k), View::rm(we, p, k).t());
    (terms, vec![dwe, dbe, dwd, dbd], dz)
}

/// The prior's weight `1 - alpha_r(k)` of each cluster, `r(k)` the rank of `logm[k]` among the
/// K log-means (ascending; alpha is sorted ascending), or one value for all with a scalar alpha.
fn prior_weights(logm: &[f32], alpha: &[f64]) -> Vec<f32> {
    let k = logm.len();
    if alpha.len() <= 1 {
        let a = alpha.first().copied().unwrap_or(1.0);
        return vec![(1.0 - a) as f32; k];
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&i, &j| logm[i].total_cmp(&logm[j]));
    let mut wk = vec![0f32; k];
    for (rank, &cl) in order.iter().enumerate() {
        wk[cl] = (1.0 - alpha[rank.min(alpha.len() - 1)]) as f32;
    }
    wk
}

/// Predictions and the model-selection criterion from the soft assignments of a whole data set
/// (`g`: `n x K`, row-major) and the centroids (`u`: `K x p`): the argmax of each row and `L_sp =
/// E2 + E3 = sum_k colsum_k(G) ||u_k||^2 - sum_kl (G^T G)_kl (U U^T)_kl` (ALGORITHM.md section 1),
/// in row blocks over the CPU threads (sums in f64 across blocks).
pub fn labels_and_lsp(g: &[f32], k: usize, u: &[f32], p: usize) -> (Vec<u32>, f64) {
    assert!(
        k > 0 && g.len().is_multiple_of(k) && u.len() == k * p,
        "labels_and_lsp: wrong sizes"
    );
    const BLOCK: usize = 4096;
    let parts: Vec<(Vec<u32>, Vec<f32>, Vec<f32>)> = g
        .par_chunks(BLOCK * k)
        .map(|blk| {
            let mut labels = Vec::with_capacity(blk.len() / k);
            let mut col = vec![0f32; k];
            let mut a = vec![0f32; k * k];
            for row in blk.chunks_exact(k) {
                let mut best = 0;
                for (j, &v) in row.iter().enumerate() {
                    col[j] += v;
                    if v > row[best] {
                        best = j;
                    }
                    for (av, &w) in a[j * k..(j + 1) * k].iter_mut().zip(row) {
                        *av += v * w;
                    }
                }
                labels.push(best as u32);
            }
            (labels, col, a)
        })
        .collect();
    let mut labels = Vec::with_capacity(g.len() / k);
    let mut col = vec![0f64; k];
    let mut a = vec![0f64; k * k];
    for (l, c, ab) in parts {
        labels.extend(l);
        for (x, y) in col.iter_mut().zip(c) {
            *x += f64::from(y);
        }
        for (x, y) in a.iter_mut().zip(ab) {
            *x += f64::from(y);
        }
    }
    let mut lsp = 0f64;
    for i in 0..k {
        for j in 0..k {
            let m = f64::from(dot(&u[i * p..(i + 1) * p], &u[j * p..(j + 1) * p]));
            if i == j {
                lsp += col[i] * m;
            }
            lsp -= a[i * k + j] * m;
        }
    }
    (labels, lsp)
}

/// Dot product in eight independent lanes (a plain `sum()` over `f32` is one serial chain).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `out (b x q) = Z W` with `W` given transposed (`wt`: `q x p`): the AVX2 kernel where the CPU
/// has it, else `gemm`.
fn z_wt(z: &[f32], b: usize, p: usize, wt: &[f32], q: usize, out: &mut [f32]) {
    if !super::skinny::z_w(z, b, p, wt, q, out) {
        matmul(out, false, View::rm(z, b, p), View::rm(wt, q, p).t());
    }
}

/// The clustering module's step on the host ([`super::net::cm_loss_and_grads`] without burn:
/// the same closed-form algebra, documented there, in plain loops over the `B x K`, `K x K` and
/// `K x p` arrays, and the two `Z` products in [`super::skinny`]'s kernels).
///
/// `cm` = `[W_enc (p x K), b_enc (1 x K), W_dec (K x p), b_dec (1 x p)]` as host vectors, `z` the
/// batch (`b x p`). Returns the terms `[E1, E2, E3, E4]` and the gradients of the total of the
/// terms switched on in `w.cm_terms`, in the order of `cm`.
#[allow(clippy::needless_range_loop)]
pub fn cm_step(
    cm: &[Vec<f32>],
    p: usize,
    k: usize,
    z: HostRows<'_>,
    b: usize,
    w: &LossWeights,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let (we, be, wd, bd) = (&cm[0], &cm[1], &cm[2], &cm[3]);
    let z_fits = match z {
        HostRows::Dense(z) => z.len() == b * p,
        HostRows::Sparse(s) => s.rows() == b && s.p() == p,
    };
    assert!(
        cm.len() == 4
            && we.len() == p * k
            && be.len() == k
            && wd.len() == k * p
            && bd.len() == p
            && z_fits,
        "CM host step: wrong sizes"
    );
    let on = |i: usize| if w.cm_terms[i] { 1f32 } else { 0f32 };
    let nq = 2 * k + 1;
    // [W_enc^T; W_dec; b_dec]: (2K + 1) x p
    let mut wcat = vec![0f32; nq * p];
    for i in 0..p {
        for j in 0..k {
            wcat[j * p + i] = we[i * k + j];
        }
    }
    wcat[k * p..2 * k * p].copy_from_slice(wd);
    wcat[2 * k * p..].copy_from_slice(bd);
    let mut proj = vec![0f32; b * nq];
    // sparse rows: the products over the non-zero entries, with [W_enc^T; W_dec; b_dec]^T
    // padded to whole registers (p x kp)
    let kp = nq.div_ceil(8) * 8;
    let z_sq = match z {
        HostRows::Dense(z) => {
            z_wt(z, b, p, &wcat, nq, &mut proj);
            super::skinny::sum_sq(z).unwrap_or_else(|| z.iter().map(|v| v * v).sum())
        }
        HostRows::Sparse(s) => {
            let mut wpad = vec![0f32; p * kp];
            for j in 0..nq {
                for i in 0..p {
                    wpad[i * kp + j] = wcat[j * p + i];
                }
            }
            let (starts, cols, vals) = s.parts();
            super::skinny::sparse_w(starts, cols, vals, &wpad, kp, nq, &mut proj);
            vals.iter().map(|v| v * v).sum()
        }
    };
    // G = softmax(logits); Z W_dec^T and Z b_dec^T stay in proj
    let mut g = vec![0f32; b * k];
    for (grow, prow) in g.chunks_exact_mut(k).zip(proj.chunks_exact(nq)) {
        let mut m = f32::NEG_INFINITY;
        for j in 0..k {
            grow[j] = prow[j] + be[j];
            m = m.max(grow[j]);
        }
        let mut sum = 0f32;
        for v in grow.iter_mut() {
            *v = (*v - m).exp();
            sum += *v;
        }
        for v in grow.iter_mut() {
            *v /= sum;
        }
    }
    // Gram of [W_dec; b_dec]: H = W_dec W_dec^T, c = W_dec b_dec^T, ||b_dec||^2
    let row = |i: usize| -> &[f32] { if i < k { &wd[i * p..(i + 1) * p] } else { bd } };
    let mut h = vec![0f32; k * k];
    let mut c = vec![0f32; k];
    for i in 0..k {
        for j in i..k {
            let v = dot(row(i), row(j));
            h[i * k + j] = v;
            h[j * k + i] = v;
        }
        c[i] = dot(row(i), bd);
    }
    let bb = dot(bd, bd);
    // U = W_dec + b_dec, n_k = ||u_k||^2, M = U U^T = H + c 1^T + 1 c^T + ||b||^2
    let mut u = wd.clone();
    for urow in u.chunks_exact_mut(p) {
        for (v, bv) in urow.iter_mut().zip(bd) {
            *v += bv;
        }
    }
    let n: Vec<f32> = u.chunks_exact(p).map(|r| dot(r, r)).collect();
    let mut mm = vec![0f32; k * k];
    for i in 0..k {
        for j in 0..k {
            mm[i * k + j] = h[i * k + j] + c[i] + c[j] + bb;
        }
    }
    // per-batch sums: colsum(G), q_k = sum g^2, A = G^T G, G H, the E1 cross terms
    let mut colg = vec![0f32; k];
    let mut q = vec![0f32; k];
    let mut a = vec![0f32; k * k];
    let mut gh = vec![0f32; b * k];
    let (mut cross, mut hat_sq) = (0f32, 0f32);
    for ((grow, prow), ghrow) in g
        .chunks_exact(k)
        .zip(proj.chunks_exact(nq))
        .zip(gh.chunks_exact_mut(k))
    {
        for i in 0..k {
            colg[i] += grow[i];
            q[i] += grow[i] * grow[i];
            for j in 0..k {
                a[i * k + j] += grow[i] * grow[j];
                ghrow[j] += grow[i] * h[i * k + j];
            }
        }
        for j in 0..k {
            cross += grow[j] * prow[k + j];
            hat_sq += ghrow[j] * grow[j] + 2.0 * grow[j] * c[j];
        }
        cross += prow[2 * k];
    }
    hat_sq += bb * b as f32;
    let s: Vec<f32> = colg.iter().zip(&q).map(|(c, q)| c - q).collect();
    let e1 = z_sq - 2.0 * cross + hat_sq;
    let e2: f32 = s.iter().zip(&n).map(|(s, n)| s * n).sum();
    let e3: f32 = q.iter().zip(&n).map(|(q, n)| q * n).sum::<f32>()
        - a.iter().zip(&mm).map(|(a, m)| a * m).sum::<f32>();
    let mean: Vec<f32> = colg.iter().map(|c| c / b as f32 + 1e-10).collect();
    let logm: Vec<f32> = mean.iter().map(|m| m.ln()).collect();
    let wk = prior_weights(&logm, &w.alpha);
    let e4: f32 = logm.iter().zip(&wk).map(|(l, w)| l * w).sum();
    // dG, then the softmax's backward, into d = [dlogits | G | 1] (b x (2K + 1))
    let pw: Vec<f32> = wk
        .iter()
        .zip(&mean)
        .map(|(w, m)| on(3) * w / (m * b as f32))
        .collect();
    let mut dmat = vec![0f32; b * nq];
    let mut dbe = vec![0f32; k];
    let mut dg = vec![0f32; k];
    for (((drow, grow), prow), ghrow) in dmat
        .chunks_exact_mut(nq)
        .zip(g.chunks_exact(k))
        .zip(proj.chunks_exact(nq))
        .zip(gh.chunks_exact(k))
    {
        let mut dotg = 0f32;
        for j in 0..k {
            let mut v = on(1) * (1.0 - 2.0 * grow[j]) * n[j] + pw[j];
            v -= on(0) * 2.0 * (prow[k + j] - ghrow[j] - c[j]);
            if w.cm_terms[2] {
                let gm: f32 = (0..k).map(|i| grow[i] * mm[i * k + j]).sum();
                v -= 2.0 * (gm - grow[j] * n[j]);
            }
            dg[j] = v;
            dotg += v * grow[j];
        }
        for j in 0..k {
            let dl = grow[j] * (dg[j] - dotg);
            drow[j] = dl;
            dbe[j] += dl;
            drow[k + j] = grow[j];
        }
        drow[2 * k] = 1.0;
    }
    // back = d^T Z: (2K + 1) x p
    let mut back = vec![0f32; nq * p];
    match z {
        HostRows::Dense(z) => {
            if !super::skinny::dt_z(&dmat, nq, z, b, p, &mut back) {
                matmul(
                    &mut back,
                    false,
                    View::rm(&dmat, b, nq).t(),
                    View::rm(z, b, p),
                );
            }
        }
        HostRows::Sparse(s) => {
            // Z^T d (p x kp): over the batch's compressed columns, each row of the result a sum
            // of rows of d (kept in cache) - no scattered writes; then transposed
            let mut back_t = vec![0f32; p * kp];
            let dpad = super::skinny::pad_rows(&dmat, nq, kp);
            match s.transpose() {
                Some(t) => {
                    let (starts, rows, vals) = t.parts();
                    super::skinny::sparse_w(starts, rows, vals, &dpad, kp, kp, &mut back_t);
                }
                // over 65,536 rows: add each entry's row of d where it belongs
                None => {
                    for (i, drow) in dpad.chunks_exact(kp).enumerate() {
                        let (c, v) = s.row(i);
                        for (&j, &x) in c.iter().zip(v) {
                            let j = usize::from(j);
                            for (o, dv) in back_t[j * kp..(j + 1) * kp].iter_mut().zip(drow) {
                                *o += x * dv;
                            }
                        }
                    }
                }
            }
            for j in 0..nq {
                for i in 0..p {
                    back[j * p + i] = back_t[i * kp + j];
                }
            }
        }
    }
    let mut dwe = vec![0f32; p * k];
    for j in 0..k {
        for i in 0..p {
            dwe[i * k + j] = back[j * p + i];
        }
    }
    // dU = 2 s_k u_k [E2] - 2 (A U - q_k u_k) [E3]; dW_dec = dU - 2 (G^T Z - A W_dec - colsum(G)^T
    // b_dec) [E1]; db_dec = colsum(dU) - 2 (colsum(Z) - colsum(G) W_dec - B b_dec) [E1]
    // (row operations over p, contiguous, so that they vectorise)
    let mut dwd = vec![0f32; k * p];
    let mut dbd = vec![0f32; p];
    let mut du = vec![0f32; p];
    let mut aw = vec![0f32; p];
    for i in 0..k {
        let ui = &u[i * p..(i + 1) * p];
        let cs = 2.0 * on(1) * s[i] + 2.0 * on(2) * q[i];
        for (d, &uv) in du.iter_mut().zip(ui) {
            *d = cs * uv;
        }
        aw.fill(0.0);
        for j in 0..k {
            let aij = a[i * k + j];
            let cu = -2.0 * on(2) * aij;
            for ((d, w), (&uv, &wv)) in du
                .iter_mut()
                .zip(aw.iter_mut())
                .zip(u[j * p..(j + 1) * p].iter().zip(&wd[j * p..(j + 1) * p]))
            {
                *d += cu * uv;
                *w += aij * wv;
            }
        }
        let gtz = &back[(k + i) * p..(k + i + 1) * p];
        let e1c = -2.0 * on(0);
        for (t, (dw, db)) in dwd[i * p..(i + 1) * p]
            .iter_mut()
            .zip(dbd.iter_mut())
            .enumerate()
        {
            *dw = du[t] + e1c * (gtz[t] - aw[t] - colg[i] * bd[t]);
            *db += du[t];
        }
    }
    // E1's part of db_dec: -2 (colsum(Z) - colsum(G) W_dec - B b_dec)
    let mut gw = vec![0f32; p];
    for j in 0..k {
        for (g, &wv) in gw.iter_mut().zip(&wd[j * p..(j + 1) * p]) {
            *g += colg[j] * wv;
        }
    }
    let colz = &back[2 * k * p..];
    for t in 0..p {
        dbd[t] -= 2.0 * on(0) * (colz[t] - gw[t] - b as f32 * bd[t]);
    }
    (vec![e1, e2, e3, e4], vec![dwe, dbe, dwd, dbd])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::net::{self, Net};
    use burn::tensor::{Device, Tensor, TensorData};

    fn arch(k: usize) -> Arch {
        arch_h(k, vec![6, 9])
    }

    fn arch_h(k: usize, hidden: Vec<usize>) -> Arch {
        Arch {
            kind: NetKind::AeCm,
            input: 7,
            hidden,
            embed: 3,
            k,
            quadratic: false,
        }
    }

    fn params(a: &Arch, seed: u64) -> Vec<Vec<f32>> {
        let mut r = crate::util::rng(seed, 0);
        net::random_params(a, &mut r)
            .into_iter()
            .map(|m| m.data)
            .collect()
    }

    fn data(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut r = crate::util::rng(seed, 9);
        (0..n * d)
            .map(|_| crate::util::uniform(&mut r, -1.0, 1.0) as f32)
            .collect()
    }

    /// Loss terms and gradients of burn's autodiff on [`net::loss`] (or the MSE).
    fn autodiff(
        a: &Arch,
        ps: &[Vec<f32>],
        x: &[f32],
        b: usize,
        loss: HostLoss,
        w: &LossWeights,
    ) -> (Vec<f32>, Vec<Vec<f32>>) {
        let dev = Device::flex();
        let shapes = a.param_shapes();
        let leaves: Vec<Tensor<2>> = ps
            .iter()
            .zip(&shapes)
            .map(|(p, s)| {
                Tensor::<2>::from_data(TensorData::new(p.clone(), *s), &dev)
                    .autodiff()
                    .require_grad()
            })
            .collect();
        let xt = Tensor::<2>::from_data(TensorData::new(x.to_vec(), [b, a.input]), &dev);
        let netw = Net {
            arch: a,
            params: &leaves,
        };
        let (total, terms) = match loss {
            HostLoss::AeCm => {
                let f = netw.forward(xt.clone());
                net::loss(NetKind::AeCm, &xt, &f, w)
            }
            HostLoss::AeMse => {
                let rec = netw.decode(netw.encode(xt.clone()));
                let mse = (xt - rec).square().mean();
                (mse.clone(), mse.reshape([1]))
            }
        };
        let gr = total.backward();
        let grads = leaves
            .iter()
            .map(|l| {
                l.grad(&gr)
                    .map(|g| {
                        g.into_data()
                            .convert::<f32>()
                            .try_into_vec::<f32>()
                            .unwrap()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let t = terms
            .without_autodiff()
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        (t, grads)
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 2e-4 * scale + 1e-6,
                "{what}[{i}]: host {x} vs autodiff {y} (scale {scale})"
            );
        }
    }

    /// The CM's host step gives the terms and gradients of the tensor version
    /// ([`net::cm_loss_and_grads`], itself checked against autodiff): scalar and vector alpha,
    /// the ablation's term subsets, odd shapes.
    #[test]
    fn cm_host_step_matches_the_tensor_step() {
        let dev = Device::flex();
        for (p, k, b, alpha, terms) in [
            (7, 3, 11, vec![2.0], [true; 4]),
            (13, 5, 33, vec![0.5, 1.0, 1.5, 3.0, 9.0], [true; 4]),
            (4, 4, 9, vec![5.0], [true, false, true, false]),
            (5, 2, 6, vec![1.5], [false, true, false, true]),
        ] {
            let a = Arch {
                kind: NetKind::Cm,
                input: p,
                hidden: vec![],
                embed: p,
                k,
                quadratic: false,
            };
            let ps = params(&a, p as u64);
            let z = data(b, p, k as u64);
            let w = LossWeights {
                alpha,
                beta: 1.0,
                lambda: 1.0,
                cm_terms: terms,
            };
            let (t, g) = cm_step(&ps, p, k, HostRows::Dense(&z), b, &w);
            let shapes = [[p, k], [1, k], [k, p], [1, p]];
            let ts: Vec<Tensor<2>> = ps
                .iter()
                .zip(shapes)
                .map(|(v, s)| Tensor::<2>::from_data(TensorData::new(v.clone(), s), &dev))
                .collect();
            let zt = Tensor::<2>::from_data(TensorData::new(z.clone(), [b, p]), &dev);
            let (tt, gt) = net::cm_loss_and_grads(zt, &ts, &w);
            let v = |t: Tensor<1>| {
                t.into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .unwrap()
            };
            close(&t, &v(tt), &format!("p {p} K {k} terms"));
            for (i, (h, r)) in g.iter().zip(gt).enumerate() {
                let r = r
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .unwrap();
                close(h, &r, &format!("p {p} K {k} grad {i}"));
            }
        }
    }

    /// The CM's host step from sparse rows equals the dense step on the same data: K 3 (one
    /// register of lanes), 10 (three), 20 (two column groups), the ablation's subsets, empty
    /// rows, odd sizes.
    #[test]
    fn cm_host_step_from_sparse_rows_matches_dense() {
        for (p, k, b, terms) in [
            (37, 3, 11, [true; 4]),
            (29, 10, 23, [true; 4]),
            (41, 20, 17, [true; 4]),
            (19, 10, 9, [true, false, true, false]),
            (19, 4, 9, [false, true, false, true]),
        ] {
            let a = Arch {
                kind: NetKind::Cm,
                input: p,
                hidden: vec![],
                embed: p,
                k,
                quadratic: false,
            };
            let ps = params(&a, p as u64);
            let mut z = data(b, p, k as u64);
            for (i, v) in z.iter_mut().enumerate() {
                // about 70% zeros, and the first row all zero
                if i < p || (i * 7919) % 10 < 7 {
                    *v = 0.0;
                }
            }
            let s = net::SparseRows::detect(&z, b, p, 0.5).unwrap();
            let w = LossWeights {
                alpha: vec![2.5],
                beta: 1.0,
                lambda: 1.0,
                cm_terms: terms,
            };
            let (td, gd) = cm_step(&ps, p, k, HostRows::Dense(&z), b, &w);
            let (ts, gs) = cm_step(&ps, p, k, HostRows::Sparse(&s), b, &w);
            close(&ts, &td, &format!("p {p} K {k} terms"));
            for (i, (a, d)) in gs.iter().zip(&gd).enumerate() {
                close(a, d, &format!("p {p} K {k} grad {i}"));
            }
            // a gathered batch is the same rows
            let back = s.gather([2, 0, 1]);
            assert_eq!(back.row(0), s.row(2));
            assert_eq!(back.row(1), s.row(0));
            assert_eq!(back.rows(), 3);
        }
    }

    /// Host labels and L_sp equal burn's argmax and [`net::e2_e3`] on the same assignments.
    #[test]
    fn host_labels_and_lsp_match_the_tensor_version() {
        let dev = Device::flex();
        let (n, k, p) = (9000, 4, 6);
        let logits = data(n, k, 3);
        let gt = burn::tensor::activation::softmax(
            Tensor::<2>::from_data(TensorData::new(logits, [n, k]), &dev) * 4.0,
            1,
        );
        let g = gt
            .clone()
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        let u = data(k, p, 4);
        let ut = Tensor::<2>::from_data(TensorData::new(u.clone(), [k, p]), &dev);
        let (labels, lsp) = labels_and_lsp(&g, k, &u, p);
        let (e2, e3) = net::e2_e3(&gt, &ut);
        let want = (e2 + e3)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap()[0];
        assert!(
            (lsp as f32 - want).abs() <= 1e-4 * want.abs(),
            "{lsp} vs {want}"
        );
        let am: Vec<u32> = gt
            .argmax(1)
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| v as u32)
            .collect();
        assert_eq!(labels, am);
    }

    /// The host encoder equals [`Net::encode`] on burn tensors, across its row blocks.
    #[test]
    fn host_encoder_matches_the_tensor_encoder() {
        let a = arch(3);
        let ps = params(&a, 5);
        let n = 2100;
        let x = data(n, a.input, 6);
        let dev = Device::flex();
        let shapes = a.param_shapes();
        let ts: Vec<Tensor<2>> = ps
            .iter()
            .zip(&shapes)
            .map(|(p, s)| Tensor::<2>::from_data(TensorData::new(p.clone(), *s), &dev))
            .collect();
        let xt = Tensor::<2>::from_data(TensorData::new(x.clone(), [n, a.input]), &dev);
        let want = Net {
            arch: &a,
            params: &ts,
        }
        .encode(xt)
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap();
        close(&encode(&a, &ps, &x, n), &want, "Z");
    }

    /// A seed must give the same run whatever the thread count or the scheduling: every
    /// reduction over the threads adds its parts in a fixed order. (rayon's `reduce` and `sum`
    /// combine parts along a tree that depends on the thread count and on work stealing: with
    /// them the column sums here, and so the bias gradients, differed in their last bits between
    /// 1 and 2 threads.)
    #[test]
    fn host_step_is_bit_identical_across_thread_counts() {
        let m = data(1500, 200, 4);
        let a = arch_h(10, vec![40, 300]);
        let ps = params(&a, 8);
        let b = 300;
        let x = data(b, a.input, 9);
        let w = LossWeights {
            alpha: vec![1.5],
            beta: 1.0,
            lambda: 1.0,
            cm_terms: [true; 4],
        };
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let s = step(&a, &ps, &x, b, HostLoss::AeCm, &w);
                (colsum(&m, 200), s.terms, s.grads)
            })
        };
        let one = run(1);
        for threads in [2, 3, 5, 8] {
            for _ in 0..3 {
                let other = run(threads);
                assert!(
                    one.0
                        .iter()
                        .zip(&other.0)
                        .all(|(p, q)| p.to_bits() == q.to_bits()),
                    "column sums differ with {threads} threads"
                );
                assert_eq!(
                    one.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    other.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "loss terms differ with {threads} threads"
                );
                for (i, (p, q)) in one.2.iter().zip(&other.2).enumerate() {
                    assert!(
                        p.iter().zip(q).all(|(p, q)| p.to_bits() == q.to_bits()),
                        "gradient {i} differs with {threads} threads"
                    );
                }
            }
        }
    }

    /// The host step's terms and every gradient equal burn's autodiff on the same loss: scalar
    /// and per-cluster alpha, lambda on and off, an odd batch, the pre-training MSE, and the UCI
    /// sets' network without hidden layers.
    #[test]
    fn host_step_matches_autodiff() {
        for (k, alpha, beta, lambda, b, hidden) in [
            (4, vec![1.5], 1.0, 1.0, 9, vec![6, 9]),
            (5, vec![0.1, 0.5, 1.0, 2.0, 3.0], 0.3, 0.0, 17, vec![6, 9]),
            (2, vec![10.0], 100.0, 2.5, 1, vec![6, 9]),
            (3, vec![2.0], 1.0, 1.0, 12, vec![]),
            (3, vec![2.0], 1.0, 1.0, 12, vec![5]),
        ] {
            let a = arch_h(k, hidden);
            let ps = params(&a, k as u64);
            let x = data(b, a.input, k as u64 + 1);
            let w = LossWeights {
                alpha,
                beta,
                lambda,
                cm_terms: [true; 4],
            };
            for loss in [HostLoss::AeCm, HostLoss::AeMse] {
                let out = step(&a, &ps, &x, b, loss, &w);
                let (t, g) = autodiff(&a, &ps, &x, b, loss, &w);
                close(&out.terms, &t, &format!("{loss:?} K {k} terms"));
                assert_eq!(out.grads.len(), g.len());
                for (i, (h, r)) in out.grads.iter().zip(&g).enumerate() {
                    close(h, r, &format!("{loss:?} K {k} grad {i}"));
                }
            }
        }
    }
}
