//! External clustering metrics, as scikit-learn defines them: adjusted Rand index, normalised
//! mutual information (arithmetic mean normalisation), clustering accuracy (best one-to-one
//! matching, Hungarian algorithm via `pathfinding`), homogeneity; plus the confusion matrix after
//! matching.

use serde::{Deserialize, Serialize};

/// ARI, NMI, ACC and homogeneity as fractions in [0, 1] (ARI can be negative).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Scores {
    /// Adjusted Rand index.
    pub ari: f64,
    /// Normalised mutual information (arithmetic).
    pub nmi: f64,
    /// Accuracy under the best one-to-one cluster-to-label matching.
    pub acc: f64,
    /// Homogeneity (each cluster holds members of a single class). NaN where it was not
    /// measured: a reproduction record rebuilt from a table that did not show it.
    #[serde(default = "not_measured")]
    pub homogeneity: f64,
}

/// The value of a score a stored record lacks.
fn not_measured() -> f64 {
    f64::NAN
}

/// A contingency table: rows = predicted clusters, columns = true classes (compacted indices).
struct Contingency {
    table: Vec<Vec<u64>>,
    n: u64,
}

fn compact(v: &[u32]) -> (Vec<usize>, usize) {
    let mut uniq: Vec<u32> = v.to_vec();
    uniq.sort_unstable();
    uniq.dedup();
    let idx = v
        .iter()
        .map(|x| uniq.binary_search(x).unwrap_or(0))
        .collect();
    (idx, uniq.len())
}

fn contingency(pred: &[u32], truth: &[u32]) -> Contingency {
    assert_eq!(pred.len(), truth.len(), "label vectors differ in length");
    let (p, kp) = compact(pred);
    let (t, kt) = compact(truth);
    let mut table = vec![vec![0u64; kt]; kp];
    for (a, b) in p.iter().zip(&t) {
        table[*a][*b] += 1;
    }
    Contingency {
        table,
        n: pred.len() as u64,
    }
}

fn comb2(x: u64) -> f64 {
    let x = x as f64;
    x * (x - 1.0) / 2.0
}

fn entropy(counts: &[u64], n: u64) -> f64 {
    let n = n as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.ln()
        })
        .sum()
}

impl Contingency {
    fn row_sums(&self) -> Vec<u64> {
        self.table.iter().map(|r| r.iter().sum()).collect()
    }
    fn col_sums(&self) -> Vec<u64> {
        let k = self.table.first().map_or(0, Vec::len);
        (0..k)
            .map(|j| self.table.iter().map(|r| r[j]).sum())
            .collect()
    }
    fn mutual_info(&self) -> f64 {
        let n = self.n as f64;
        let (a, b) = (self.row_sums(), self.col_sums());
        let mut mi = 0.0;
        for (i, row) in self.table.iter().enumerate() {
            for (j, &c) in row.iter().enumerate() {
                if c > 0 {
                    let c = c as f64;
                    mi += c / n * (c * n / (a[i] as f64 * b[j] as f64)).ln();
                }
            }
        }
        mi.max(0.0)
    }
}

/// Adjusted Rand index (scikit-learn's `adjusted_rand_score`).
pub fn ari(pred: &[u32], truth: &[u32]) -> f64 {
    let c = contingency(pred, truth);
    let n = c.n;
    let (kp, kt) = (c.table.len(), c.table.first().map_or(0, Vec::len));
    if n == 0 || (kp == kt && (kp <= 1 || kp as u64 == n)) {
        return 1.0;
    }
    let sum_ij: f64 = c.table.iter().flatten().map(|&x| comb2(x)).sum();
    let sum_a: f64 = c.row_sums().into_iter().map(comb2).sum();
    let sum_b: f64 = c.col_sums().into_iter().map(comb2).sum();
    let expected = sum_a * sum_b / comb2(n);
    let max = 0.5 * (sum_a + sum_b);
    if (max - expected).abs() < f64::EPSILON {
        return 1.0;
    }
    (sum_ij - expected) / (max - expected)
}

/// Normalised mutual information with arithmetic-mean normalisation (scikit-learn's default).
pub fn nmi(pred: &[u32], truth: &[u32]) -> f64 {
    let c = contingency(pred, truth);
    let (kp, kt) = (c.table.len(), c.table.first().map_or(0, Vec::len));
    if (kp == 1 && kt == 1) || c.n == 0 {
        return 1.0;
    }
    let mi = c.mutual_info();
    let h_pred = entropy(&c.row_sums(), c.n);
    let h_true = entropy(&c.col_sums(), c.n);
    let norm = 0.5 * (h_pred + h_true);
    mi / norm.max(f64::EPSILON)
}

/// Homogeneity (scikit-learn's `homogeneity_score`).
pub fn homogeneity(pred: &[u32], truth: &[u32]) -> f64 {
    let c = contingency(pred, truth);
    let h_true = entropy(&c.col_sums(), c.n);
    if h_true == 0.0 {
        return 1.0;
    }
    // H(C|K) = H(C) - I(C;K)
    let h_cond = h_true - c.mutual_info();
    1.0 - h_cond / h_true
}

/// The best one-to-one matching of predicted clusters to classes: `map[cluster] = class`
/// (`None` for a cluster left unmatched), computed with the Hungarian algorithm.
pub fn hungarian_map(
    pred: &[u32],
    truth: &[u32],
    k_pred: usize,
    k_true: usize,
) -> Vec<Option<usize>> {
    match_clusters(&cluster_class_counts(pred, truth, k_pred, k_true))
}

/// [`hungarian_map`] from the clusters x classes counts ([`cluster_class_counts`]).
pub fn match_clusters(counts: &[Vec<u64>]) -> Vec<Option<usize>> {
    let k_pred = counts.len();
    let k_true = counts.first().map_or(0, Vec::len);
    let m = k_pred.max(k_true).max(1);
    let mut w = vec![0i64; m * m];
    for (k, row) in counts.iter().enumerate() {
        for (c, &n) in row.iter().enumerate() {
            w[k * m + c] = i64::try_from(n).unwrap_or(i64::MAX);
        }
    }
    let Ok(weights) = pathfinding::matrix::Matrix::from_vec(m, m, w) else {
        return vec![None; k_pred];
    };
    let (_, assign) = pathfinding::kuhn_munkres::kuhn_munkres(&weights);
    (0..k_pred)
        .map(|k| assign.get(k).copied().filter(|&c| c < k_true))
        .collect()
}

/// Clustering accuracy: the fraction of samples whose cluster is matched to their class under the
/// best one-to-one matching.
pub fn acc(pred: &[u32], truth: &[u32]) -> f64 {
    if pred.is_empty() {
        return 1.0;
    }
    let kp = pred.iter().max().map_or(0, |&m| m as usize + 1);
    let kt = truth.iter().max().map_or(0, |&m| m as usize + 1);
    let map = hungarian_map(pred, truth, kp, kt);
    let hit = pred
        .iter()
        .zip(truth)
        .filter(|&(&p, &t)| map[p as usize] == Some(t as usize))
        .count();
    hit as f64 / pred.len() as f64
}

/// Samples per (cluster, class): `counts[k][c]` for clusters `0..k_pred` and classes `0..k_true`
/// (a cluster or class index outside those is not counted). Rows are the confusion matrix's.
pub fn cluster_class_counts(
    pred: &[u32],
    truth: &[u32],
    k_pred: usize,
    k_true: usize,
) -> Vec<Vec<u64>> {
    let mut m = vec![vec![0u64; k_true]; k_pred];
    for (&p, &t) in pred.iter().zip(truth) {
        if let Some(c) = m
            .get_mut(p as usize)
            .and_then(|row| row.get_mut(t as usize))
        {
            *c += 1;
        }
    }
    m
}

/// What a clustering did to the classes, read from [`cluster_class_counts`]: "merged:" the classes
/// that are the majority of no cluster (with the share of them in the cluster holding most of
/// them, and that cluster's majority class), "split:" the classes that are the majority of several
/// clusters, "mixed:" the clusters whose second class holds a quarter of them or more (with their
/// two largest classes' shares), "empty:" the empty clusters. `names[c]` names class `c` (its index where missing).
/// "one cluster per class" when every class is the majority of exactly one cluster.
pub fn majority_summary(counts: &[Vec<u64>], names: &[String]) -> String {
    let k_true = counts.first().map_or(0, Vec::len);
    let name = |c: usize| names.get(c).cloned().unwrap_or_else(|| c.to_string());
    // the majority class of each non-empty cluster (the lowest index on a tie)
    let majority: Vec<Option<usize>> = counts
        .iter()
        .map(|row| {
            let (best, &n) = row.iter().enumerate().rev().max_by_key(|&(_, n)| n)?;
            (n > 0).then_some(best)
        })
        .collect();
    let mut parts = Vec::new();
    let mut merged = Vec::new();
    let mut split = Vec::new();
    for c in 0..k_true {
        let own: Vec<usize> = (0..counts.len())
            .filter(|&k| majority[k] == Some(c))
            .collect();
        let total: u64 = counts.iter().map(|row| row[c]).sum();
        if own.is_empty() && total > 0 {
            let (k, n) = counts
                .iter()
                .map(|row| row[c])
                .enumerate()
                .rev()
                .max_by_key(|&(_, n)| n)
                .unwrap_or((0, 0));
            let host = majority[k].map_or_else(|| "?".to_string(), name);
            merged.push(format!(
                "class {} ({:.0}% in cluster {k} of class {host})",
                name(c),
                100.0 * n as f64 / total as f64
            ));
        } else if own.len() > 1 {
            split.push(format!("class {} (clusters {})", name(c), and_list(&own)));
        }
    }
    if !merged.is_empty() {
        parts.push(format!("merged: {}", merged.join(", ")));
    }
    if !split.is_empty() {
        parts.push(format!("split: {}", split.join(", ")));
    }
    // clusters whose second class holds at least a quarter of them
    let mixed: Vec<String> = counts
        .iter()
        .enumerate()
        .filter_map(|(k, row)| {
            let size: u64 = row.iter().sum();
            let mut by_size: Vec<(usize, u64)> = row.iter().copied().enumerate().collect();
            by_size.sort_by_key(|&(c, n)| (std::cmp::Reverse(n), c));
            let (&(c1, n1), &(c2, n2)) = (by_size.first()?, by_size.get(1)?);
            let pct = |n: u64| 100.0 * n as f64 / size as f64;
            (size > 0 && 4 * n2 >= size).then(|| {
                format!(
                    "cluster {k} ({} {:.0}%, {} {:.0}%)",
                    name(c1),
                    pct(n1),
                    name(c2),
                    pct(n2)
                )
            })
        })
        .collect();
    if !mixed.is_empty() {
        parts.push(format!("mixed: {}", mixed.join(", ")));
    }
    let empty: Vec<usize> = (0..counts.len())
        .filter(|&k| majority[k].is_none())
        .collect();
    if !empty.is_empty() {
        let s = if empty.len() > 1 { "s" } else { "" };
        parts.push(format!("empty: cluster{s} {}", and_list(&empty)));
    }
    if parts.is_empty() {
        "one cluster per class".into()
    } else {
        parts.join("; ")
    }
}

/// "3", "3 and 5", "3, 5 and 8".
fn and_list(v: &[usize]) -> String {
    match v {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
    }
}

/// All four scores.
pub fn scores(pred: &[u32], truth: &[u32]) -> Scores {
    Scores {
        ari: ari(pred, truth),
        nmi: nmi(pred, truth),
        acc: acc(pred, truth),
        homogeneity: homogeneity(pred, truth),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values computed with scikit-learn 1.5.2 (Python 3.11):
    //   from sklearn.metrics import adjusted_rand_score as ari, normalized_mutual_info_score as nmi,
    //       homogeneity_score as hom
    //   ACC: scipy.optimize.linear_sum_assignment on -contingency_matrix(truth, pred)
    // See the vectors below; the printed values are recorded next to each assertion.
    const TRUTH: [u32; 20] = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2];
    const PRED: [u32; 20] = [1, 1, 1, 1, 1, 0, 2, 0, 0, 0, 0, 2, 1, 2, 2, 2, 2, 2, 0, 3];

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }

    #[test]
    fn metrics_match_scikit_learn() {
        close(ari(&PRED, &TRUTH), SK_ARI);
        close(nmi(&PRED, &TRUTH), SK_NMI);
        close(homogeneity(&PRED, &TRUTH), SK_HOM);
        close(acc(&PRED, &TRUTH), SK_ACC);
    }

    #[test]
    fn perfect_and_permuted_clusterings_score_one() {
        let t = [0, 0, 1, 1, 2, 2];
        let p = [2, 2, 0, 0, 1, 1];
        close(ari(&p, &t), 1.0);
        close(nmi(&p, &t), 1.0);
        close(acc(&p, &t), 1.0);
        close(homogeneity(&p, &t), 1.0);
    }

    #[test]
    fn degenerate_cases_follow_scikit_learn() {
        // one cluster vs several classes
        let t = [0, 0, 1, 1];
        let p = [0, 0, 0, 0];
        close(ari(&p, &t), 0.0);
        close(nmi(&p, &t), 0.0);
        close(acc(&p, &t), 0.5);
    }

    #[test]
    fn counts_and_their_summary() {
        let m = cluster_class_counts(&PRED, &TRUTH, 4, 3);
        assert_eq!(
            m,
            vec![vec![1, 4, 1], vec![5, 1, 0], vec![1, 1, 5], vec![0, 0, 1]]
        );
        assert_eq!(
            majority_summary(&m, &[]),
            "split: class 2 (clusters 2 and 3)"
        );
        // class b has no cluster of its own (a tie goes to the lower cluster) and is a third of
        // clusters 0 and 1, cluster 2 is empty
        let m = cluster_class_counts(&[0, 0, 0, 1, 1, 1, 7], &[0, 0, 1, 1, 2, 2, 0], 3, 3);
        assert_eq!(m, vec![vec![2, 1, 0], vec![0, 1, 2], vec![0, 0, 0]]);
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(
            majority_summary(&m, &names),
            "merged: class b (50% in cluster 0 of class a); \
             mixed: cluster 0 (a 67%, b 33%), cluster 1 (c 67%, b 33%); empty: cluster 2"
        );
        let perfect = cluster_class_counts(&[1, 1, 0], &[0, 0, 1], 2, 2);
        assert_eq!(majority_summary(&perfect, &names), "one cluster per class");
        assert_eq!(and_list(&[3, 5, 8]), "3, 5 and 8");
    }

    const SK_ARI: f64 = 0.27648578811369506;
    const SK_NMI: f64 = 0.36128387438511866;
    const SK_HOM: f64 = 0.384940698651751;
    const SK_ACC: f64 = 0.7;
}
