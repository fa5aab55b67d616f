//! Checkpoints: everything a CM / AE-CM run needs to continue exactly where it stopped, taken at
//! an epoch boundary ([`super::Trainer::checkpoint`], [`super::Trainer::resume`]).
//!
//! The file is a [safetensors](https://github.com/huggingface/safetensors) file, so that the
//! trained weights open anywhere (`safetensors.numpy.load_file` in Python): the tensors
//! `param.NN` (the model's parameters in [`crate::model::Arch::param_shapes`] order, kernels
//! `in x out` and biases `1 x out`, row-major f32) and Adam's moments `adam_m.NN` / `adam_v.NN`
//! (absent for parameters Adam has not updated yet); the header's metadata `aecm.state` holds
//! the rest as JSON ([`CheckpointState`]: configuration, data fingerprint, phase, counters,
//! loss weights, the shuffling generator's position, the epoch history), its floating-point
//! numbers written as `{"f64": "1.2345e2"}` so that they read back exactly.

use super::config::TrainConfig;
use super::events::EpochRecord;
use super::trainer::Phase;
use crate::data::Dataset;
use crate::error::{AecmError, Result};
use crate::model::net::LossWeights;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// The checkpoint format this build writes and reads.
pub const FORMAT: u32 = 1;
/// The safetensors metadata key of [`CheckpointState`].
const STATE_KEY: &str = "aecm.state";

/// Identifies a data set: a run resumes only on the data it was trained on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPrint {
    /// The data set's name.
    pub name: String,
    /// Rows.
    pub n: usize,
    /// Columns.
    pub d: usize,
    /// FNV-1a (64 bits, hexadecimal) of the values' f32 bits and the labels.
    pub hash: String,
}

impl DataPrint {
    /// The fingerprint of `ds` (after preprocessing: what the model saw).
    pub fn of(ds: &Dataset) -> Self {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |w: u32| {
            for b in w.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(PRIME);
            }
        };
        for v in &ds.x {
            eat(v.to_bits());
        }
        for &l in ds.labels.iter().flatten() {
            eat(l);
        }
        Self {
            name: ds.name.clone(),
            n: ds.n,
            d: ds.d,
            hash: format!("{h:016x}"),
        }
    }
}

/// Everything of a checkpoint but the arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// [`FORMAT`].
    pub format: u32,
    /// The run's configuration.
    pub config: TrainConfig,
    /// The data it trains on.
    pub data: DataPrint,
    /// The phase the next epoch belongs to (`done`: the run is finished, the parameters are the
    /// averaged ones).
    pub phase: Phase,
    /// Epochs of that phase already done.
    pub epoch_in_phase: usize,
    /// Mini-batch updates done.
    pub step: usize,
    /// The epoch of the next evaluation under an evaluation budget.
    pub next_eval: usize,
    /// The loss weights in use (the explorer may have changed them during the run).
    pub weights: LossWeights,
    /// The learning rate in use.
    pub lr: f64,
    /// Word position of the shuffling generator (decimal: JSON numbers stop at 2^53).
    pub rng_word_pos: String,
    /// Adam's update count.
    pub adam_t: i32,
    /// Adam's epsilon (the phase's).
    pub adam_eps: f64,
    /// Seconds of training before this checkpoint (over all earlier sessions of the run).
    pub elapsed_s: f64,
    /// The device that wrote it.
    pub device: String,
    /// The epochs so far.
    pub history: Vec<EpochRecord>,
}

/// A checkpoint: its state and arrays (host vectors in parameter order).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Counters, settings, history.
    pub state: CheckpointState,
    /// The parameters' shapes.
    pub shapes: Vec<[usize; 2]>,
    /// The parameters.
    pub params: Vec<Vec<f32>>,
    /// Adam's first moments (empty: not updated yet).
    pub adam_m: Vec<Vec<f32>>,
    /// Adam's second moments (empty: not updated yet).
    pub adam_v: Vec<Vec<f32>>,
}

/// The key of a tagged float: `{"f64": "1.2345e2"}`.
const FLOAT_TAG: &str = "f64";

/// Replaces every floating-point number of `v` with `{"f64": "<shortest exact decimal>"}`:
/// serde_json writes floats exactly but parses them only to within one unit in the last
/// place, and a resumed run must get back the very values it saved (loss weights, learning
/// rate, the history).
fn tag_floats(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            *v = serde_json::json!({ FLOAT_TAG: format!("{f:e}") });
        }
        Value::Array(a) => a.iter_mut().for_each(tag_floats),
        Value::Object(m) => m.values_mut().for_each(tag_floats),
        _ => {}
    }
}

/// Undoes [`tag_floats`] with Rust's correctly rounded parser.
fn untag_floats(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(m) if m.len() == 1 => {
            let f = m
                .get(FLOAT_TAG)
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<f64>().ok());
            match f {
                Some(f) => *v = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
                None => m.values_mut().for_each(untag_floats),
            }
        }
        Value::Array(a) => a.iter_mut().for_each(untag_floats),
        Value::Object(m) => m.values_mut().for_each(untag_floats),
        _ => {}
    }
}

fn name(kind: &str, i: usize) -> String {
    format!("{kind}.{i:02}")
}

impl Checkpoint {
    /// The file's bytes (safetensors).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        use safetensors::tensor::{Dtype, TensorView};
        let mut value = serde_json::to_value(&self.state)
            .map_err(|e| AecmError::Backend(format!("checkpoint state: {e}")))?;
        tag_floats(&mut value);
        let json = value.to_string();
        let mut bytes: Vec<(String, &[f32], [usize; 2])> = Vec::new();
        for (i, (p, &shape)) in self.params.iter().zip(&self.shapes).enumerate() {
            bytes.push((name("param", i), p, shape));
            for (kind, m) in [("adam_m", &self.adam_m), ("adam_v", &self.adam_v)] {
                if let Some(v) = m.get(i).filter(|v| !v.is_empty()) {
                    bytes.push((name(kind, i), v, shape));
                }
            }
        }
        let mut views = Vec::with_capacity(bytes.len());
        for (n, v, [r, c]) in &bytes {
            let view = TensorView::new(Dtype::F32, vec![*r, *c], bytemuck::cast_slice(v))
                .map_err(|e| AecmError::Backend(format!("checkpoint tensor {n}: {e}")))?;
            views.push((n.clone(), view));
        }
        let meta = HashMap::from([(STATE_KEY.to_string(), json)]);
        safetensors::serialize(views, Some(meta))
            .map_err(|e| AecmError::Backend(format!("checkpoint: {e}")))
    }

    /// Writes the checkpoint to `path` atomically (a crash leaves the previous one).
    pub fn write(&self, path: &Path) -> Result<()> {
        crate::util::atomic_write(path, &self.to_bytes()?)
    }

    /// Reads a checkpoint written by [`Self::write`]; errors name the file and what is wrong.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| AecmError::io(path, e))?;
        Self::from_bytes(&bytes).map_err(|msg| AecmError::data(path, msg))
    }

    /// Parses a checkpoint's bytes.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Self, String> {
        use safetensors::SafeTensors;
        use safetensors::tensor::Dtype;
        let (_, meta) = SafeTensors::read_metadata(bytes)
            .map_err(|e| format!("not a safetensors file ({e})"))?;
        let json = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get(STATE_KEY))
            .ok_or_else(|| format!("not an aecm checkpoint (no `{STATE_KEY}` metadata)"))?;
        let mut value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("metadata `{STATE_KEY}`: {e}"))?;
        untag_floats(&mut value);
        let state: CheckpointState =
            serde_json::from_value(value).map_err(|e| format!("metadata `{STATE_KEY}`: {e}"))?;
        if state.format != FORMAT {
            return Err(format!(
                "checkpoint format {} (this build reads format {FORMAT})",
                state.format
            ));
        }
        let st = SafeTensors::deserialize(bytes).map_err(|e| format!("tensors: {e}"))?;
        type Array = ([usize; 2], Vec<f32>);
        let read = |n: &str| -> std::result::Result<Option<Array>, String> {
            let Ok(t) = st.tensor(n) else { return Ok(None) };
            let shape = match (t.dtype(), t.shape()) {
                (Dtype::F32, &[r, c]) => [r, c],
                (dt, s) => return Err(format!("tensor `{n}`: {dt:?} {s:?}, expected 2-D F32")),
            };
            let v = t
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Ok(Some((shape, v)))
        };
        let mut ck = Self {
            state,
            shapes: Vec::new(),
            params: Vec::new(),
            adam_m: Vec::new(),
            adam_v: Vec::new(),
        };
        for i in 0.. {
            let Some((shape, p)) = read(&name("param", i))? else {
                break;
            };
            ck.shapes.push(shape);
            ck.params.push(p);
            for (kind, out) in [("adam_m", &mut ck.adam_m), ("adam_v", &mut ck.adam_v)] {
                match read(&name(kind, i))? {
                    Some((s, v)) if s == shape => out.push(v),
                    Some((s, _)) => {
                        return Err(format!(
                            "tensor `{}`: shape {s:?}, expected {shape:?} as `{}`",
                            name(kind, i),
                            name("param", i)
                        ));
                    }
                    None => out.push(Vec::new()),
                }
            }
        }
        if ck.params.is_empty() {
            return Err("no parameters (`param.00` missing)".into());
        }
        Ok(ck)
    }

    /// The epochs this checkpoint has done, for messages ("epoch 430 of 1001").
    pub fn epochs_done(&self) -> usize {
        self.state.history.len()
    }

    /// Checks that this checkpoint continues a run of `cfg` on `ds`: the same data and the same
    /// configuration, except the evaluation settings (`eval_every`, `eval_budget`,
    /// `step_events`), which do not change the training.
    pub fn check_matches(
        &self,
        cfg: &TrainConfig,
        ds: &Dataset,
    ) -> std::result::Result<(), String> {
        let here = DataPrint::of(ds);
        if here != self.state.data {
            return Err(format!(
                "trained on other data ({} N {} d {}, fingerprint {}; now {} N {} d {}, {})",
                self.state.data.name,
                self.state.data.n,
                self.state.data.d,
                self.state.data.hash,
                here.name,
                here.n,
                here.d,
                here.hash
            ));
        }
        let training = |c: &TrainConfig| {
            let mut v = serde_json::to_value(TrainConfig {
                eval_every: 0,
                eval_budget: 0.0,
                step_events: false,
                ..c.clone()
            })
            .unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.retain(|_, x| !x.is_null());
            }
            v
        };
        let (a, b) = (training(&self.state.config), training(cfg));
        if a == b {
            return Ok(());
        }
        let diff: Vec<String> = a
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| b.get(k.as_str()) != Some(v))
            .map(|(k, v)| {
                let now = b.get(k.as_str()).map_or("-".into(), ToString::to_string);
                format!("{k} {v} (now {now})")
            })
            .collect();
        Err(format!(
            "trained with other settings: {}",
            if diff.is_empty() {
                "settings missing from the checkpoint".into()
            } else {
                diff.join(", ")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::{ModelKind, Trainer};
    use burn::tensor::Device;

    fn saved() -> Checkpoint {
        let c = TrainConfig {
            model: ModelKind::Aecm,
            clusters: 3,
            alpha: vec![2.0],
            batch: 32,
            epochs: 2,
            hidden: vec![8],
            embed: 2,
            ..TrainConfig::default()
        }
        .check(90, 2)
        .unwrap();
        let ds = crate::data::generate("blobs", Some(90), 3).unwrap();
        let mut t = Trainer::new(c, ds, Device::flex(), "cpu").unwrap();
        while t.history().is_empty() {
            t.step(&mut |_: &crate::train::Event| {}).unwrap();
        }
        t.checkpoint().unwrap()
    }

    /// The file holds the parameters and moments as named F32 tensors of the model's shapes
    /// (what Python's safetensors reads), and reads back as written.
    #[test]
    fn checkpoint_file_round_trips_as_safetensors() {
        let ck = saved();
        assert!(
            ck.adam_m.iter().all(|m| !m.is_empty()),
            "one epoch updated every parameter"
        );
        let dir = std::env::temp_dir().join(format!("aecm-ckpt-{}", std::process::id()));
        let path = dir.join("ck.safetensors");
        ck.write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let p0 = st.tensor("param.00").unwrap();
        assert_eq!(p0.shape(), &[2, 8]);
        assert_eq!(p0.dtype(), safetensors::tensor::Dtype::F32);
        assert_eq!(st.names().len(), 3 * ck.params.len());
        assert_eq!(Checkpoint::read(&path).unwrap(), ck);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A file that is not a checkpoint, or a damaged one, is an error naming the file.
    #[test]
    fn bad_checkpoint_files_are_errors_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("aecm-ckpt-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = saved().to_bytes().unwrap();
        let cut = dir.join("cut.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
        let text = dir.join("text.safetensors");
        std::fs::write(&text, "epoch,ari\n1,0.5\n").unwrap();
        let plain = dir.join("plain.safetensors");
        let view = safetensors::tensor::TensorView::new(
            safetensors::tensor::Dtype::F32,
            vec![1, 1],
            &[0u8; 4],
        )
        .unwrap();
        std::fs::write(&plain, safetensors::serialize([("w", view)], None).unwrap()).unwrap();
        for (p, what) in [
            (&cut, "tensors"),
            (&text, "not a safetensors file"),
            (&plain, "not an aecm checkpoint"),
        ] {
            let e = Checkpoint::read(p).unwrap_err().to_string();
            assert!(e.starts_with(&p.display().to_string()), "{e}");
            assert!(e.contains(what), "{e}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
