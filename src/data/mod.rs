//! Data: loaders (CSV/TSV, NumPy `.npy`/`.npz` incl. scipy CSR, IDX, UCI comma files), seeded
//! generators (`builtin:NAME`) and preprocessing. Everything here is plain Rust data; no tensors.

mod generate;
mod idx;
mod npy;
mod preprocess;
mod text;

pub use generate::{GENERATORS, generate};
pub use idx::embedded_mnist10k;
pub use preprocess::{Preprocess, preprocess};

use crate::error::{AecmError, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A data set held in memory: `n` samples of `d` features, row-major.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// A short name (file stem, folder name or generator).
    pub name: String,
    /// Number of samples.
    pub n: usize,
    /// Number of features per sample.
    pub d: usize,
    /// Features, row-major `n x d`.
    pub x: Vec<f32>,
    /// Class index per sample (into `label_names`), when labels are known.
    pub labels: Option<Vec<u32>>,
    /// The original label values, in class-index order.
    pub label_names: Vec<String>,
    /// Image shape (height, width, channels) when the samples are images.
    pub image_shape: Option<[usize; 3]>,
}

impl Dataset {
    /// Builds a data set, checking that the sizes agree.
    pub fn new(name: impl Into<String>, n: usize, d: usize, x: Vec<f32>) -> Result<Self> {
        let name = name.into();
        if x.len() != n * d {
            return Err(AecmError::data(
                &name,
                format!("expected {n} x {d} = {} values, got {}", n * d, x.len()),
            ));
        }
        Ok(Self {
            name,
            n,
            d,
            x,
            labels: None,
            label_names: Vec::new(),
            image_shape: None,
        })
    }

    /// Attaches labels given as strings (mapped to class indices, numerically sorted when all
    /// labels are numbers, else lexicographically).
    pub fn with_string_labels(mut self, raw: &[String]) -> Self {
        let (idx, names) = encode_labels(raw);
        self.labels = Some(idx);
        self.label_names = names;
        self
    }

    /// Number of distinct label values (0 when unlabelled).
    pub fn n_classes(&self) -> usize {
        if self.labels.is_some() {
            self.label_names.len()
        } else {
            0
        }
    }

    /// Row `i` of the feature matrix.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.d..(i + 1) * self.d]
    }

    /// Keeps only the rows in `keep` (in that order).
    pub fn select_rows(&self, keep: &[usize]) -> Dataset {
        let mut x = Vec::with_capacity(keep.len() * self.d);
        for &i in keep {
            x.extend_from_slice(self.row(i));
        }
        Dataset {
            name: self.name.clone(),
            n: keep.len(),
            d: self.d,
            x,
            labels: self
                .labels
                .as_ref()
                .map(|l| keep.iter().map(|&i| l[i]).collect()),
            label_names: self.label_names.clone(),
            image_shape: self.image_shape,
        }
    }

    /// Appends the rows of `other` (same `d`), merging label vocabularies.
    pub fn concat(mut self, other: Dataset) -> Result<Dataset> {
        if self.d != other.d {
            return Err(AecmError::data(
                &other.name,
                format!(
                    "has {} features, expected {} like {}",
                    other.d, self.d, self.name
                ),
            ));
        }
        let labels = match (&self.labels, &other.labels) {
            (Some(_), Some(_)) => {
                let mut raw: Vec<String> = self.raw_labels().unwrap_or_default();
                raw.extend(other.raw_labels().unwrap_or_default());
                Some(raw)
            }
            _ => None,
        };
        self.x.extend_from_slice(&other.x);
        self.n += other.n;
        match labels {
            Some(raw) => Ok(self.with_string_labels(&raw)),
            None => {
                self.labels = None;
                self.label_names.clear();
                Ok(self)
            }
        }
    }

    /// The labels as their original strings.
    pub fn raw_labels(&self) -> Option<Vec<String>> {
        self.labels.as_ref().map(|l| {
            l.iter()
                .map(|&c| self.label_names[c as usize].clone())
                .collect()
        })
    }

    /// Removes every row holding a NaN or infinite value; returns how many were dropped.
    pub fn drop_nonfinite(&mut self) -> usize {
        let keep: Vec<usize> = (0..self.n)
            .filter(|&i| self.row(i).iter().all(|v| v.is_finite()))
            .collect();
        let dropped = self.n - keep.len();
        if dropped > 0 {
            *self = self.select_rows(&keep);
        }
        dropped
    }

    /// The first non-finite value as (row, column), if any.
    pub fn first_nonfinite(&self) -> Option<(usize, usize)> {
        self.x
            .iter()
            .position(|v| !v.is_finite())
            .map(|p| (p / self.d, p % self.d))
    }
}

/// Maps raw label strings to class indices; returns (indices, names).
pub fn encode_labels(raw: &[String]) -> (Vec<u32>, Vec<String>) {
    let mut uniq: Vec<&String> = raw.iter().collect();
    uniq.sort();
    uniq.dedup();
    let numeric: Option<Vec<f64>> = uniq.iter().map(|s| s.trim().parse::<f64>().ok()).collect();
    if let Some(vals) = numeric {
        let mut pairs: Vec<(f64, &String)> = vals.into_iter().zip(uniq).collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        uniq = pairs.into_iter().map(|p| p.1).collect();
    }
    let map: BTreeMap<&String, u32> = uniq
        .iter()
        .enumerate()
        .map(|(i, s)| (*s, i as u32))
        .collect();
    let idx = raw.iter().map(|s| map[s]).collect();
    (idx, uniq.into_iter().cloned().collect())
}

/// Where to find the label column of a delimited text file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LabelColumn {
    /// The last column if it looks like a label (text, or few distinct integers).
    #[default]
    Auto,
    /// The last column.
    Last,
    /// No labels.
    None,
    /// A 0-based column index.
    Index(usize),
    /// A header name.
    Name(String),
}

impl std::str::FromStr for LabelColumn {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "last" => Self::Last,
            "none" => Self::None,
            _ => match s.parse::<usize>() {
                Ok(i) => Self::Index(i),
                Err(_) if !s.is_empty() => Self::Name(s.to_string()),
                Err(_) => return Err("expected N, NAME, last, none or auto".into()),
            },
        })
    }
}

/// Header handling for delimited text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Header {
    /// Detect: a first row that is not numeric where the second is.
    #[default]
    Auto,
    /// The first row is a header.
    Yes,
    /// There is no header.
    No,
}

/// How to read a data source.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Label column of delimited text.
    pub label_column: LabelColumn,
    /// Header handling of delimited text.
    pub header: Header,
    /// Columns (0-based) to ignore in delimited text, e.g. an id column.
    pub skip_columns: Vec<usize>,
    /// A separate labels file (`.npy`, or text with one label per line).
    pub labels: Option<PathBuf>,
    /// Drop rows with NaN/Inf instead of failing.
    pub drop_nonfinite: bool,
    /// Seed for `builtin:` generators.
    pub seed: u64,
    /// Sample count for `builtin:` generators (None: the generator's default).
    pub n_samples: Option<usize>,
    /// Image shape override (height, width, channels).
    pub image_shape: Option<[usize; 3]>,
}

/// Loads a data set from `spec`: a file, a folder, or `builtin:NAME`.
pub fn load(spec: &str, opts: &LoadOptions) -> Result<Dataset> {
    let mut ds = if let Some(name) = spec.strip_prefix("builtin:") {
        generate(name, opts.n_samples, opts.seed)?
    } else {
        let path = Path::new(spec);
        if path.is_dir() {
            load_dir(path, opts)?
        } else if path.is_file() {
            load_file(path, opts)?
        } else {
            return Err(AecmError::data(
                path,
                "no such file or folder (expected a data file, a folder or builtin:NAME)",
            ));
        }
    };
    if let Some(lp) = &opts.labels {
        let raw = read_label_file(lp)?;
        if raw.len() != ds.n {
            return Err(AecmError::data(
                lp,
                format!("has {} labels but the data has {} samples", raw.len(), ds.n),
            ));
        }
        ds = ds.with_string_labels(&raw);
    }
    if let Some(shape) = opts.image_shape {
        if shape.iter().product::<usize>() != ds.d {
            return Err(AecmError::config(
                "image-shape",
                format!(
                    "{shape:?} has {} values per sample, the data has {}",
                    shape.iter().product::<usize>(),
                    ds.d
                ),
            ));
        }
        ds.image_shape = Some(shape);
    }
    if let Some((r, c)) = ds.first_nonfinite() {
        if opts.drop_nonfinite {
            let k = ds.drop_nonfinite();
            eprintln!("dropped {k} rows with NaN/Inf values");
        } else {
            return Err(AecmError::data(
                spec,
                format!(
                    "sample {} (0-based), feature {c}: value is NaN or infinite (use --drop-nonfinite to drop such rows)",
                    r
                ),
            ));
        }
    }
    if ds.n == 0 {
        return Err(AecmError::data(spec, "contains no samples"));
    }
    Ok(ds)
}

/// scikit-learn's copy of the UCI wine data (178 wines, 13 features, 3 cultivars; BSD-3-Clause,
/// `sample_data/wine`), compiled into the binary: the UCI table's wine column needs no data folder.
pub fn embedded_wine() -> Result<Dataset> {
    const WINE: &str = include_str!("../../sample_data/wine/wine_data.csv");
    let mut ds = text::parse_text(
        Path::new("embedded:wine_data.csv"),
        WINE,
        &LoadOptions::default(),
    )?;
    ds.name = "wine".into();
    Ok(ds)
}

fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    name.trim_end_matches(".gz")
        .split('.')
        .next()
        .unwrap_or("data")
        .to_string()
}

/// Loads one file, choosing the format from its name and first bytes.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let lower = path.to_string_lossy().to_lowercase();
    let base = lower.trim_end_matches(".gz");
    let mut ds = if base.ends_with(".npy") {
        npy::load_npy(path)?
    } else if base.ends_with(".npz") {
        npy::load_npz(path)?
    } else if base.contains("idx") || base.contains("ubyte") || idx::looks_like_idx(path)? {
        let mut ds = idx::load_idx_images(path)?;
        // a sibling labels file (…-images-idx3-ubyte[.gz] -> …-labels-idx1-ubyte[.gz])
        let fname = name_of(path);
        if opts.labels.is_none() && fname.contains("images") {
            let lname = fname
                .replace("images-idx3", "labels-idx1")
                .replace("images", "labels");
            if let Some(lp) = path
                .parent()
                .map(|p| p.join(&lname))
                .filter(|p| p.is_file())
            {
                let raw = idx::load_idx_labels(&lp)?;
                if raw.len() != ds.n {
                    return Err(AecmError::data(
                        &lp,
                        format!(
                            "has {} labels but {} has {} images",
                            raw.len(),
                            path.display(),
                            ds.n
                        ),
                    ));
                }
                ds = ds.with_string_labels(&raw);
            }
        }
        ds
    } else {
        text::load_text(path, opts)?
    };
    if ds.name.is_empty() {
        ds.name = file_stem(path);
    }
    Ok(ds)
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| AecmError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

/// Loads a folder: MNIST-style IDX pairs (train + test), UCI `.tra`/`.tes` pairs, `.npy` data +
/// labels, a `.npz` (+ labels `.npy`), or a single delimited text file.
pub fn load_dir(dir: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let files = list_dir(dir)?;
    let dir_name = dir
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "data".into());
    // IDX image/label pairs.
    let images: Vec<&PathBuf> = files
        .iter()
        .filter(|p| name_of(p).contains("images") && name_of(p).contains("idx3"))
        .collect();
    if !images.is_empty() {
        // train before t10k/test
        let mut images = images;
        images.sort_by_key(|p| {
            let n = name_of(p);
            (n.starts_with("t10k") || n.contains("test"), n)
        });
        let mut out: Option<Dataset> = None;
        for img in images {
            let lbl_name = name_of(img).replace("images-idx3", "labels-idx1");
            let lbl = files.iter().find(|p| name_of(p) == lbl_name);
            let mut ds = idx::load_idx_images(img)?;
            if let Some(lbl) = lbl {
                let raw = idx::load_idx_labels(lbl)?;
                if raw.len() != ds.n {
                    return Err(AecmError::data(
                        lbl,
                        format!(
                            "has {} labels but {} has {} images",
                            raw.len(),
                            img.display(),
                            ds.n
                        ),
                    ));
                }
                ds = ds.with_string_labels(&raw);
            }
            out = Some(match out {
                None => ds,
                Some(acc) => acc.concat(ds)?,
            });
        }
        let mut ds = out.ok_or_else(|| AecmError::data(dir, "no IDX image files"))?;
        ds.name = dir_name;
        return Ok(ds);
    }
    // UCI train/test pairs (.tra + .tes).
    let tra: Vec<&PathBuf> = files
        .iter()
        .filter(|p| {
            let n = name_of(p);
            n.ends_with(".tra") || n.ends_with(".tes")
        })
        .collect();
    if !tra.is_empty() {
        let mut tra = tra;
        tra.sort_by_key(|p| (name_of(p).ends_with(".tes"), name_of(p)));
        let mut o = opts.clone();
        if o.label_column == LabelColumn::Auto {
            o.label_column = LabelColumn::Last;
        }
        let mut out: Option<Dataset> = None;
        for f in tra {
            let ds = text::load_text(f, &o)?;
            out = Some(match out {
                None => ds,
                Some(acc) => acc.concat(ds)?,
            });
        }
        let mut ds = out.ok_or_else(|| AecmError::data(dir, "no .tra/.tes files"))?;
        ds.name = dir_name;
        return Ok(ds);
    }
    // NumPy files: a .npz or a 2-D+ .npy holds the data; a 1-D .npy of the same length the labels.
    let npz: Vec<&PathBuf> = files
        .iter()
        .filter(|p| name_of(p).ends_with(".npz"))
        .collect();
    let npys: Vec<&PathBuf> = files
        .iter()
        .filter(|p| name_of(p).ends_with(".npy"))
        .collect();
    if !npz.is_empty() || !npys.is_empty() {
        let mut data: Option<Dataset> = None;
        let mut label_files = Vec::new();
        if let Some(f) = npz.first() {
            data = Some(npy::load_npz(f)?);
        }
        for f in &npys {
            if npy::npy_ndim(f)? <= 1 {
                label_files.push(*f);
            } else if data.is_none() {
                data = Some(npy::load_npy(f)?);
            }
        }
        let mut ds = data.ok_or_else(|| {
            AecmError::data(dir, "found only 1-D .npy files; expected a 2-D data array")
        })?;
        if ds.labels.is_none()
            && opts.labels.is_none()
            && let Some(lf) = label_files.first()
        {
            let raw = npy::load_npy_labels(lf)?;
            if raw.len() != ds.n {
                return Err(AecmError::data(
                    *lf,
                    format!("has {} labels but the data has {} samples", raw.len(), ds.n),
                ));
            }
            ds = ds.with_string_labels(&raw);
        }
        ds.name = dir_name;
        return Ok(ds);
    }
    // A single delimited text file.
    let texts: Vec<&PathBuf> = files
        .iter()
        .filter(|p| {
            let n = name_of(p);
            [".csv", ".tsv", ".data", ".txt", ".dat"]
                .iter()
                .any(|e| n.ends_with(e))
                && !n.contains("names")
                && !n.contains("vocab")
                && !n.contains("target_names")
        })
        .collect();
    match texts.as_slice() {
        [one] => {
            let mut ds = text::load_text(one, opts)?;
            ds.name = dir_name;
            Ok(ds)
        }
        [] => Err(AecmError::data(
            dir,
            "no data file found (expected IDX pairs, .tra/.tes, .npy/.npz or one CSV/TSV file)",
        )),
        many => Err(AecmError::data(
            dir,
            format!(
                "several candidate data files ({}); pass one file with --data",
                many.iter()
                    .map(|p| name_of(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Reads a labels file: `.npy` (1-D) or text with one label per line.
pub fn read_label_file(path: &Path) -> Result<Vec<String>> {
    if name_of(path).ends_with(".npy") {
        return npy::load_npy_labels(path);
    }
    let text = std::fs::read_to_string(path).map_err(|e| AecmError::io(path, e))?;
    Ok(text
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Opens a file, transparently decompressing gzip (detected by its magic bytes).
pub(crate) fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let raw = std::fs::read(path).map_err(|e| AecmError::io(path, e))?;
    if raw.len() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| AecmError::data(path, format!("corrupt or truncated gzip data: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// A square image shape for `d` features when `d` is a perfect square of at least 8x8.
pub(crate) fn guess_square_image(d: usize) -> Option<[usize; 3]> {
    let s = (d as f64).sqrt().round() as usize;
    (s >= 8 && s * s == d).then_some([s, s, 1])
}
