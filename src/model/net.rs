//! The CM and AE-CM networks (ALGORITHM.md sections 1-2) and their losses, on burn tensors.
//!
//! A network is a list of dense layers: the deep encoder (empty for CM), the deep decoder (empty
//! for CM), and the clustering module's encoder (`W_enc`, `b_enc`) and decoder (`W_dec`, `b_dec`).
//! Parameters live as plain `Tensor<2>` values (biases as `1 x n` rows) in a fixed order, so the
//! trainer's optimiser and averaging epoch treat every parameter alike.

use crate::util::{SeededRng, normal, uniform};
use burn::tensor::activation::{leaky_relu, softmax};
use burn::tensor::{Device, IndexingUpdateOp, Tensor, TensorData};

/// Which model the network implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetKind {
    /// The clustering module alone, on the input.
    Cm,
    /// A deep autoencoder with a CM on its embedding.
    AeCm,
}

/// Layer sizes of a network.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Arch {
    /// CM or AE-CM.
    pub kind: NetKind,
    /// Input dimension d.
    pub input: usize,
    /// Hidden layer widths of the encoder (the decoder mirrors them). Empty for CM.
    pub hidden: Vec<usize>,
    /// Embedding dimension p (= d for CM).
    pub embed: usize,
    /// Number of clusters K.
    pub k: usize,
    /// AE-CM only: the encoder starts with the fixed quadratic feature map of [`quadratic`]
    /// (`d -> 1 + d + d^2`), as the paper's two-circles encoder; the decoder outputs `d`.
    #[serde(default)]
    pub quadratic: bool,
}

/// The quadratic feature map `(1, x_1..x_d, x_1 x_1, x_1 x_2, ..., x_d x_d)`: `B x d -> B x (1 +
/// d + d^2)` (both `x_i x_j` and `x_j x_i`, as the paper writes it for two circles).
pub fn quadratic(x: Tensor<2>) -> Tensor<2> {
    let [b, d] = x.dims();
    let outer =
        (x.clone().unsqueeze_dim::<3>(2) * x.clone().unsqueeze_dim::<3>(1)).reshape([b, d * d]);
    Tensor::cat(vec![Tensor::ones([b, 1], &x.device()), x, outer], 1)
}

impl Arch {
    /// (fan_in, fan_out) of every dense layer, in parameter order.
    pub fn layers(&self) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        if self.kind == NetKind::AeCm {
            let mut sizes = vec![self.input];
            sizes.extend(&self.hidden);
            sizes.push(self.embed);
            for (i, w) in sizes.windows(2).enumerate() {
                let fan_in = if i == 0 && self.quadratic {
                    1 + self.input + self.input * self.input
                } else {
                    w[0]
                };
                v.push((fan_in, w[1]));
            }
            for w in sizes.windows(2).rev() {
                v.push((w[1], w[0]));
            }
        }
        v.push((self.embed, self.k));
        v.push((self.k, self.embed));
        v
    }

    /// Shape of every parameter in parameter order: each layer's kernel `[in, out]`, then its
    /// bias `[1, out]`.
    pub fn param_shapes(&self) -> Vec<[usize; 2]> {
        self.layers()
            .iter()
            .flat_map(|&(i, o)| [[i, o], [1, o]])
            .collect()
    }

    /// Number of deep (encoder + decoder) layers.
    pub fn n_deep(&self) -> usize {
        self.layers().len() - 2
    }

    /// Total number of scalar parameters.
    pub fn n_params(&self) -> usize {
        self.layers().iter().map(|(i, o)| i * o + o).sum()
    }
}

/// Glorot-uniform kernel `fan_in x fan_out`: U(-l, l), l = sqrt(6 / (fan_in + fan_out)).
pub fn glorot(rng: &mut SeededRng, fan_in: usize, fan_out: usize) -> Vec<f32> {
    let l = (6.0 / (fan_in + fan_out) as f64).sqrt();
    (0..fan_in * fan_out)
        .map(|_| uniform(rng, -l, l) as f32)
        .collect()
}

/// Random bias of length n: normal with sd sqrt(1/n), truncated (redrawn) beyond 2 sd.
pub fn random_bias(rng: &mut SeededRng, n: usize) -> Vec<f32> {
    let sd = (1.0 / n as f64).sqrt();
    (0..n)
        .map(|_| {
            loop {
                let z = normal(rng);
                if z.abs() <= 2.0 {
                    break (z * sd) as f32;
                }
            }
        })
        .collect()
}

/// A row-major matrix in host memory.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct HostMat {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Values, row-major.
    pub data: Vec<f32>,
}

impl HostMat {
    /// Uploads to a tensor on `device`.
    pub fn to_tensor(&self, device: &Device) -> Tensor<2> {
        Tensor::from_data(
            TensorData::new(self.data.clone(), [self.rows, self.cols]),
            device,
        )
    }

    /// Downloads a 2-D tensor.
    pub fn from_tensor(t: &Tensor<2>) -> Self {
        let [rows, cols] = t.dims();
        let data = t
            .to_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap_or_default();
        Self { rows, cols, data }
    }
}

/// Random initial parameters for `arch` (kernels Glorot-uniform, biases truncated normal), in
/// parameter order: for each layer its kernel (`in x out`) then its bias (`1 x out`).
pub fn random_params(arch: &Arch, rng: &mut SeededRng) -> Vec<HostMat> {
    let mut out = Vec::new();
    for (i, o) in arch.layers() {
        out.push(HostMat {
            rows: i,
            cols: o,
            data: glorot(rng, i, o),
        });
        out.push(HostMat {
            rows: 1,
            cols: o,
            data: random_bias(rng, o),
        });
    }
    out
}

/// The outputs of one forward pass on a batch of B samples.
pub struct Forward {
    /// Embedding z, `B x p` (the input itself for CM).
    pub z: Tensor<2>,
    /// Responsibilities gamma, `B x K` (rows sum to 1).
    pub g: Tensor<2>,
    /// CM reconstruction of the embedding, `B x p`.
    pub z_hat: Tensor<2>,
    /// Centroids U = W_dec + b_dec, `K x p`.
    pub u: Tensor<2>,
    /// Deep reconstruction of the input, `B x d` (AE-CM only).
    pub x_hat: Option<Tensor<2>>,
}

/// A view of the network over a parameter list (plain, or autodiff leaves during training).
pub struct Net<'a> {
    /// The layer sizes.
    pub arch: &'a Arch,
    /// Parameters in the order of [`Arch::layers`]: kernel, bias, kernel, bias, ...
    pub params: &'a [Tensor<2>],
}

impl Net<'_> {
    fn dense(&self, layer: usize, x: Tensor<2>) -> Tensor<2> {
        x.matmul(self.params[2 * layer].clone()) + self.params[2 * layer + 1].clone()
    }

    /// Deep encoder: `B x d -> B x p`, LeakyReLU(0.2) after every hidden layer, linear output
    /// (after the quadratic feature map when the architecture has it). Identity for CM.
    pub fn encode(&self, x: Tensor<2>) -> Tensor<2> {
        let n_enc = self.arch.n_deep() / 2;
        let mut h = if self.arch.quadratic { quadratic(x) } else { x };
        for l in 0..n_enc {
            h = self.dense(l, h);
            if l + 1 < n_enc {
                h = leaky_relu(h, 0.2);
            }
        }
        h
    }

    /// Deep decoder: `B x p -> B x d`, LeakyReLU(0.2) after every hidden layer, linear output.
    pub fn decode(&self, z: Tensor<2>) -> Tensor<2> {
        let n_enc = self.arch.n_deep() / 2;
        let mut h = z;
        for l in 0..n_enc {
            h = self.dense(n_enc + l, h);
            if l + 1 < n_enc {
                h = leaky_relu(h, 0.2);
            }
        }
        h
    }

    /// Index of the CM encoder kernel in the parameter list.
    pub fn cm_index(&self) -> usize {
        2 * self.arch.n_deep()
    }

    /// Centroids `U = W_dec + b_dec`: `K x p`.
    pub fn centroids(&self) -> Tensor<2> {
        let c = self.cm_index();
        self.params[c + 2].clone() + self.params[c + 3].clone()
    }

    /// Responsibilities only (`B x p -> B x K`), without the CM's reconstruction (for prediction).
    pub fn gamma(&self, z: Tensor<2>) -> Tensor<2> {
        let c = self.cm_index();
        softmax(self.dense(c / 2, z), 1)
    }

    /// Clustering module on an embedding `z` (`B x p`): gamma (`B x K`) and z_hat (`B x p`).
    pub fn cm(&self, z: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let c = self.cm_index();
        let logits = self.dense(c / 2, z);
        let g = softmax(logits, 1);
        let z_hat = self.dense(c / 2 + 1, g.clone());
        (g, z_hat)
    }

    /// Full forward pass on a batch `x` (`B x d`).
    pub fn forward(&self, x: Tensor<2>) -> Forward {
        let z = self.encode(x);
        let (g, z_hat) = self.cm(z.clone());
        let x_hat = (self.arch.kind == NetKind::AeCm).then(|| self.decode(z.clone()));
        Forward {
            z,
            g,
            z_hat,
            u: self.centroids(),
            x_hat,
        }
    }
}

/// Hyper-parameters that enter the loss; may change between steps.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossWeights {
    /// Dirichlet concentration, sorted ascending; one value or K values.
    pub alpha: Vec<f64>,
    /// Weight of the deep reconstruction (AE-CM).
    pub beta: f64,
    /// Weight of the orthonormality term (AE-CM).
    pub lambda: f64,
    /// Which CM terms E1..E4 enter the loss (all for the paper's model; the ablation drops some).
    pub cm_terms: [bool; 4],
}

/// Names of the loss terms, in the order they are reported.
pub fn term_names(kind: NetKind) -> &'static [&'static str] {
    match kind {
        NetKind::Cm => &["E1", "E2", "E3", "E4"],
        NetKind::AeCm => &["rec", "cm_rec", "sparsity", "prior", "orth"],
    }
}

/// One-line explanations of the loss terms, in [`term_names`] order.
pub fn term_help(kind: NetKind) -> &'static [&'static str] {
    match kind {
        NetKind::Cm => &[
            "E1 = sum_i ||x_i - x_hat_i||^2: reconstruction",
            "E2 = sum_k [sum_i g_ik (1 - g_ik)] ||u_k||^2: sparsity and regularisation",
            "E3 = -sum_{k!=l} [sum_i g_ik g_il] u_k.u_l: cluster merging",
            "E4 = sum_k (1 - alpha_k) log(mean_i g_ik + 1e-10): Dirichlet prior",
        ],
        NetKind::AeCm => &[
            "beta * sum_i ||x_i - x_hat_i||^2: deep reconstruction",
            "sum_i ||z_i - z_hat_i||^2: CM reconstruction of the embedding",
            "sum_i sum_k g_ik (1 - g_ik): sparsity",
            "sum_k (1 - alpha_k) log(mean_i g_ik + 1e-10): Dirichlet prior",
            "lambda * sum_kl |(U U^T - I)_kl|: orthonormality of the centroids",
        ],
    }
}

/// The CM's E2 and E3 terms for embedding/responsibilities/centroids (sums over the batch).
/// Returns (E2, E3), each `[1]`.
pub fn e2_e3(g: &Tensor<2>, u: &Tensor<2>) -> (Tensor<1>, Tensor<1>) {
    // E2 = sum_k [sum_i g_ik (1 - g_ik)] ||u_k||^2
    let u2 = u.clone().square().sum_dim(1); // K x 1
    let gg = g.clone() * (g.clone().neg() + 1.0); // B x K
    let e2 = gg.sum_dim(0).matmul(u2.clone()).reshape([1]); // [1]
    // E3 = -(sum_kl (G^T G)_kl (U U^T)_kl - sum_k (sum_i g_ik^2) ||u_k||^2)
    let gtg = g.clone().transpose().matmul(g.clone()); // K x K
    let uut = u.clone().matmul(u.clone().transpose()); // K x K
    let full = (gtg * uut).sum();
    let diag = g.clone().square().sum_dim(0).matmul(u2).reshape([1]);
    let e3 = (full - diag).neg();
    (e2, e3)
}

/// The Dirichlet prior E4 = sum_k (1 - alpha_k) log(mean_i g_ik + 1e-10) on the batch mean.
/// With K alpha values the K log-means are sorted ascending first (alpha is sorted ascending).
pub fn prior(g: &Tensor<2>, alpha: &[f64]) -> Tensor<1> {
    let [_, k] = g.dims();
    let logm = (g.clone().mean_dim(0) + 1e-10).log(); // 1 x K
    if alpha.len() <= 1 {
        let a = alpha.first().copied().unwrap_or(1.0);
        logm.sum() * (1.0 - a)
    } else {
        let w: Vec<f32> = alpha.iter().map(|a| (1.0 - a) as f32).collect();
        let wt = Tensor::<2>::from_data(TensorData::new(w, [1, k]), &g.device());
        (logm.sort(1) * wt).sum()
    }
}

/// The clustering module's loss terms and their gradients in closed form, without an autodiff
/// graph: the CM's training step needs a handful of small products, and recording them for
/// reverse-mode differentiation costs more than computing them (BENCHMARKS.md).
///
/// `z` is the CM's input (`B x p`: the data for CM, the frozen embedding when AE-CM pre-trains
/// its CM); `cm` holds the CM parameters `[W_enc (p x K), b_enc (1 x K), W_dec (K x p), b_dec
/// (1 x p)]`. Returns the terms `[E1, E2, E3, E4]` (`[4]`, as [`loss`] reports them) and the
/// gradients of the total of the terms switched on in `w.cm_terms`, in the order of `cm`.
///
/// With `R = Z - Z_hat`, `U = W_dec + b_dec`, `n_k = ||u_k||^2`, `s_k = sum_i g_ik (1 - g_ik)`,
/// `q_k = sum_i g_ik^2`, `A = G^T G`, `M = U U^T` and `m_k = mean_i g_ik`:
/// - dE1/dG = -2 R W_dec^T; dE1/dW_dec = -2 G^T R; dE1/db_dec = -2 sum_i r_i;
/// - dE2/dG_ik = (1 - 2 g_ik) n_k; dE2/du_k = 2 s_k u_k;
/// - dE3/dG = -2 G (M - diag(n)); dE3/dU = -2 (A - diag(q)) U;
/// - dE4/dG_ik = (1 - alpha_r(k)) / (B (m_k + 1e-10)), r(k) the rank of m_k (alpha sorted
///   ascending; one alpha for all when it is a single value);
/// - U's gradient adds to W_dec's row by row and to b_dec summed over rows; the softmax's
///   backward is `G * (dG - rowsum(dG * G))`; then dW_enc = Z^T dlogits, db_enc = colsum(dlogits).
///
/// `B x p` arrays are the expensive ones, so `R` is never formed: with `H = W_dec W_dec^T` and
/// `c = W_dec b_dec^T`, `R W_dec^T = Z W_dec^T - G H - 1 c^T`, `G^T R = G^T Z - A W_dec - (G^T 1)
/// b_dec`, `1^T R = 1^T Z - (1^T G) W_dec - B b_dec` and `E1 = sum ||z_i||^2 - 2 sum z_i.z_hat_i +
/// sum ||z_hat_i||^2`. Z enters two products only: `Z [W_enc | W_dec^T | b_dec^T]` forward and
/// `Z^T [dlogits | G | 1]` backward. (E1's value loses relative precision when the residual is
/// tiny next to `||Z||^2`; its gradients do not: they have the rounding of the direct form.)
///
/// On the CPU backend with AVX2/FMA the two `Z` products run in [`super::skinny`]'s kernels on the
/// host (`Z` is taken by value so that its buffer moves there without a copy); elsewhere
/// through burn.
pub fn cm_loss_and_grads(
    z: Tensor<2>,
    cm: &[Tensor<2>],
    w: &LossWeights,
) -> (Tensor<1>, [Tensor<2>; 4]) {
    let [b, p] = z.dims();
    let dev = z.device();
    // Z on the host (CPU backend with the vector kernels), else as a tensor
    let z = if dev == Device::flex() && super::skinny::available() {
        ZIn::Host(host_vec(z))
    } else {
        ZIn::Dev(z)
    };
    cm_step(z, b, p, &dev, cm, w)
}

/// A data matrix with mostly zero entries (MNIST's pixels: 81% zeros; tf-idf rows), kept as
/// its non-zero entries per row (compressed sparse rows, 16-bit columns): the evaluation's pass
/// over every sample then reads and multiplies only those (BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseRows {
    /// Columns of the matrix.
    p: usize,
    /// Where row `i`'s entries start in `cols` / `vals`; `n + 1` offsets, non-decreasing.
    starts: Vec<usize>,
    /// Column of each non-zero entry (`< p`).
    cols: Vec<u16>,
    /// Value of each non-zero entry.
    vals: Vec<f32>,
}

impl SparseRows {
    /// The sparse form of the row-major `rows x p` matrix `x` when at most `max_density` of its
    /// entries are non-zero (counted before anything is built) and `p <= 65,536`, else `None`.
    pub fn detect(x: &[f32], rows: usize, p: usize, max_density: f64) -> Option<Self> {
        if x.len() != rows * p || p == 0 || p > usize::from(u16::MAX) + 1 {
            return None;
        }
        let nnz = x.iter().filter(|v| **v != 0.0).count();
        if nnz as f64 > max_density * x.len() as f64 {
            return None;
        }
        let mut starts = Vec::with_capacity(rows + 1);
        let (mut cols, mut vals) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        starts.push(0);
        for row in x.chunks_exact(p) {
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    // p <= 65,536, so j fits
                    cols.push(j as u16);
                    vals.push(v);
                }
            }
            starts.push(cols.len());
        }
        Some(Self {
            p,
            starts,
            cols,
            vals,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.starts.len() - 1
    }

    /// Number of non-zero entries.
    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Row `i`'s non-zero entries: (columns, values).
    pub fn row(&self, i: usize) -> (&[u16], &[f32]) {
        let (a, e) = (self.starts[i], self.starts[i + 1]);
        (&self.cols[a..e], &self.vals[a..e])
    }

    /// Number of columns.
    pub fn p(&self) -> usize {
        self.p
    }

    /// The offsets, columns and values (for the kernels of [`super::skinny`]).
    pub fn parts(&self) -> (&[usize], &[u16], &[f32]) {
        (&self.starts, &self.cols, &self.vals)
    }

    /// The transpose (`p x n`) in the same form, i.e. this matrix's compressed columns, built by
    /// a counting sort; `None` when `n` exceeds 65,536 (16-bit columns).
    pub fn transpose(&self) -> Option<Self> {
        let n = self.rows();
        if n > usize::from(u16::MAX) + 1 {
            return None;
        }
        let mut starts = vec![0usize; self.p + 1];
        for &j in &self.cols {
            starts[usize::from(j) + 1] += 1;
        }
        for j in 0..self.p {
            starts[j + 1] += starts[j];
        }
        let mut next = starts.clone();
        let (mut cols, mut vals) = (vec![0u16; self.nnz()], vec![0f32; self.nnz()]);
        for i in 0..n {
            let (c, v) = self.row(i);
            for (&j, &x) in c.iter().zip(v) {
                let at = &mut next[usize::from(j)];
                // i < n <= 65,536
                cols[*at] = i as u16;
                vals[*at] = x;
                *at += 1;
            }
        }
        Some(Self {
            p: n,
            starts,
            cols,
            vals,
        })
    }

    /// The rows `rows` (indices into this matrix, in that order) as a matrix of their own: a
    /// mini-batch. Panics on an index out of range.
    pub fn gather(&self, rows: impl IntoIterator<Item = usize>) -> Self {
        let (mut starts, mut cols, mut vals) = (vec![0], Vec::new(), Vec::new());
        for i in rows {
            let (c, v) = self.row(i);
            cols.extend_from_slice(c);
            vals.extend_from_slice(v);
            starts.push(cols.len());
        }
        Self {
            p: self.p,
            starts,
            cols,
            vals,
        }
    }
}

/// Samples on the host, dense or sparse.
#[derive(Debug, Clone, Copy)]
pub enum HostRows<'a> {
    /// Row-major `f32` values.
    Dense(&'a [f32]),
    /// The same values, non-zero entries only.
    Sparse(&'a SparseRows),
}

/// The CM's soft assignments `softmax(X W_enc + b_enc)` (`rows x K`, row-major) of a block of
/// samples on the host (`x`: `rows x p`, borrowed from the data set: no copy into a tensor);
/// `cm` starts with `[W_enc (p x K), b_enc (1 x K)]`. `None` unless the parameters live on the
/// CPU backend and the CPU runs [`super::skinny`]'s kernels. From [`SparseRows`] each row sums
/// its non-zero entries' rows of `W_enc`: the same product up to float rounding.
pub fn cm_gamma_host(x: HostRows<'_>, rows: usize, cm: &[Tensor<2>]) -> Option<Vec<f32>> {
    let dev = cm[0].device();
    let [p, k] = cm[0].dims();
    let fits = match x {
        HostRows::Dense(v) => v.len() == rows * p,
        HostRows::Sparse(s) => s.rows() == rows && s.p == p,
    };
    if dev != Device::flex() || !super::skinny::available() || !fits {
        return None;
    }
    let kp = k.div_ceil(8) * 8;
    let w = match x {
        HostRows::Dense(_) => host_vec(cm[0].clone().transpose()), // K x p
        HostRows::Sparse(_) => {
            // p x kp: each row of W_enc padded with zeros to whole registers
            super::skinny::pad_rows(&host_vec(cm[0].clone()), k, kp)
        }
    };
    let b = host_vec(cm[1].clone()); // 1 x K
    let mut g = vec![0f32; rows * k];
    // blocks of 1024 rows over the CPU threads
    const BLOCK: usize = 1024;
    use rayon::prelude::*;
    g.par_chunks_mut(BLOCK * k)
        .enumerate()
        .for_each(|(bi, gc)| {
            let (r0, m) = (bi * BLOCK, gc.len() / k);
            match x {
                HostRows::Dense(v) => {
                    super::skinny::z_w(&v[r0 * p..(r0 + m) * p], m, p, &w, k, gc);
                }
                HostRows::Sparse(s) => {
                    let st = &s.starts[r0..=r0 + m];
                    super::skinny::sparse_w(st, &s.cols, &s.vals, &w, kp, k, gc);
                }
            }
            for row in gc.chunks_exact_mut(k) {
                for (v, bj) in row.iter_mut().zip(&b) {
                    *v += bj;
                }
                let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0f32;
                for v in row.iter_mut() {
                    *v = (*v - m).exp();
                    sum += *v;
                }
                for v in row.iter_mut() {
                    *v /= sum;
                }
            }
        });
    Some(g)
}

fn cm_step(
    z: ZIn,
    b: usize,
    p: usize,
    dev: &Device,
    cm: &[Tensor<2>],
    w: &LossWeights,
) -> (Tensor<1>, [Tensor<2>; 4]) {
    let dev = dev.clone();
    let (we, be, wd, bd) = (&cm[0], &cm[1], &cm[2], &cm[3]);
    let k = we.dims()[1];
    let nq = 2 * k + 1;
    let on = |i: usize| if w.cm_terms[i] { 1.0 } else { 0.0 };
    // the forward product: logits, Z W_dec^T, Z b_dec^T
    let wcat_t = Tensor::cat(vec![we.clone().transpose(), wd.clone(), bd.clone()], 0); // (2K + 1) x p
    let wdb = wcat_t.clone().narrow(0, k, k + 1); // (K + 1) x p: [W_dec; b_dec]
    let (proj, z_sq) = match &z {
        ZIn::Host(zh) => {
            let mut out = vec![0f32; b * nq];
            super::skinny::z_w(zh, b, p, &host_vec(wcat_t), nq, &mut out);
            let sq = super::skinny::sum_sq(zh).unwrap_or(0.0);
            (
                Tensor::<2>::from_data(TensorData::new(out, [b, nq]), &dev),
                Tensor::<1>::from_data(TensorData::new(vec![sq], [1]), &dev),
            )
        }
        ZIn::Dev(zt) => (
            zt.clone().matmul(wcat_t.transpose()),
            zt.clone().square().sum(),
        ),
    }; // B x (2K + 1), [1]
    let g = softmax(proj.clone().narrow(1, 0, k) + be.clone(), 1); // B x K
    let zw = proj.clone().narrow(1, k, k); // B x K
    let zb = proj.narrow(1, 2 * k, 1); // B x 1
    // H = W_dec W_dec^T, c = W_dec b_dec^T, ||b_dec||^2 and U U^T = H + c 1^T + 1 c^T + ||b||^2
    // from one (K + 1) x (K + 1) Gram matrix of [W_dec; b_dec]
    let gram = wdb.clone().matmul(wdb.transpose());
    let h = gram.clone().slice([0..k, 0..k]); // K x K
    let c = gram.clone().slice([0..k, k..k + 1]); // K x 1
    let bb2 = gram.slice([k..k + 1, k..k + 1]); // 1 x 1
    let bb = bb2.clone().reshape([1]); // [1]
    let gh = g.clone().matmul(h.clone()); // B x K
    let u = wd.clone() + bd.clone(); // K x p
    let n = u.clone().square().sum_dim(1); // K x 1
    let colsum_g = g.clone().sum_dim(0); // 1 x K
    let s = colsum_g.clone() - g.clone().square().sum_dim(0); // 1 x K
    let q = g.clone().square().sum_dim(0); // 1 x K
    let a = g.clone().transpose().matmul(g.clone()); // K x K
    let m_uu = h.clone() + c.clone() + c.clone().transpose() + bb2; // K x K
    // E1 = sum ||z||^2 - 2 sum z.z_hat + sum ||z_hat||^2, z.z_hat = g.(Z W^T) + z.b,
    // ||z_hat||^2 = g H g^T + 2 g c + ||b||^2
    let cross = (g.clone() * zw.clone()).sum() + zb.sum();
    let hat_sq =
        (gh.clone() * g.clone()).sum() + g.clone().matmul(c.clone()).sum() * 2.0 + bb * b as f64;
    let e1 = z_sq - cross * 2.0 + hat_sq;
    let e2 = s.clone().matmul(n.clone()).reshape([1]);
    let e3 = q.clone().matmul(n.clone()).reshape([1]) - (a.clone() * m_uu.clone()).sum();
    let mean = g.clone().mean_dim(0) + 1e-10; // 1 x K
    let logm = mean.clone().log();
    // (1 - alpha) at each cluster's rank: one value for all, or scattered back from the sort
    let weight = if w.alpha.len() <= 1 {
        let a0 = w.alpha.first().copied().unwrap_or(1.0);
        Tensor::<2>::ones([1, k], &dev) * (1.0 - a0)
    } else {
        let wv: Vec<f32> = w.alpha.iter().map(|a| (1.0 - a) as f32).collect();
        let sorted_w = Tensor::<2>::from_data(TensorData::new(wv, [1, k]), &dev);
        let order = logm.clone().argsort(1); // 1 x K: cluster at each rank
        Tensor::<2>::zeros([1, k], &dev).scatter(1, order, sorted_w, IndexingUpdateOp::Add)
    };
    let e4 = (logm * weight.clone()).sum();
    let terms = Tensor::cat(vec![e1, e2, e3, e4], 0);
    // gradient with respect to G (B x K)
    let nt = n.transpose(); // 1 x K
    let mut dg = (g.clone() * -2.0 + 1.0) * nt.clone() * on(1);
    if w.cm_terms[0] {
        // -2 R W_dec^T
        dg = dg + (zw - gh - c.clone().transpose()) * -2.0;
    }
    if w.cm_terms[2] {
        dg = dg + (g.clone().matmul(m_uu) - g.clone() * nt) * -2.0;
    }
    if w.cm_terms[3] {
        dg = dg + weight / (mean * b as f64);
    }
    // softmax backward
    let dl = g.clone() * (dg.clone() - (dg * g.clone()).sum_dim(1)); // B x K
    // the backward product: dlogits^T Z, G^T Z, 1^T Z
    let d = Tensor::cat(vec![dl.clone(), g, Tensor::ones([b, 1], &dev)], 1); // B x (2K + 1)
    let back = match z {
        ZIn::Host(zh) => {
            let mut out = vec![0f32; nq * p];
            super::skinny::dt_z(&host_vec(d), nq, &zh, b, p, &mut out);
            Tensor::<2>::from_data(TensorData::new(out, [nq, p]), &dev)
        }
        ZIn::Dev(zt) => d.transpose().matmul(zt),
    }; // (2K + 1) x p
    let dwe = back.clone().narrow(0, 0, k).transpose();
    let dbe = dl.sum_dim(0);
    // gradient with respect to U (K x p)
    let du = u.clone() * s.transpose() * (2.0 * on(1))
        + (a.clone().matmul(u.clone()) - u * q.transpose()) * (-2.0 * on(2));
    let mut dwd = du.clone();
    let mut dbd = du.sum_dim(0);
    if w.cm_terms[0] {
        let gtz = back.clone().narrow(0, k, k); // K x p
        let colsum_z = back.narrow(0, 2 * k, 1); // 1 x p
        // -2 G^T R and -2 1^T R
        dwd = dwd
            + (gtz - a.matmul(wd.clone()) - colsum_g.clone().transpose().matmul(bd.clone())) * -2.0;
        dbd = dbd + (colsum_z - colsum_g.matmul(wd.clone()) - bd.clone() * b as f64) * -2.0;
    }
    (terms, [dwe, dbe, dwd, dbd])
}

/// The CM step's input: on the host for the vector kernels, or a tensor (one value per step,
/// so the size difference between the variants does not matter).
#[allow(clippy::large_enum_variant)]
enum ZIn {
    Host(Vec<f32>),
    Dev(Tensor<2>),
}

/// A tensor's values on the host, row-major (moved without a copy when the CPU backend's
/// tensor is contiguous and not shared).
fn host_vec(t: Tensor<2>) -> Vec<f32> {
    // converted to f32 first, so reading it as f32 cannot fail
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

/// Loss of a forward pass: (total `[1]`, terms `[n_terms]`, each as it enters the total).
pub fn loss(kind: NetKind, x: &Tensor<2>, f: &Forward, w: &LossWeights) -> (Tensor<1>, Tensor<1>) {
    match kind {
        NetKind::Cm => {
            let e1 = (f.z.clone() - f.z_hat.clone()).square().sum();
            let (e2, e3) = e2_e3(&f.g, &f.u);
            let e4 = prior(&f.g, &w.alpha);
            let terms = [e1, e2, e3, e4];
            let mut total: Option<Tensor<1>> = None;
            for (t, on) in terms.iter().zip(w.cm_terms) {
                if on {
                    total = Some(match total {
                        None => t.clone(),
                        Some(a) => a + t.clone(),
                    });
                }
            }
            let total = total.unwrap_or_else(|| terms[0].clone() * 0.0);
            (total, Tensor::cat(terms.to_vec(), 0))
        }
        NetKind::AeCm => {
            let x_hat = f.x_hat.clone().unwrap_or_else(|| f.z.clone());
            let rec = (x.clone() - x_hat).square().sum() * w.beta;
            let cm_rec = (f.z.clone() - f.z_hat.clone()).square().sum();
            let sparsity = (f.g.clone() * (f.g.clone().neg() + 1.0)).sum();
            let pr = prior(&f.g, &w.alpha);
            let [k, _] = f.u.dims();
            let eye = Tensor::<2>::eye(k, &f.u.device());
            let orth = (f.u.clone().matmul(f.u.clone().transpose()) - eye)
                .abs()
                .sum()
                * w.lambda;
            let terms = vec![rec, cm_rec, sparsity, pr, orth];
            let total = terms
                .iter()
                .skip(1)
                .fold(terms[0].clone(), |a, b| a + b.clone());
            (total, Tensor::cat(terms, 0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev() -> Device {
        Device::flex()
    }

    fn t(rows: usize, cols: usize, seed: u64) -> Tensor<2> {
        let mut r = crate::util::rng(seed, 1);
        let v: Vec<f32> = (0..rows * cols).map(|_| normal(&mut r) as f32).collect();
        Tensor::from_data(TensorData::new(v, [rows, cols]), &dev())
    }

    fn vals(x: Tensor<1>) -> Vec<f32> {
        x.into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap()
    }

    /// The CM's host soft assignments equal burn's softmax(X W + b) (odd shapes: tails).
    #[test]
    fn cm_gamma_host_matches_the_tensor_path() {
        if !super::super::skinny::available() {
            return;
        }
        let (n, p, k) = (1500, 19, 5);
        let x = t(n, p, 11);
        let cm = [t(p, k, 12), t(1, k, 13)];
        let xs = x
            .clone()
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        let got = cm_gamma_host(HostRows::Dense(&xs), n, &cm).unwrap();
        let want = softmax(x.matmul(cm[0].clone()) + cm[1].clone(), 1)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-5, "gamma[{i}]: {a} vs {b}");
        }
    }

    /// Sparse rows: built only for sparse enough data, holding exactly the non-zero entries;
    /// the soft assignments from them equal the dense path's (odd sizes: block tails, empty
    /// rows).
    #[test]
    fn sparse_rows_give_the_same_gamma() {
        let (n, p, k) = (1100, 23, 4);
        let mut r = crate::util::rng(5, 1);
        let mut x: Vec<f32> = (0..n * p)
            .map(|_| {
                let v = normal(&mut r) as f32;
                if uniform(&mut r, 0.0, 1.0) < 0.7 {
                    0.0
                } else {
                    v
                }
            })
            .collect();
        x[..3 * p].fill(0.0); // empty rows
        assert!(SparseRows::detect(&x, n, p, 0.2).is_none());
        let s = SparseRows::detect(&x, n, p, 0.5).unwrap();
        assert_eq!(s.rows(), n);
        assert!(s.row(2).0.is_empty());
        let nnz = x.iter().filter(|v| **v != 0.0).count();
        assert_eq!(s.nnz(), nnz);
        let mut back = vec![0f32; n * p];
        for i in 0..n {
            let (cols, vals) = s.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                back[i * p + usize::from(j)] = v;
            }
        }
        assert_eq!(back, x);
        // the transpose holds the same entries by column
        let st = s.transpose().unwrap();
        assert_eq!((st.rows(), st.p(), st.nnz()), (p, n, nnz));
        for j in 0..p {
            let (rows, vals) = st.row(j);
            let want: Vec<(u16, f32)> = (0..n)
                .filter(|&i| x[i * p + j] != 0.0)
                .map(|i| (i as u16, x[i * p + j]))
                .collect();
            let got: Vec<(u16, f32)> = rows.iter().copied().zip(vals.iter().copied()).collect();
            assert_eq!(got, want, "column {j}");
        }
        if !super::super::skinny::available() {
            return;
        }
        // K = 4, 10, 20, 30: one to four registers per row of W; K = 40: the plain loop
        for k in [k, 10, 20, 30, 40] {
            let cm = [t(p, k, 12), t(1, k, 13)];
            let want = cm_gamma_host(HostRows::Dense(&x), n, &cm).unwrap();
            let got = cm_gamma_host(HostRows::Sparse(&s), n, &cm).unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (a, w)) in got.iter().zip(&want).enumerate() {
                assert!((a - w).abs() < 1e-5, "K {k} gamma[{i}]: {a} vs {w}");
            }
            // a sparse matrix of another shape is refused, not read out of bounds
            assert!(cm_gamma_host(HostRows::Sparse(&s), n - 1, &cm).is_none());
        }
    }

    #[test]
    fn quadratic_feature_map_and_its_layer_sizes() {
        let x = Tensor::<2>::from_data(
            TensorData::new(vec![2.0f32, 3.0, -1.0, 0.5], [2, 2]),
            &dev(),
        );
        let q = HostMat::from_tensor(&quadratic(x));
        assert_eq!((q.rows, q.cols), (2, 7));
        assert_eq!(q.data[..7], [1.0, 2.0, 3.0, 4.0, 6.0, 6.0, 9.0]);
        assert_eq!(q.data[7..], [1.0, -1.0, 0.5, 1.0, -0.5, -0.5, 0.25]);
        let arch = Arch {
            kind: NetKind::AeCm,
            input: 2,
            hidden: vec![],
            embed: 3,
            k: 2,
            quadratic: true,
        };
        // 2-quad-3: encoder 7 -> 3, decoder 3 -> 2, then the CM
        assert_eq!(arch.layers(), vec![(7, 3), (3, 2), (3, 2), (2, 3)]);
    }

    /// Closed-form CM gradients against burn's autodiff of [`loss`], for the full loss, the
    /// ablation's term subsets, and one or K alpha values (K values sort the cluster means).
    #[test]
    fn cm_closed_form_gradients_match_autodiff() {
        let arch = Arch {
            kind: NetKind::Cm,
            input: 7,
            hidden: vec![],
            embed: 7,
            k: 5,
            quadratic: false,
        };
        let x = t(40, 7, 11);
        let cases: [([bool; 4], Vec<f64>); 6] = [
            ([true; 4], vec![5.0]),
            ([true; 4], vec![0.5, 1.0, 3.0, 6.0, 20.0]),
            ([false, true, true, true], vec![2.0]),
            ([true, false, false, true], vec![5.0]),
            ([true, true, false, false], vec![5.0]),
            ([true, false, true, false], vec![5.0]),
        ];
        for (seed, (terms_on, alpha)) in cases.into_iter().enumerate() {
            let mut r = crate::util::rng(seed as u64 + 20, 0);
            let params: Vec<Tensor<2>> = random_params(&arch, &mut r)
                .iter()
                .map(|p| p.to_tensor(&dev()))
                .collect();
            let w = LossWeights {
                alpha,
                beta: 1.0,
                lambda: 1.0,
                cm_terms: terms_on,
            };
            let leaves: Vec<Tensor<2>> = params
                .iter()
                .map(|p| p.clone().autodiff().require_grad())
                .collect();
            let net = Net {
                arch: &arch,
                params: &leaves,
            };
            let xa = x.clone().autodiff();
            let f = net.forward(xa.clone());
            let (total, terms_ad) = loss(NetKind::Cm, &xa, &f, &w);
            let grads = total.backward();
            let (terms_cf, grads_cf) = cm_loss_and_grads(x.clone(), &params, &w);
            let ta = vals(terms_ad.without_autodiff().detach());
            let tc = vals(terms_cf);
            for (a, c) in ta.iter().zip(&tc) {
                assert!(
                    (a - c).abs() <= 1e-4 * a.abs().max(1.0),
                    "terms {ta:?} vs {tc:?}"
                );
            }
            for (i, (leaf, gc)) in leaves.iter().zip(grads_cf).enumerate() {
                let ga = HostMat::from_tensor(&leaf.grad(&grads).unwrap());
                let gc = HostMat::from_tensor(&gc);
                assert_eq!((ga.rows, ga.cols), (gc.rows, gc.cols), "param {i}");
                let scale = ga.data.iter().fold(1f32, |m, v| m.max(v.abs()));
                for (a, c) in ga.data.iter().zip(&gc.data) {
                    assert!(
                        (a - c).abs() <= 1e-4 * scale,
                        "case {seed}, param {i}: autodiff {a} vs closed form {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn cm_identity_e1_e2_e3_equals_weighted_distances() {
        // E1 + E2 + E3 = sum_ik g_ik ||x_i - u_k||^2 on random data and random parameters.
        let arch = Arch {
            kind: NetKind::Cm,
            input: 6,
            hidden: vec![],
            embed: 6,
            k: 4,
            quadratic: false,
        };
        let mut r = crate::util::rng(3, 0);
        let params: Vec<Tensor<2>> = random_params(&arch, &mut r)
            .iter()
            .map(|p| p.to_tensor(&dev()))
            .collect();
        let net = Net {
            arch: &arch,
            params: &params,
        };
        let x = t(50, 6, 9);
        let f = net.forward(x.clone());
        let w = LossWeights {
            alpha: vec![2.0],
            beta: 1.0,
            lambda: 1.0,
            cm_terms: [true; 4],
        };
        let (_, terms) = loss(NetKind::Cm, &x, &f, &w);
        let tv = vals(terms);
        let lhs = tv[0] + tv[1] + tv[2];
        // direct: sum_ik g_ik ||x_i - u_k||^2
        let g = HostMat::from_tensor(&f.g);
        let u = HostMat::from_tensor(&f.u);
        let xs = HostMat::from_tensor(&x);
        let mut rhs = 0f64;
        for i in 0..50 {
            for k in 0..4 {
                let d2: f64 = (0..6)
                    .map(|j| f64::from(xs.data[i * 6 + j] - u.data[k * 6 + j]).powi(2))
                    .sum();
                rhs += f64::from(g.data[i * 4 + k]) * d2;
            }
        }
        assert!(
            ((lhs as f64) - rhs).abs() < 1e-3 * rhs.abs().max(1.0),
            "{lhs} vs {rhs}"
        );
    }

    #[test]
    fn orthonormality_term_is_zero_for_orthonormal_centroids() {
        // U = rows of the identity (K=3, p=5): U U^T = I.
        let arch = Arch {
            kind: NetKind::AeCm,
            input: 5,
            hidden: vec![],
            embed: 5,
            k: 3,
            quadratic: false,
        };
        let mut u = vec![0f32; 15];
        for k in 0..3 {
            u[k * 5 + k] = 1.0;
        }
        let u = Tensor::<2>::from_data(TensorData::new(u, [3, 5]), &dev());
        let g = softmax(t(8, 3, 2), 1);
        let f = Forward {
            z: t(8, 5, 4),
            g,
            z_hat: t(8, 5, 5),
            u,
            x_hat: Some(t(8, 5, 6)),
        };
        let w = LossWeights {
            alpha: vec![1.0],
            beta: 1.0,
            lambda: 1.0,
            cm_terms: [true; 4],
        };
        let (_, terms) = loss(arch.kind, &t(8, 5, 7), &f, &w);
        let tv = vals(terms);
        assert!(tv[4].abs() < 1e-6, "orth = {}", tv[4]);
        // and non-zero for a non-orthonormal U
        let f2 = Forward { u: t(3, 5, 8), ..f };
        let (_, terms) = loss(arch.kind, &t(8, 5, 7), &f2, &w);
        assert!(vals(terms)[4] > 0.1);
    }

    #[test]
    fn prior_matches_formula_and_sorts_vector_alpha() {
        let g = Tensor::<2>::from_data(
            TensorData::new(vec![0.7f32, 0.2, 0.1, 0.5, 0.3, 0.2], [2, 3]),
            &dev(),
        );
        // means: 0.6, 0.25, 0.15
        let scalar = vals(prior(&g, &[3.0]))[0] as f64;
        let expect =
            (1.0 - 3.0) * ((0.6f64 + 1e-10).ln() + (0.25f64 + 1e-10).ln() + (0.15f64 + 1e-10).ln());
        assert!((scalar - expect).abs() < 1e-4);
        // vector alpha [1, 2, 5]: sorted log-means ascending (0.15, 0.25, 0.6) pair with (0, -1, -4)
        let v = vals(prior(&g, &[1.0, 2.0, 5.0]))[0] as f64;
        let expect = 0.0 * 0.15f64.ln() - 0.25f64.ln() - 4.0 * 0.6f64.ln();
        assert!((v - expect).abs() < 1e-4, "{v} vs {expect}");
    }

    #[test]
    fn glorot_and_bias_ranges() {
        let mut r = crate::util::rng(0, 0);
        let w = glorot(&mut r, 10, 20);
        let l = (6.0f32 / 30.0).sqrt();
        assert!(w.iter().all(|v| v.abs() <= l));
        let b = random_bias(&mut r, 16);
        assert!(b.iter().all(|v| v.abs() <= 2.0 * 0.25 + 1e-6));
    }
}
