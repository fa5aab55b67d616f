//! Small dense linear algebra in f64 on the host: Cholesky, triangular inverse, symmetric
//! eigen-decomposition (cyclic Jacobi) and the Moore-Penrose pseudo-inverse. Matrices are
//! row-major slices. Used for K x K and d x d problems only; large products go through burn.

/// Cholesky factor L (lower triangular, row-major) of a symmetric positive-definite `n x n`
/// matrix; `None` when the matrix is not positive definite.
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Inverse of a lower-triangular `n x n` matrix (row-major).
pub fn lower_inverse(l: &[f64], n: usize) -> Vec<f64> {
    let mut inv = vec![0.0; n * n];
    for j in 0..n {
        inv[j * n + j] = 1.0 / l[j * n + j];
        for i in j + 1..n {
            let mut s = 0.0;
            for k in j..i {
                s -= l[i * n + k] * inv[k * n + j];
            }
            inv[i * n + j] = s / l[i * n + i];
        }
    }
    inv
}

/// Eigen-decomposition of a symmetric `n x n` matrix by cyclic Jacobi rotations:
/// returns (eigenvalues, eigenvectors as columns of a row-major `n x n` matrix).
pub fn sym_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut m = a.to_vec();
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| m[i * n + j] * m[i * n + j])
            .sum();
        let scale: f64 = m.iter().map(|x| x * x).sum::<f64>().max(f64::MIN_POSITIVE);
        if off <= 1e-24 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = m[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (m[q * n + q] - m[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let mkp = m[k * n + p];
                    let mkq = m[k * n + q];
                    m[k * n + p] = c * mkp - s * mkq;
                    m[k * n + q] = s * mkp + c * mkq;
                }
                for k in 0..n {
                    let mpk = m[p * n + k];
                    let mqk = m[q * n + k];
                    m[p * n + k] = c * mpk - s * mqk;
                    m[q * n + k] = s * mpk + c * mqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| m[i * n + i]).collect(), v)
}

/// Moore-Penrose pseudo-inverse of a `rows x cols` matrix (row-major, f32), returned as
/// `cols x rows`. Computed as `A^T V diag(1/lambda) V^T` from the eigen-decomposition of
/// `A A^T` (small when rows = K); singular values under `1e-6 * s_max` count as zero.
pub fn pinv(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let a64: Vec<f64> = a.iter().map(|&x| f64::from(x)).collect();
    // G = A A^T (rows x rows)
    let mut g = vec![0.0; rows * rows];
    for i in 0..rows {
        for j in 0..rows {
            g[i * rows + j] = (0..cols)
                .map(|k| a64[i * cols + k] * a64[j * cols + k])
                .sum();
        }
    }
    let (lam, v) = sym_eigen(&g, rows);
    // Eigenvalues of the Gram matrix carry an absolute error of about eps * lambda_max, so the
    // cut-off is relative to lambda_max: singular values below 1e-6 * s_max count as zero.
    let lmax = lam.iter().fold(0.0f64, |m, &l| m.max(l));
    let cut = 1e-12 * lmax;
    // M = V diag(1/lambda) V^T for lambda > cut
    let mut minv = vec![0.0; rows * rows];
    for (e, &l) in lam.iter().enumerate() {
        if l > cut {
            for i in 0..rows {
                for j in 0..rows {
                    minv[i * rows + j] += v[i * rows + e] * v[j * rows + e] / l;
                }
            }
        }
    }
    // pinv = A^T M  (cols x rows)
    let mut out = vec![0f32; cols * rows];
    for c in 0..cols {
        for r in 0..rows {
            let s: f64 = (0..rows)
                .map(|k| a64[k * cols + c] * minv[k * rows + r])
                .sum();
            out[c * rows + r] = s as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinv_of_full_row_rank_matrix_is_right_inverse() {
        // A: 2 x 3
        let a = [1.0f32, 2.0, 3.0, 0.0, 1.0, 4.0];
        let p = pinv(&a, 2, 3); // 3 x 2
        for i in 0..2 {
            for j in 0..2 {
                let s: f32 = (0..3).map(|k| a[i * 3 + k] * p[k * 2 + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((s - want).abs() < 1e-4, "({i},{j}) = {s}");
            }
        }
    }

    #[test]
    fn pinv_of_rank_deficient_matrix_satisfies_penrose() {
        // A: 3 x 2 with K > d (rank 2): A pinv(A) A = A
        let a = [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0];
        let p = pinv(&a, 3, 2); // 2 x 3
        let mut ap = [0f32; 9];
        for i in 0..3 {
            for j in 0..3 {
                ap[i * 3 + j] = (0..2).map(|k| a[i * 2 + k] * p[k * 3 + j]).sum();
            }
        }
        for i in 0..3 {
            for j in 0..2 {
                let s: f32 = (0..3).map(|k| ap[i * 3 + k] * a[k * 2 + j]).sum();
                assert!((s - a[i * 2 + j]).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn cholesky_and_inverse_roundtrip() {
        let a = [4.0, 2.0, 2.0, 3.0];
        let l = cholesky(&a, 2).unwrap();
        let li = lower_inverse(&l, 2);
        // L * Linv = I
        for i in 0..2 {
            for j in 0..2 {
                let s: f64 = (0..2).map(|k| l[i * 2 + k] * li[k * 2 + j]).sum();
                assert!((s - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
    }
}
