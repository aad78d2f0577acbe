//! What the MPTCP BG/WC scheme needs from the engine: a flow's own congestion control, a subflow on
//! its sibling's path, constant-bit-rate (UDP-like) flows, and the fair-WC controller in whole runs.
mod common;
use common::*;
use serde_json::json;

/// Delivered rate (bit/s) of each flow over the run.
fn rates(out: &serde_json::Value, secs: f64) -> Vec<f64> {
    acked(out).iter().map(|&b| b as f64 * 8.0 / secs).collect()
}

#[test]
fn a_cbr_flow_sends_its_rate_unresponsively() {
    let mut s = dumbbell(2, 1_000_000_000, 100);
    let mut udp = flow("u", "l0", "r0", 0, 1.0);
    udp["cbr_bps"] = json!(300_000_000u64);
    s["flows"] = json!([udp.clone()]);
    // 300 Mb/s on the wire = 292 Mb/s of payload (1460 of 1500 bytes).
    let alone = rates(&run(&s), 0.1)[0];
    assert!((alone / 292e6 - 1.0).abs() < 0.005, "cbr alone {alone}");
    // Next to a TCP flow it keeps sending at its rate (it loses only what the full queue drops).
    s["flows"] = json!([udp, flow("t", "l1", "r1", 0, 1.0)]);
    let r = rates(&run(&s), 0.1);
    assert!(r[0] > 0.95 * 292e6 && r[0] <= alone, "cbr {r:?}");
    assert!(r[1] > 600e6, "tcp takes the rest: {r:?}");
    s["flows"][0]["cbr_bps"] = json!(0);
    assert_eq!(run_err(&s), "flows[0].cbr_bps: must be > 0");
}

#[test]
fn a_flow_with_its_own_controller() {
    // Reno (l0 -> r0) against fair_wc of weight 3 (9 segments per RTT; l1 -> r1) at a 1 Gb/s bottleneck.
    let mut s = dumbbell(2, 1_000_000_000, 100);
    s["cc"] = json!({"kind": "reno"});
    let mut b = flow("b", "l1", "r1", 0, 3.0);
    b["cc"] = json!({"kind": "fair_wc"});
    s["flows"] = json!([flow("a", "l0", "r0", 0, 1.0), b]);
    let r = rates(&run(&s), 0.1);
    assert!(
        r[1] > 1.3 * r[0],
        "the more aggressive controller takes more: {r:?}"
    );
    s["flows"][1]["cc"] = json!({"kind": "reno"});
    let r = rates(&run(&s), 0.1);
    assert!(
        (r[1] / r[0] - 1.0).abs() < 0.2,
        "the same controller: about equal {r:?}"
    );
    s["flows"][1]["cc"] = json!({"kind": "nope"});
    assert!(run_err(&s).starts_with("flows[1].cc: "));
}

#[test]
fn subflows_on_their_siblings_path() {
    // Eight flows h0 -> h2 over 4 spines take the first one's path (by chance: 4^-8).
    let mut s = leaf_spine(2, 4, 2, "ecmp");
    let mut fl = vec![flow("a", "h0", "h2", 0, 1.0)];
    for k in 0..8 {
        let mut f = flow(&format!("s{k}"), "h0", "h2", 0, 1.0);
        f["same_path_as"] = json!("a");
        fl.push(f);
    }
    s["flows"] = json!(fl);
    s["duration_ns"] = json!(1_000_000);
    let out = run(&s);
    let routes = col(&out, "flows", "route");
    assert!(routes.iter().all(|r| r == &routes[0]), "{routes:?}");
    s["flows"][1]["same_path_as"] = json!("zz");
    assert_eq!(run_err(&s), "flows[1].same_path_as: no earlier flow 'zz'");
    s["flows"][1]["same_path_as"] = json!("a");
    s["flows"][1]["dst"] = json!("h3");
    assert_eq!(
        run_err(&s),
        "flows[1].same_path_as: flow 'a' has other endpoints"
    );
}
