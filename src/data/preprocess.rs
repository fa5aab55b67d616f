//! Preprocessing: none, /255, /max, per-feature z-score, per-feature [0, 1].

use super::Dataset;

/// A preprocessing step, as `--preprocess` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preprocess {
    /// Leave values as they are.
    #[default]
    None,
    /// Divide by 255 (8-bit images).
    Scale255,
    /// Divide by the largest absolute value of the whole data set.
    Max,
    /// Per feature: subtract the mean, divide by the standard deviation (population, as
    /// scikit-learn's StandardScaler; constant features become 0).
    Standardize,
    /// Per feature: map [min, max] to [0, 1] (constant features become 0).
    Minmax,
}

impl std::str::FromStr for Preprocess {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "none" => Self::None,
            "scale255" => Self::Scale255,
            "max" => Self::Max,
            "standardize" | "standardise" | "zscore" => Self::Standardize,
            "minmax" => Self::Minmax,
            _ => {
                return Err(format!(
                    "'{s}': expected none, scale255, max, standardize or minmax"
                ));
            }
        })
    }
}

impl std::fmt::Display for Preprocess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Scale255 => "scale255",
            Self::Max => "max",
            Self::Standardize => "standardize",
            Self::Minmax => "minmax",
        })
    }
}

/// Applies `p` to the data set in place.
pub fn preprocess(ds: &mut Dataset, p: Preprocess) {
    let (n, d) = (ds.n, ds.d);
    match p {
        Preprocess::None => {}
        Preprocess::Scale255 => ds.x.iter_mut().for_each(|v| *v /= 255.0),
        Preprocess::Max => {
            let m = ds.x.iter().fold(0f32, |m, v| m.max(v.abs()));
            if m > 0.0 {
                ds.x.iter_mut().for_each(|v| *v /= m);
            }
        }
        Preprocess::Standardize => standardize(&mut ds.x, n, d),
        Preprocess::Minmax => {
            for j in 0..d {
                let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
                for i in 0..n {
                    lo = lo.min(ds.x[i * d + j]);
                    hi = hi.max(ds.x[i * d + j]);
                }
                let span = hi - lo;
                for i in 0..n {
                    let v = &mut ds.x[i * d + j];
                    *v = if span > 0.0 { (*v - lo) / span } else { 0.0 };
                }
            }
        }
    }
}

/// Per-feature z-score of a row-major `n x d` matrix (population standard deviation).
pub fn standardize(x: &mut [f32], n: usize, d: usize) {
    for j in 0..d {
        let mean = (0..n).map(|i| f64::from(x[i * d + j])).sum::<f64>() / n as f64;
        let var = (0..n)
            .map(|i| (f64::from(x[i * d + j]) - mean).powi(2))
            .sum::<f64>()
            / n as f64;
        let sd = if var > 0.0 { var.sqrt() } else { 1.0 };
        for i in 0..n {
            x[i * d + j] = ((f64::from(x[i * d + j]) - mean) / sd) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardize_gives_zero_mean_unit_variance() {
        let mut x = vec![1.0, 10.0, 2.0, 10.0, 3.0, 10.0];
        standardize(&mut x, 3, 2);
        let col0: Vec<f32> = (0..3).map(|i| x[i * 2]).collect();
        assert!((col0.iter().sum::<f32>()).abs() < 1e-6);
        let var = col0.iter().map(|v| v * v).sum::<f32>() / 3.0;
        assert!((var - 1.0).abs() < 1e-5);
        // constant column becomes 0
        assert!((0..3).all(|i| x[i * 2 + 1] == 0.0));
    }

    #[test]
    fn minmax_maps_to_unit_interval() {
        let mut ds = Dataset::new("t", 3, 1, vec![2.0, 4.0, 6.0]).unwrap();
        preprocess(&mut ds, Preprocess::Minmax);
        assert_eq!(ds.x, vec![0.0, 0.5, 1.0]);
    }
}
