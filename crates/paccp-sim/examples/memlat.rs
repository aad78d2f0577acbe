//! The machine's memory latency by working-set size ([`paccp_sim::probe`]), for buffers from 256 KiB
//! to 128 MiB: one JSON line per size, `{"kib": ..., "ns_per_load": ...}`. `paccp bench --only scale`
//! records the same curve in its JSON (`memory_latency_ns`).
//!
//! ```text
//! cargo run --release -p paccp-sim --example memlat [LOADS_PER_SIZE]
//! ```
use std::io::Write;

fn main() {
    let loads: u64 = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 20_000_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: memlat [LOADS_PER_SIZE > 0]");
            std::process::exit(2);
        }
    };
    let mut out = std::io::stdout().lock();
    for kib in paccp_sim::probe::SIZES_KIB {
        let ns = paccp_sim::probe::memory_latency_ns(kib * 1024, loads);
        // A closed pipe (`| head`) ends the probe quietly.
        if writeln!(out, "{{\"kib\": {kib}, \"ns_per_load\": {ns:.1}}}").is_err() {
            return;
        }
    }
}
