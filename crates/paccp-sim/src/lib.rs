//! PACCP simulation engine: a deterministic packet-level datacenter simulator with the PACCP
//! congestion-control law. Input and output are the JSON documents of `docs/engine-contract.md`.
#![warn(missing_docs)]

pub mod cc;
pub mod config;
pub mod error;
pub mod rng;
mod sack;
pub mod sim;
pub mod topo;
pub mod units;

pub use error::{EngineError, Result};
pub use sim::{Progress, Simulation};

/// Engine version string.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Hash of the engine's source files (set by `build.rs`): identifies the engine code a result came from.
pub const SOURCE_HASH: &str = env!("PACCP_SIM_SOURCE_HASH");

/// Parses a scenario JSON document.
pub fn parse(scenario_json: &str) -> Result<config::Scenario> {
    serde_json::from_str(scenario_json).map_err(|e| EngineError::Parse(e.to_string()))
}

/// Runs a scenario given as a JSON value tree and returns the output value.
pub fn run_value(
    scenario: config::Scenario,
    progress: Option<Progress<'_>>,
) -> Result<serde_json::Value> {
    Simulation::new(scenario)?.run(progress)
}

/// Runs a scenario JSON document and returns the output JSON document.
pub fn run_json(scenario_json: &str, progress: Option<Progress<'_>>) -> Result<String> {
    let out = run_value(parse(scenario_json)?, progress)?;
    serde_json::to_string(&out).map_err(|e| EngineError::Parse(e.to_string()))
}
