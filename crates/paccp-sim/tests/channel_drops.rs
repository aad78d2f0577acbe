//! The channels' drop counters: `drops` counts every packet a queue dropped, `drops_ack` the ACKs among
//! them (data drops = `drops - drops_ack`).
mod common;
use common::*;
use serde_json::{json, Value};

/// Reno on a dumbbell with a short bottleneck queue (8 packets, 1 Gb/s), four flows left to right;
/// `two_way` adds four right to left, whose data share each bottleneck queue with the others' ACKs.
fn dumbbell_run(two_way: bool) -> Value {
    let mut s = dumbbell(8, 1_000_000_000, 8);
    s["duration_ns"] = json!(50_000_000u64);
    s["cc"] = json!({"kind": "reno", "min_cwnd_pkts": 1.0});
    let mut flows: Vec<Value> = (0..4)
        .map(|i| flow(&format!("f{i}"), &format!("l{i}"), &format!("r{i}"), 0, 1.0))
        .collect();
    if two_way {
        flows.extend(
            (4..8).map(|i| flow(&format!("g{i}"), &format!("r{i}"), &format!("l{i}"), 0, 1.0)),
        );
    }
    s["flows"] = json!(flows);
    run(&s)
}

/// (name, drops, drops_ack) of every channel.
fn drops(out: &Value) -> Vec<(String, u64, u64)> {
    let n = col(out, "channels", "name");
    let d = col(out, "channels", "drops");
    let a = col(out, "channels", "drops_ack");
    assert_eq!((n.len(), d.len()), (a.len(), a.len()), "column lengths");
    (0..n.len())
        .map(|i| {
            let name = n[i].as_str().unwrap().to_string();
            (name, d[i].as_u64().unwrap(), a[i].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn acks_dropped_in_a_shared_queue_are_counted_as_acks() {
    let out = dumbbell_run(true);
    let ch = drops(&out);
    let total: u64 = ch.iter().map(|c| c.1).sum();
    assert_eq!(total, out["stats"]["packets_dropped"].as_u64().unwrap());
    let acks: u64 = ch.iter().map(|c| c.2).sum();
    for (name, d, a) in &ch {
        assert!(a <= d, "{name}: {a} ACK drops of {d}");
    }
    // both kinds are dropped: data (the flows' own losses) and the ACKs queued behind it
    assert!(acks > 0, "no ACK drop: {ch:?}");
    assert!(acks < total, "only ACK drops: {ch:?}");
    // each bottleneck direction carries one side's data and the other side's ACKs: both dropped
    for dir in ["left->right", "right->left"] {
        let (_, d, a) = ch.iter().find(|c| c.0 == dir).expect("bottleneck channel");
        assert!(*a > 0 && *d > *a, "{dir}: {d} drops, {a} of them ACKs");
    }
    // the split is reproducible
    assert_eq!(out, dumbbell_run(true));
}

#[test]
fn a_one_way_run_drops_data_only() {
    let ch = drops(&dumbbell_run(false));
    let total: u64 = ch.iter().map(|c| c.1).sum();
    assert!(total > 0, "no drop at all: {ch:?}");
    for (name, _, a) in &ch {
        assert_eq!(*a, 0, "{name}: ACK drops in a one-way run");
    }
}
