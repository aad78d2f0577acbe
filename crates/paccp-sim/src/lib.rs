//! PACCP simulation engine (work in progress: see docs/engine-contract.md).
#![warn(missing_docs)]

/// Engine version string.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
