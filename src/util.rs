//! Small shared helpers: the seeded random generator and atomic file writes.

use crate::error::{AecmError, Result};
use rand::{RngExt, SeedableRng};
use std::path::Path;

/// The project's seeded random generator (ChaCha8: portable and reproducible).
pub type SeededRng = rand::rngs::ChaCha8Rng;

/// A generator seeded from `seed` and a stream tag, so independent uses of one seed do not share
/// a sequence.
pub fn rng(seed: u64, stream: u64) -> SeededRng {
    let mut r = SeededRng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// One standard normal draw (Box-Muller).
pub fn normal(rng: &mut SeededRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A uniform draw in `[lo, hi)`.
pub fn uniform(rng: &mut SeededRng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.random::<f64>()
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, synced, then renamed
/// over the target. A crash leaves either the old file or the new one, never half of it.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| AecmError::io(dir, e))?;
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        Ok(())
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(AecmError::io(&tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        AecmError::io(path, e)
    })
}
