//! Library errors. Every user-facing error names the file and, where it applies, the line/field and
//! what was expected.

use std::path::PathBuf;

/// Errors raised by the `aecm` library.
#[derive(Debug, thiserror::Error)]
pub enum AecmError {
    /// A data file could not be read or parsed.
    #[error("{}: {msg}", path.display())]
    Data {
        /// The file (or folder) that failed.
        path: PathBuf,
        /// What went wrong, with line/column where known.
        msg: String,
    },
    /// An I/O failure on a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A configuration value is out of its valid range.
    #[error("invalid setting `{field}`: {msg}")]
    Config {
        /// The setting's name (as on the command line).
        field: &'static str,
        /// What was expected.
        msg: String,
    },
    /// A failure of the tensor backend.
    #[error("backend: {0}")]
    Backend(String),
}

impl AecmError {
    /// A data error for `path`.
    pub fn data(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Self::Data {
            path: path.into(),
            msg: msg.into(),
        }
    }

    /// An I/O error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A configuration error.
    pub fn config(field: &'static str, msg: impl Into<String>) -> Self {
        Self::Config {
            field,
            msg: msg.into(),
        }
    }
}

/// Result alias for the library.
pub type Result<T> = std::result::Result<T, AecmError>;
