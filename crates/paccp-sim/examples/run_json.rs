//! Runs one resolved scenario JSON file (docs/engine-contract.md) and prints the output JSON.
//!
//! ```text
//! cargo run --release -p paccp-sim --example run_json -- scenario.json > out.json
//! ```
use std::io::Write;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run_json SCENARIO.json");
        std::process::exit(2);
    };
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    match paccp_sim::run_json(&doc, None) {
        Ok(out) => {
            let mut so = std::io::stdout().lock();
            let _ = so.write_all(out.as_bytes());
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
