//! Engine errors: every bad input becomes an [`EngineError`] naming the field, never a panic.
use thiserror::Error;

/// An error raised by the engine.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The scenario JSON could not be parsed (syntax, unknown key, wrong type).
    #[error("scenario JSON: {0}")]
    Parse(String),
    /// A field holds an invalid or inconsistent value.
    #[error("{field}: {msg}")]
    Invalid {
        /// Path of the offending field, e.g. `flows[3].omega`.
        field: String,
        /// What is wrong with it.
        msg: String,
    },
    /// The progress callback asked the run to stop (e.g. a Python exception).
    #[error("run aborted: {0}")]
    Aborted(String),
}

impl EngineError {
    /// Builds an [`EngineError::Invalid`].
    pub fn invalid(field: impl Into<String>, msg: impl Into<String>) -> Self {
        EngineError::Invalid {
            field: field.into(),
            msg: msg.into(),
        }
    }

    /// `Ok(())` when `ok`, else an [`EngineError::Invalid`] for `field` (one validation rule per line).
    pub fn require(ok: bool, field: impl Into<String>, msg: impl Into<String>) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(EngineError::invalid(field, msg))
        }
    }
}

/// Result alias of the engine.
pub type Result<T> = std::result::Result<T, EngineError>;
