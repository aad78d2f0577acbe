//! Scenario builders shared by the integration tests.
#![allow(dead_code)]
use serde_json::{json, Value};

/// A dumbbell with `n` hosts per side: 10 Gb/s access, `bneck_bps` bottleneck.
pub fn dumbbell(n: u32, bneck_bps: u64, buf_pkts: u64) -> Value {
    json!({
        "seed": 1,
        "duration_ns": 100_000_000u64,
        "packet": {"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40},
        "transport": {"init_cwnd_pkts": 10.0, "min_rto_ns": 1_000_000, "initial_rto_ns": 3_000_000,
                      "max_rto_ns": 1_000_000_000u64, "delayed_ack": false, "delayed_ack_timeout_ns": 40_000,
                      "dupack_threshold": 3, "sack": false, "host_backpressure": false,
                      "host_fq_pkts": 0},
        "cc": {"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 1.0},
        "topology": {"kind": "dumbbell", "left_hosts": n, "right_hosts": n,
                     "access_link": {"rate_bps": 10_000_000_000u64, "delay_ns": 5_000, "buffer": {"packets": 100}},
                     "bottleneck_link": {"rate_bps": bneck_bps, "delay_ns": 20_000, "buffer": {"packets": buf_pkts}},
                     "nic_buffer": {"packets": 1000}},
        "routing": {"kind": "ecmp"},
        "vms": [],
        "flows": [],
        "arrivals": [],
        "sampling": {"interval_ns": 1_000_000, "flows": "all", "cwnd": false}
    })
}

/// A long-lived flow `id` from `src` to `dst` with FBP pair (theta, omega).
pub fn flow(id: &str, src: &str, dst: &str, theta: u64, omega: f64) -> Value {
    json!({"id": id, "src": src, "dst": dst, "size_bytes": null, "start_ns": 0, "theta_bps": theta,
           "omega": omega, "vm": null, "label": "", "changes": []})
}

/// A leaf-spine with the paper's link parameters, scaled by the arguments.
pub fn leaf_spine(leaves: u32, spines: u32, hpl: u32, routing: &str) -> Value {
    let mut s = dumbbell(1, 1, 1);
    s["topology"] = json!({"kind": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": hpl,
        "host_link": {"rate_bps": 10_000_000_000u64, "delay_ns": 10_000, "buffer": {"packets": 100}},
        "fabric_link": {"rate_bps": 40_000_000_000u64, "delay_ns": 20_000, "buffer": {"packets": 400}},
        "nic_buffer": {"packets": 100}});
    s["routing"] = json!({"kind": routing});
    s
}

/// Runs a scenario value; panics with the engine message on error (tests only).
pub fn run(s: &Value) -> Value {
    let out = paccp_sim::run_json(&s.to_string(), None).expect("engine run");
    serde_json::from_str(&out).expect("output json")
}

/// Runs and returns the error message.
pub fn run_err(s: &Value) -> String {
    match paccp_sim::run_json(&s.to_string(), None) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// Column `col` of table `t` in an output.
pub fn col<'a>(out: &'a Value, t: &str, col: &str) -> &'a Vec<Value> {
    out[t][col].as_array().expect("column")
}

/// Bytes acked by each flow.
pub fn acked(out: &Value) -> Vec<u64> {
    col(out, "flows", "bytes_acked")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}
