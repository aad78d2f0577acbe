//! Speed benchmark of the engine on the fig4a configuration (SPEC section 8).
//!
//! 6 x 5 leaf-spine, 40 hosts per leaf, 10 Gb/s / 10 us host links, 40 Gb/s / 20 us fabric links,
//! 100 / 400 packet buffers, one long-lived flow per host (per rack 20 BE (0,1), 10 DS (0,2),
//! 10 MRG (2 Gb/s, 1); 4 / 2 / 2 of them to each other rack), `leaf_spine_paper` routing.
//!
//! ```text
//! cargo run --release -p paccp-sim --example bench_fig4a -- [duration_ms]
//! ```
//! Prints one JSON line: events, wall seconds, events per second, and mean per-class rates (Gb/s).
use serde_json::{json, Value};
use std::time::Instant;

fn scenario(duration_ms: u64) -> Value {
    let (leaves, hpl) = (6u32, 40u32);
    let mut flows = Vec::new();
    for s in 0..leaves {
        for j in 0..hpl {
            let (label, theta, omega, k) = match j {
                0..=19 => ("BE", 0u64, 1.0, j / 4),
                20..=29 => ("DS", 0, 2.0, (j - 20) / 2),
                _ => ("MRG", 2_000_000_000, 1.0, (j - 30) / 2),
            };
            let d = (s + 1 + k) % leaves;
            flows.push(json!({"id": format!("f{}", s * hpl + j), "src": format!("h{}", s * hpl + j),
                "dst": format!("h{}", d * hpl + j), "size_bytes": null, "start_ns": 0, "theta_bps": theta,
                "omega": omega, "vm": null, "label": label, "changes": []}));
        }
    }
    json!({
        "seed": 1,
        "duration_ns": duration_ms * 1_000_000,
        "packet": {"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40},
        "transport": {"init_cwnd_pkts": 10.0, "min_rto_ns": 1_000_000, "initial_rto_ns": 3_000_000,
                      "max_rto_ns": 1_000_000_000u64, "delayed_ack": false, "delayed_ack_timeout_ns": 40_000,
                      "dupack_threshold": 3, "sack": false, "host_backpressure": false,
                      "host_fq_pkts": 0},
        "cc": {"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 1.0},
        "topology": {"kind": "leaf_spine", "leaves": leaves, "spines": 5, "hosts_per_leaf": hpl,
            "host_link": {"rate_bps": 10_000_000_000u64, "delay_ns": 10_000, "buffer": {"packets": 100}},
            "fabric_link": {"rate_bps": 40_000_000_000u64, "delay_ns": 20_000, "buffer": {"packets": 400}},
            "nic_buffer": {"packets": 100}},
        "routing": {"kind": "leaf_spine_paper"},
        "vms": [], "flows": flows, "arrivals": [],
        "sampling": {"interval_ns": 1_000_000, "flows": "long_lived", "cwnd": false}
    })
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let input = scenario(ms).to_string();
    let t0 = Instant::now();
    let out = match paccp_sim::run_json(&input, None) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench_fig4a: {e}");
            std::process::exit(1);
        }
    };
    let wall = t0.elapsed().as_secs_f64();
    let out: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let events = out["stats"]["events"].as_u64().unwrap_or(0);
    // Mean per-class goodput over the second half of the run (the first half is warm-up).
    let mut sums = std::collections::BTreeMap::<String, (f64, u32)>::new();
    let labels = out["flows"]["label"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rows = out["samples"]["acked_bytes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (l, row) in labels.iter().zip(rows.iter()) {
        let row = row.as_array().cloned().unwrap_or_default();
        let half = &row[row.len() / 2..];
        let bytes: u64 = half.iter().map(|v| v.as_u64().unwrap_or(0)).sum();
        let e = sums
            .entry(l.as_str().unwrap_or("").to_string())
            .or_default();
        e.0 += bytes as f64 * 8.0 / (half.len().max(1) as f64 * 1e-3) / 1e9;
        e.1 += 1;
    }
    let rates: serde_json::Map<String, Value> = sums
        .into_iter()
        .map(|(k, (s, n))| (k, json!((s / n as f64 * 1000.0).round() / 1000.0)))
        .collect();
    println!(
        "{}",
        json!({"config": "fig4a", "sim_ms": ms, "events": events, "wall_s": (wall * 1000.0).round() / 1000.0,
               "events_per_s": (events as f64 / wall).round(), "stats": out["stats"],
               "mean_goodput_gbps_second_half": rates})
    );
}
