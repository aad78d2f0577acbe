//! The receiver's processing delay (`transport.ack_delay_mean_ns`): off by default, reproducible, ACKs
//! falling due while one waits are merged into it, validated.
mod common;
use common::*;
use serde_json::{json, Value};

fn one_flow(delay_ns: Option<u64>, delayed_ack: bool) -> Value {
    let mut s = dumbbell(1, 1_000_000_000, 100);
    s["duration_ns"] = json!(50_000_000u64);
    s["transport"]["delayed_ack"] = json!(delayed_ack);
    if let Some(d) = delay_ns {
        s["transport"]["ack_delay_mean_ns"] = json!(d);
    }
    s["flows"] = json!([flow("f", "l0", "r0", 0, 1.0)]);
    s
}

/// Bytes sent on the reverse bottleneck (ACKs only: the flow goes left to right).
fn ack_bytes(out: &Value) -> u64 {
    let names = col(out, "channels", "name");
    let i = names
        .iter()
        .position(|n| n == "right->left")
        .expect("channel");
    col(out, "channels", "tx_bytes")[i].as_u64().unwrap()
}

#[test]
fn an_ack_delay_of_zero_is_the_default() {
    assert_eq!(run(&one_flow(None, true)), run(&one_flow(Some(0), true)));
}

#[test]
fn delayed_acks_merge_and_reruns_are_identical() {
    for delayed_ack in [false, true] {
        let base = run(&one_flow(None, delayed_ack));
        let slow = run(&one_flow(Some(30_000), delayed_ack));
        assert_eq!(
            slow,
            run(&one_flow(Some(30_000), delayed_ack)),
            "not reproducible"
        );
        // an ACK waits ~30 us while segments arrive every 12 us at 1 Gb/s: it covers several of them
        let (b, s) = (ack_bytes(&base), ack_bytes(&slow));
        assert!(
            s * 2 < b,
            "ACK bytes {s} with the delay vs {b} without (delayed_ack {delayed_ack})"
        );
        // the flow still fills the bottleneck (50 ms at 1 Gb/s, 1460 of 1500 bytes)
        let got = acked(&slow)[0] as f64 * 8.0 / 0.05;
        assert!(
            got > 0.8e9 * 1460.0 / 1500.0,
            "rate {got} (delayed_ack {delayed_ack})"
        );
    }
}

#[test]
fn the_delay_must_be_shorter_than_the_minimum_rto() {
    let s = one_flow(Some(1_000_000), false); // min_rto_ns is 1 ms in the common dumbbell
    assert_eq!(
        run_err(&s),
        "transport.ack_delay_mean_ns: must be < transport.min_rto_ns"
    );
}
