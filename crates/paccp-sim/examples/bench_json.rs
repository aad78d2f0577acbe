//! Times the event loop of one resolved scenario JSON file (docs/engine-contract.md): prints one JSON
//! line with the events, the loop's CPU and wall seconds, events per CPU-second and the peak number of
//! packets in flight (what sets the engine's working set). For profiling the
//! engine without Python (`perf record`); `paccp bench` is the user-facing benchmark.
//!
//! ```text
//! cargo run --release -p paccp-sim --example bench_json -- scenario.json
//! ```
use std::time::Instant;

/// This thread's CPU time (ns) from `/proc/thread-self/schedstat` (0 if unreadable).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: bench_json SCENARIO.json");
        std::process::exit(2);
    };
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let mut start: Option<(u64, Instant)> = None;
    let mut end: Option<(u64, Instant)> = None;
    let mut cb = |done: u64, total: u64| -> Result<(), String> {
        if start.is_none() {
            start = Some((cpu_ns(), Instant::now()));
        }
        if done == total {
            end = Some((cpu_ns(), Instant::now()));
        }
        Ok(())
    };
    let out = match paccp_sim::run_json(&doc, Some(&mut cb)) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let events = v["stats"]["events"].as_u64().unwrap_or(0);
    let peak = v["stats"]["peak_packets_in_flight"].as_u64().unwrap_or(0);
    let (Some((c0, w0)), Some((c1, w1))) = (start, end) else {
        eprintln!("no progress reports");
        std::process::exit(2);
    };
    let cpu = (c1 - c0) as f64 / 1e9;
    let wall = (w1 - w0).as_secs_f64();
    // FNV-1a of the output document: equal digests = identical outputs (for before/after checks).
    let digest = out.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    println!(
        "{{\"events\": {events}, \"loop_cpu_s\": {cpu:.4}, \"loop_wall_s\": {wall:.4}, \"events_per_cpu_s\": {:.0}, \"peak_packets_in_flight\": {peak}, \"output_fnv\": \"{digest:016x}\"}}",
        events as f64 / cpu
    );
}
