//! NumPy `.npy` and `.npz` files: dense arrays of f32/f64/u8/i64 (and the other integer widths),
//! and scipy sparse matrices saved by `scipy.sparse.save_npz` (CSR, CSC, COO), densified.

use super::{Dataset, guess_square_image};
use crate::error::{AecmError, Result};
use npyz::{DType, NpyFile, TypeChar};
use std::io::Read;
use std::path::Path;

fn type_of<R: Read>(path: &Path, f: &NpyFile<R>) -> Result<(TypeChar, u64)> {
    match f.dtype() {
        DType::Plain(ts) => Ok((ts.type_char(), ts.size_field())),
        other => Err(AecmError::data(
            path,
            format!("unsupported dtype {other:?} (expected a plain numeric array)"),
        )),
    }
}

/// Reads any plain numeric array as f32 values.
fn read_f32<R: Read>(path: &Path, f: NpyFile<R>) -> Result<Vec<f32>> {
    let (tc, size) = type_of(path, &f)?;
    let err = |e: std::io::Error| AecmError::data(path, format!("reading array data: {e}"));
    Ok(match (tc, size) {
        (TypeChar::Float, 4) => f.into_vec::<f32>().map_err(err)?,
        (TypeChar::Float, 8) => f
            .into_vec::<f64>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        (TypeChar::Uint, 1) => f
            .into_vec::<u8>()
            .map_err(err)?
            .into_iter()
            .map(f32::from)
            .collect(),
        (TypeChar::Uint, 2) => f
            .into_vec::<u16>()
            .map_err(err)?
            .into_iter()
            .map(f32::from)
            .collect(),
        (TypeChar::Uint, 4) => f
            .into_vec::<u32>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        (TypeChar::Uint, 8) => f
            .into_vec::<u64>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        (TypeChar::Int, 1) => f
            .into_vec::<i8>()
            .map_err(err)?
            .into_iter()
            .map(f32::from)
            .collect(),
        (TypeChar::Int, 2) => f
            .into_vec::<i16>()
            .map_err(err)?
            .into_iter()
            .map(f32::from)
            .collect(),
        (TypeChar::Int, 4) => f
            .into_vec::<i32>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        (TypeChar::Int, 8) => f
            .into_vec::<i64>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f32)
            .collect(),
        (TypeChar::Bool, 1) => f
            .into_vec::<bool>()
            .map_err(err)?
            .into_iter()
            .map(|v| if v { 1.0 } else { 0.0 })
            .collect(),
        (tc, size) => {
            return Err(AecmError::data(
                path,
                format!(
                    "unsupported dtype {tc:?}{size} (expected f32, f64, u8 or an integer type)"
                ),
            ));
        }
    })
}

fn open(path: &Path) -> Result<NpyFile<std::io::BufReader<std::fs::File>>> {
    let file = std::fs::File::open(path).map_err(|e| AecmError::io(path, e))?;
    NpyFile::new(std::io::BufReader::new(file))
        .map_err(|e| AecmError::data(path, format!("not a valid .npy file: {e}")))
}

/// Number of dimensions of a `.npy` array.
pub fn npy_ndim(path: &Path) -> Result<usize> {
    Ok(open(path)?.shape().len())
}

fn dataset_from(path: &Path, shape: &[u64], x: Vec<f32>) -> Result<Dataset> {
    if shape.is_empty() {
        return Err(AecmError::data(path, "array is a scalar; expected N x d"));
    }
    let n = shape[0] as usize;
    let d: usize = shape[1..]
        .iter()
        .map(|&s| s as usize)
        .product::<usize>()
        .max(1);
    let mut ds = Dataset::new(String::new(), n, d, x)?;
    ds.image_shape = match shape.len() {
        3 => Some([shape[1] as usize, shape[2] as usize, 1]),
        4 => Some([shape[1] as usize, shape[2] as usize, shape[3] as usize]),
        _ => guess_square_image(d),
    };
    Ok(ds)
}

fn check_order<R: Read>(path: &Path, f: &NpyFile<R>) -> Result<()> {
    if f.order() == npyz::Order::Fortran && f.shape().len() > 1 {
        return Err(AecmError::data(
            path,
            "array is in Fortran order; save it C-contiguous (np.ascontiguousarray)",
        ));
    }
    Ok(())
}

/// Loads a dense `.npy` array (N x ...) as a data set.
pub fn load_npy(path: &Path) -> Result<Dataset> {
    let f = open(path)?;
    check_order(path, &f)?;
    let shape = f.shape().to_vec();
    let x = read_f32(path, f)?;
    dataset_from(path, &shape, x)
}

/// Loads a 1-D `.npy` array of labels as strings.
pub fn load_npy_labels(path: &Path) -> Result<Vec<String>> {
    let f = open(path)?;
    if f.shape().len() > 1 && f.shape()[1..].iter().any(|&s| s != 1) {
        return Err(AecmError::data(
            path,
            format!("labels must be 1-D, got shape {:?}", f.shape()),
        ));
    }
    let (tc, _) = type_of(path, &f)?;
    let vals = read_f32(path, f)?;
    Ok(vals
        .into_iter()
        .map(|v| match tc {
            TypeChar::Float if v.fract() != 0.0 => v.to_string(),
            _ => (v as i64).to_string(),
        })
        .collect())
}

fn npz_err(path: &Path, e: std::io::Error) -> AecmError {
    AecmError::data(path, format!("reading .npz: {e}"))
}

/// Loads a `.npz`: a scipy sparse matrix (densified), or a dense data array (`x`, `X`, `data`,
/// `arr_0`, or the first array of rank >= 2) with optional labels (`y`, `labels`, `target`).
pub fn load_npz(path: &Path) -> Result<Dataset> {
    let mut npz = npyz::npz::NpzArchive::open(path).map_err(|e| npz_err(path, e))?;
    let names: Vec<String> = npz.array_names().map(str::to_string).collect();
    let has = |k: &str| names.iter().any(|n| n == k);
    if has("format") && has("shape") {
        let sparse = match npyz::sparse::Sparse::<f32>::from_npz(&mut npz) {
            Ok(s) => s,
            Err(_) => {
                let s64 = npyz::sparse::Sparse::<f64>::from_npz(&mut npz)
                    .map_err(|e| npz_err(path, e))?;
                sparse_to_f32(s64).ok_or_else(|| {
                    AecmError::data(
                        path,
                        "sparse matrix: only CSR, CSC and COO formats are supported",
                    )
                })?
            }
        };
        return densify(path, sparse);
    }
    let data_key = ["x", "X", "data", "arr_0"]
        .into_iter()
        .find(|k| has(k))
        .map(str::to_string)
        .or_else(|| names.first().cloned())
        .ok_or_else(|| AecmError::data(path, "archive holds no arrays"))?;
    let f = npz
        .by_name(&data_key)
        .map_err(|e| npz_err(path, e))?
        .ok_or_else(|| AecmError::data(path, format!("array '{data_key}' missing")))?;
    check_order(path, &f)?;
    let shape = f.shape().to_vec();
    let x = read_f32(path, f)?;
    let mut ds = dataset_from(path, &shape, x)?;
    if let Some(lk) = ["y", "labels", "target", "arr_1"]
        .into_iter()
        .find(|k| has(k))
    {
        let f = npz
            .by_name(lk)
            .map_err(|e| npz_err(path, e))?
            .ok_or_else(|| AecmError::data(path, format!("array '{lk}' missing")))?;
        let vals = read_f32(path, f)?;
        if vals.len() != ds.n {
            return Err(AecmError::data(
                path,
                format!(
                    "array '{lk}' has {} labels but '{data_key}' has {} samples",
                    vals.len(),
                    ds.n
                ),
            ));
        }
        let raw: Vec<String> = vals.iter().map(|v| (*v as i64).to_string()).collect();
        ds = ds.with_string_labels(&raw);
    }
    Ok(ds)
}

fn sparse_to_f32(s: npyz::sparse::Sparse<f64>) -> Option<npyz::sparse::Sparse<f32>> {
    use npyz::sparse::{Coo, Csc, Csr, Sparse};
    let cast = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect::<Vec<f32>>();
    Some(match s {
        Sparse::Csr(m) => Sparse::Csr(Csr {
            shape: m.shape,
            data: cast(m.data),
            indices: m.indices,
            indptr: m.indptr,
        }),
        Sparse::Csc(m) => Sparse::Csc(Csc {
            shape: m.shape,
            data: cast(m.data),
            indices: m.indices,
            indptr: m.indptr,
        }),
        Sparse::Coo(m) => Sparse::Coo(Coo {
            shape: m.shape,
            data: cast(m.data),
            row: m.row,
            col: m.col,
        }),
        _ => return None,
    })
}

fn densify(path: &Path, m: npyz::sparse::Sparse<f32>) -> Result<Dataset> {
    use npyz::sparse::Sparse;
    let bad = |what: &str| AecmError::data(path, format!("sparse matrix: {what}"));
    let (n, d, x) = match m {
        Sparse::Csr(m) => {
            let (n, d) = (m.shape[0] as usize, m.shape[1] as usize);
            if m.indptr.len() != n + 1 {
                return Err(bad("indptr length differs from rows + 1"));
            }
            let mut x = vec![0f32; n * d];
            for r in 0..n {
                let (a, b) = (m.indptr[r], m.indptr[r + 1]);
                if a > b || b > m.data.len() || b > m.indices.len() {
                    return Err(bad(&format!("row {r}: indptr out of range")));
                }
                for j in a..b {
                    let c = m.indices[j] as usize;
                    if c >= d {
                        return Err(bad(&format!("row {r}: column {c} >= {d}")));
                    }
                    x[r * d + c] += m.data[j];
                }
            }
            (n, d, x)
        }
        Sparse::Csc(m) => {
            let (n, d) = (m.shape[0] as usize, m.shape[1] as usize);
            if m.indptr.len() != d + 1 {
                return Err(bad("indptr length differs from columns + 1"));
            }
            let mut x = vec![0f32; n * d];
            for c in 0..d {
                let (a, b) = (m.indptr[c], m.indptr[c + 1]);
                if a > b || b > m.data.len() || b > m.indices.len() {
                    return Err(bad(&format!("column {c}: indptr out of range")));
                }
                for j in a..b {
                    let r = m.indices[j] as usize;
                    if r >= n {
                        return Err(bad(&format!("column {c}: row {r} >= {n}")));
                    }
                    x[r * d + c] += m.data[j];
                }
            }
            (n, d, x)
        }
        Sparse::Coo(m) => {
            let (n, d) = (m.shape[0] as usize, m.shape[1] as usize);
            let mut x = vec![0f32; n * d];
            for ((&r, &c), &v) in m.row.iter().zip(&m.col).zip(&m.data) {
                let (r, c) = (r as usize, c as usize);
                if r >= n || c >= d {
                    return Err(bad(&format!("entry ({r}, {c}) outside {n} x {d}")));
                }
                x[r * d + c] += v;
            }
            (n, d, x)
        }
        _ => return Err(bad("only CSR, CSC and COO formats are supported")),
    };
    if n == 0 {
        return Err(bad("unsupported format or empty matrix"));
    }
    Dataset::new(String::new(), n, d, x)
}
