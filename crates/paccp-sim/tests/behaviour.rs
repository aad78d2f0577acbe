//! Whole-run behaviour tests on small topologies.
mod common;
use common::*;
use serde_json::json;

#[test]
fn two_reno_flows_share_a_dumbbell_fairly_and_fill_it() {
    let mut s = dumbbell(2, 1_000_000_000, 100);
    s["cc"] = json!({"kind": "reno"});
    s["duration_ns"] = json!(200_000_000u64);
    s["flows"] = json!([flow("a", "l0", "r0", 0, 1.0), flow("b", "l1", "r1", 0, 1.0)]);
    let out = run(&s);
    let a = acked(&out);
    let total = (a[0] + a[1]) as f64;
    let cap = 1e9 * 0.2 / 8.0 * 1460.0 / 1500.0;
    eprintln!("acked {a:?} util {:.3} stats {}", total / cap, out["stats"]);
    assert!(total / cap > 0.9, "utilisation {}", total / cap);
    let ratio = a[0] as f64 / a[1] as f64;
    assert!((0.7..1.43).contains(&ratio), "share ratio {ratio}");
}
