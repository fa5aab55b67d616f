//! The two skinny products of the CM training step on the CPU: `Z W` (`B x p` by `p x q`) and
//! `D^T Z` (`q x B` by `B x p`), with `q = 2K + 1` small (21 for K = 10) and `p` the input
//! dimension. A general GEMM packs both operands and tiles for large squares; on these shapes
//! burn-flex's product ran at ~21 GFLOP/s of ~37 one core reaches (BENCHMARKS.md). These
//! kernels keep `Z` in place (rows are contiguous) and block registers for the shapes at hand.
//!
//! Vector code needs AVX2 and FMA, checked at run time; without them (another CPU or
//! architecture) the functions return `false` and the caller uses burn's product instead.
//! Matrices are row-major `f32` slices.

/// Lanes of one AVX2 register.
const L: usize = 8;

/// Whether this CPU runs the vector kernels.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out (b x q) = Z (b x p) W` with `W` given transposed (`wt`: `q x p`, row `j` = column `j`
/// of `W`). Returns `false` (and leaves `out` alone) when the CPU lacks AVX2/FMA.
pub fn z_w(z: &[f32], b: usize, p: usize, wt: &[f32], q: usize, out: &mut [f32]) -> bool {
    assert!(z.len() >= b * p && wt.len() >= q * p && out.len() >= b * q);
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked by `available`).
        unsafe { z_w_avx2(z, b, p, wt, q, out) };
        return true;
    }
    false
}

/// Sparse rows times a dense matrix: row `i` of `out` (`rows x k`) is `sum_e vals[e] W[cols[e]]`
/// over row `i`'s entries `starts[i]..starts[i + 1]` (`starts`: `rows + 1` offsets into `cols`
/// and `vals`). `W` comes padded to `kp` columns (`p x kp`, `kp` a multiple of 8 and at least
/// `k`, padding zero; [`pad_rows`]). AVX2 where the CPU has it, else a plain loop. Panics when an
/// offset or column lies outside the arrays (each entry's row of `W` is bounds-checked where it
/// is read: no separate pass over the entries).
pub fn sparse_w(
    starts: &[usize],
    cols: &[u16],
    vals: &[f32],
    wp: &[f32],
    kp: usize,
    k: usize,
    out: &mut [f32],
) {
    let rows = starts.len().saturating_sub(1);
    assert!(k <= kp && kp.is_multiple_of(L) && out.len() >= rows * k);
    #[cfg(target_arch = "x86_64")]
    if available() {
        // column groups of up to 32 lanes (four registers of accumulators per set)
        for g0 in (0..kp).step_by(4 * L) {
            let args = SparseArgs {
                starts,
                cols,
                vals,
                wp,
                kp,
                g0,
                k,
            };
            // SAFETY: the CPU supports AVX2 and FMA (checked by `available`).
            unsafe {
                match ((kp - g0) / L).min(4) {
                    1 => sparse_w_avx2::<1>(&args, out),
                    2 => sparse_w_avx2::<2>(&args, out),
                    3 => sparse_w_avx2::<3>(&args, out),
                    _ => sparse_w_avx2::<4>(&args, out),
                }
            }
        }
        return;
    }
    for (i, w) in starts.windows(2).enumerate() {
        let o = &mut out[i * k..(i + 1) * k];
        o.fill(0.0);
        for (&j, &x) in cols[w[0]..w[1]].iter().zip(&vals[w[0]..w[1]]) {
            let j = usize::from(j);
            for (ov, wv) in o.iter_mut().zip(&wp[j * kp..j * kp + k]) {
                *ov += x * wv;
            }
        }
    }
}

/// The rows of `src` (`rows x k`, row-major) each padded with zeros to `kp` columns.
pub fn pad_rows(src: &[f32], k: usize, kp: usize) -> Vec<f32> {
    let rows = src.len() / k.max(1);
    let mut out = vec![0f32; rows * kp];
    for (dst, s) in out.chunks_exact_mut(kp).zip(src.chunks_exact(k.max(1))) {
        dst[..k].copy_from_slice(s);
    }
    out
}

/// Arguments of [`sparse_w_avx2`]: the sparse rows, `W` padded to `kp` columns, the first lane
/// `g0` of this column group, and `k`.
struct SparseArgs<'a> {
    starts: &'a [usize],
    cols: &'a [u16],
    vals: &'a [f32],
    wp: &'a [f32],
    kp: usize,
    g0: usize,
    k: usize,
}

/// Columns `g0..g0 + 8 NR` of [`sparse_w`]; two sets of accumulators (even and odd entries) so
/// that consecutive entries do not wait on each other's additions.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sparse_w_avx2<const NR: usize>(a: &SparseArgs<'_>, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (kp, g0, k) = (a.kp, a.g0, a.k);
    // lanes g0..g0 + 8 NR of the padded row of W of column j (bounds-checked slice)
    let row = |j: u16| {
        let at = usize::from(j) * kp + g0;
        &a.wp[at..at + NR * L]
    };
    for (i, w) in a.starts.windows(2).enumerate() {
        let (c, v) = (&a.cols[w[0]..w[1]], &a.vals[w[0]..w[1]]);
        let (mut acc0, mut acc1) = ([_mm256_setzero_ps(); NR], [_mm256_setzero_ps(); NR]);
        for t in 0..c.len() / 2 {
            let (r0, r1) = (row(c[2 * t]), row(c[2 * t + 1]));
            let (v0, v1) = (_mm256_set1_ps(v[2 * t]), _mm256_set1_ps(v[2 * t + 1]));
            for r in 0..NR {
                // SAFETY: r0 and r1 hold 8 NR floats, so 8 r .. 8 r + 8 is inside both
                let (w0, w1) = unsafe {
                    (
                        _mm256_loadu_ps(r0.as_ptr().add(r * L)),
                        _mm256_loadu_ps(r1.as_ptr().add(r * L)),
                    )
                };
                acc0[r] = _mm256_fmadd_ps(v0, w0, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(v1, w1, acc1[r]);
            }
        }
        if c.len() % 2 == 1 {
            let r0 = row(c[c.len() - 1]);
            let v0 = _mm256_set1_ps(v[c.len() - 1]);
            for (r, slot) in acc0.iter_mut().enumerate() {
                // SAFETY: as above
                let w0 = unsafe { _mm256_loadu_ps(r0.as_ptr().add(r * L)) };
                *slot = _mm256_fmadd_ps(v0, w0, *slot);
            }
        }
        let mut lanes = [0f32; 4 * L];
        for r in 0..NR {
            let sum = _mm256_add_ps(acc0[r], acc1[r]);
            // SAFETY: `lanes` holds 32 floats, 8 r + 8 <= 32
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr().add(r * L), sum) };
        }
        let n = k.saturating_sub(g0).min(NR * L);
        out[i * k + g0..i * k + g0 + n].copy_from_slice(&lanes[..n]);
    }
}

/// `out (q x p) = D^T Z` for `D` (`b x q`) and `Z` (`b x p`): row `j` of `out` is
/// `sum_i d_ij z_i`. Returns `false` (and leaves `out` alone) when the CPU lacks AVX2/FMA.
pub fn dt_z(d: &[f32], q: usize, z: &[f32], b: usize, p: usize, out: &mut [f32]) -> bool {
    assert!(d.len() >= b * q && z.len() >= b * p && out.len() >= q * p);
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked by `available`).
        unsafe { dt_z_avx2(d, q, z, b, p, out) };
        return true;
    }
    false
}

/// Sum of squares of `z` (vectorised; `None` when the CPU lacks AVX2/FMA).
pub fn sum_sq(z: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked by `available`).
        return Some(unsafe { sum_sq_avx2(z) });
    }
    let _ = z;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_sq_avx2(z: &[f32]) -> f32 {
    let (chunks, tail) = z.as_chunks::<L>();
    let mut acc = [[0f32; L]; 4];
    let mut it = chunks.chunks_exact(4);
    for c4 in &mut it {
        for (a, c) in acc.iter_mut().zip(c4) {
            for k in 0..L {
                a[k] = c[k].mul_add(c[k], a[k]);
            }
        }
    }
    for c in it.remainder() {
        for k in 0..L {
            acc[0][k] = c[k].mul_add(c[k], acc[0][k]);
        }
    }
    let mut s: f32 = acc.iter().flatten().sum();
    for v in tail {
        s += v * v;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn z_w_avx2(z: &[f32], b: usize, p: usize, wt: &[f32], q: usize, out: &mut [f32]) {
    // blocks of 4 rows of Z x 2 columns of W: 8 accumulators, 6 loads per 8 FMAs; smaller
    // blocks at the edges
    const R: usize = 4;
    const C: usize = 2;
    let mut i = 0;
    while i < b {
        let rn = R.min(b - i);
        let mut j = 0;
        while j < q {
            let at = Block { z, p, wt, q, i, j };
            // SAFETY: AVX2/FMA are enabled here; rows i..i+rn of Z and j..j+cn of W^T exist
            // (the callers asserted the lengths), which is all the block reads.
            unsafe {
                match (rn, C.min(q - j)) {
                    (4, 2) => z_w_block::<4, 2>(&at, out),
                    (4, _) => z_w_block::<4, 1>(&at, out),
                    (3, 2) => z_w_block::<3, 2>(&at, out),
                    (3, _) => z_w_block::<3, 1>(&at, out),
                    (2, 2) => z_w_block::<2, 2>(&at, out),
                    (2, _) => z_w_block::<2, 1>(&at, out),
                    (_, 2) => z_w_block::<1, 2>(&at, out),
                    _ => z_w_block::<1, 1>(&at, out),
                }
            }
            j += C;
        }
        i += R;
    }
}

/// Where one block of [`z_w`] starts.
struct Block<'a> {
    z: &'a [f32],
    p: usize,
    wt: &'a [f32],
    q: usize,
    i: usize,
    j: usize,
}

/// `R x C` entries of `Z W` from `R` rows of `Z` and `C` rows of `W^T`, with AVX2 intrinsics
/// (fixed sizes: the accumulators live in registers).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and rows `i..i + R` of `z` and `j..j + C` of `wt` (each
/// `p` long) must exist.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn z_w_block<const R: usize, const C: usize>(at: &Block<'_>, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let p = at.p;
    let zr: [&[f32]; R] = std::array::from_fn(|r| &at.z[(at.i + r) * p..(at.i + r + 1) * p]);
    let wr: [&[f32]; C] = std::array::from_fn(|c| &at.wt[(at.j + c) * p..(at.j + c + 1) * p]);
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    let pv = p / L * L;
    let mut t = 0;
    while t < pv {
        // SAFETY: t + 8 <= p, within each row slice
        let zv: [__m256; R] =
            std::array::from_fn(|r| unsafe { _mm256_loadu_ps(zr[r].as_ptr().add(t)) });
        for c in 0..C {
            // SAFETY: as above
            let w = unsafe { _mm256_loadu_ps(wr[c].as_ptr().add(t)) };
            for r in 0..R {
                acc[r][c] = _mm256_fmadd_ps(zv[r], w, acc[r][c]);
            }
        }
        t += L;
    }
    for r in 0..R {
        for c in 0..C {
            let mut lanes = [0f32; L];
            // SAFETY: `lanes` holds 8 floats
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][c]) };
            let tail: f32 = zr[r][pv..]
                .iter()
                .zip(&wr[c][pv..])
                .map(|(a, b)| a * b)
                .sum();
            out[(at.i + r) * at.q + at.j + c] = lanes.iter().sum::<f32>() + tail;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dt_z_avx2(d: &[f32], q: usize, z: &[f32], b: usize, p: usize, out: &mut [f32]) {
    // 16 lanes of p (two registers) x 6 columns of D per block: 12 accumulators, 8 loads per
    // 12 FMAs; Z streams through once per group of columns (21 = 6 + 6 + 6 + 3).
    const G: usize = 6;
    let mut j = 0;
    while j < q {
        let args = (d, q, z, b, p, j);
        match G.min(q - j) {
            6 => dt_z_group::<6>(args, out),
            5 => dt_z_group::<5>(args, out),
            4 => dt_z_group::<4>(args, out),
            3 => dt_z_group::<3>(args, out),
            2 => dt_z_group::<2>(args, out),
            _ => dt_z_group::<1>(args, out),
        }
        j += G;
    }
}

/// Rows `j..j + G` of `D^T Z` (fixed `G`: the accumulators live in registers).
#[inline(always)]
fn dt_z_group<const G: usize>(
    (d, q, z, b, p, j): (&[f32], usize, &[f32], usize, usize, usize),
    out: &mut [f32],
) {
    const W: usize = 2 * L;
    let pw = p / W * W;
    let mut l0 = 0;
    while l0 < pw {
        let mut acc = [[0f32; W]; G];
        for i in 0..b {
            let zs = &z[i * p + l0..i * p + l0 + W];
            let zi: [f32; W] = std::array::from_fn(|k| zs[k]);
            let ds = &d[i * q + j..i * q + j + G];
            let di: [f32; G] = std::array::from_fn(|g| ds[g]);
            for g in 0..G {
                for k in 0..W {
                    acc[g][k] = di[g].mul_add(zi[k], acc[g][k]);
                }
            }
        }
        for (g, a) in acc.iter().enumerate() {
            out[(j + g) * p + l0..(j + g) * p + l0 + W].copy_from_slice(a);
        }
        l0 += W;
    }
    // the last p % 16 columns
    for g in 0..G {
        for l in pw..p {
            let mut s = 0f32;
            for i in 0..b {
                s = d[i * q + j + g].mul_add(z[i * p + l], s);
            }
            out[(j + g) * p + l] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut r = crate::util::rng(seed, 7);
        (0..n)
            .map(|_| crate::util::uniform(&mut r, -1.0, 1.0) as f32)
            .collect()
    }

    /// Both products against a plain f64 triple loop, on shapes with and without tails
    /// (rows not a multiple of 4, columns not a multiple of 2 or 6, p not a multiple of 8 or 16).
    #[test]
    fn products_match_a_reference() {
        if !available() {
            eprintln!("no AVX2/FMA: the kernels are not used on this CPU");
            return;
        }
        for &(b, p, q) in &[
            (111, 784, 21),
            (80, 16, 21),
            (7, 19, 5),
            (4, 8, 2),
            (1, 3, 1),
            (13, 35, 13),
        ] {
            let z = data(b * p, 1);
            let w = data(q * p, 2); // W^T, q x p
            let mut out = vec![f32::NAN; b * q];
            assert!(z_w(&z, b, p, &w, q, &mut out));
            for i in 0..b {
                for j in 0..q {
                    let e: f64 = (0..p)
                        .map(|l| z[i * p + l] as f64 * w[j * p + l] as f64)
                        .sum();
                    assert!(
                        (out[i * q + j] as f64 - e).abs() < 1e-4 * (1.0 + e.abs()),
                        "z_w {b}x{p}x{q} ({i},{j}): {} vs {e}",
                        out[i * q + j]
                    );
                }
            }
            let dm = data(b * q, 3);
            let mut back = vec![f32::NAN; q * p];
            assert!(dt_z(&dm, q, &z, b, p, &mut back));
            for j in 0..q {
                for l in 0..p {
                    let e: f64 = (0..b)
                        .map(|i| dm[i * q + j] as f64 * z[i * p + l] as f64)
                        .sum();
                    assert!(
                        (back[j * p + l] as f64 - e).abs() < 1e-4 * (1.0 + e.abs()),
                        "dt_z {b}x{p}x{q} ({j},{l}): {} vs {e}",
                        back[j * p + l]
                    );
                }
            }
            let s: f64 = z.iter().map(|v| (*v as f64).powi(2)).sum();
            let got = sum_sq(&z).unwrap() as f64;
            assert!((got - s).abs() < 1e-4 * s.max(1.0));
        }
    }
}
