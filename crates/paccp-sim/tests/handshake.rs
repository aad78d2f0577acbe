//! The optional TCP three-way handshake (`transport.handshake`): off by default, one round trip on an
//! idle path, a dropped SYN retried after the connect timeout with doubling waits, give-up after
//! `syn_retries`, reproducible, validated.
mod common;
use common::*;
use serde_json::{json, Value};

const SYN_BYTES: u64 = 48;
const TIMEOUT_NS: u64 = 10_000_000;

/// One 100 KB Reno flow l0 -> r0 on the 1 Gb/s dumbbell (10 G access 5 us, bottleneck 20 us).
fn one_flow(handshake: bool) -> Value {
    let mut s = dumbbell(2, 1_000_000_000, 100);
    s["cc"] = json!({"kind": "reno"});
    s["duration_ns"] = json!(50_000_000u64);
    let mut f = flow("a", "l0", "r0", 0, 1.0);
    f["size_bytes"] = json!(100_000);
    s["flows"] = json!([f]);
    if handshake {
        s["transport"]["handshake"] = hs(3);
    }
    s
}

fn hs(retries: u32) -> Value {
    json!({"syn_bytes": SYN_BYTES, "connect_timeout_ns": TIMEOUT_NS, "syn_retries": retries})
}

fn u(out: &Value, t: &str, c: &str, i: usize) -> u64 {
    out[t][c][i]
        .as_u64()
        .unwrap_or_else(|| panic!("{t}.{c}[{i}] = {}", out[t][c][i]))
}

/// Serialisation of `bytes` at `bps`, in ps.
fn tx_ps(bytes: u64, bps: u64) -> u64 {
    bytes * 8 * 1_000_000_000_000 / bps
}

#[test]
fn the_handshake_is_off_by_default_and_null_is_off() {
    let base = run(&one_flow(false));
    assert!(base.get("handshake").is_none());
    let mut s = one_flow(false);
    s["transport"]["handshake"] = Value::Null;
    assert_eq!(run(&s), base);
}

#[test]
fn the_handshake_takes_one_round_trip_on_an_idle_path_and_the_data_then_run_as_without() {
    let plain = run(&one_flow(false));
    let out = run(&one_flow(true));
    assert_eq!(out, run(&one_flow(true)), "reruns are identical");
    // SYN l0 -> r0 and SYN-ACK back: 10G, 1G, 10G hops of 5, 20, 5 us each way.
    let one_way =
        2 * tx_ps(SYN_BYTES, 10_000_000_000) + tx_ps(SYN_BYTES, 1_000_000_000) + 30_000_000;
    let est = u(&out, "handshake", "established_ns", 0);
    assert_eq!(est - u(&out, "flows", "start_ns", 0), 2 * one_way / 1000);
    assert_eq!(u(&out, "handshake", "syns", 0), 1);
    // The data phase is the run without the handshake, but for the third ACK (40 bytes at 10 Gb/s,
    // 32 ns) that leaves the NIC ahead of the first segment.
    let fct_plain = u(&plain, "flows", "finish_ns", 0) - u(&plain, "flows", "start_ns", 0);
    let fct_hs = u(&out, "flows", "finish_ns", 0) - est;
    assert_eq!(fct_hs, fct_plain + 32);
    assert_eq!(u(&out, "flows", "retransmits", 0), 0);
    assert_eq!(u(&out, "flows", "timeouts", 0), 0);
}

#[test]
fn a_syn_dropped_at_a_full_nic_queue_delays_the_data_by_the_connect_timeout() {
    // Two flows of host l0 start together; its NIC queue holds one packet (the one on the wire), so the
    // second flow's SYN is dropped behind the first one's and retransmitted 10 ms later.
    let mut s = one_flow(true);
    s["topology"]["nic_buffer"] = json!({"packets": 1});
    let mut b = flow("b", "l0", "r1", 0, 1.0);
    b["size_bytes"] = json!(1000);
    let mut a = flow("a", "l0", "r0", 0, 1.0);
    a["size_bytes"] = json!(1000);
    s["flows"] = json!([a, b]);
    let out = run(&s);
    let (ea, eb) = (
        u(&out, "handshake", "established_ns", 0),
        u(&out, "handshake", "established_ns", 1),
    );
    assert_eq!(u(&out, "handshake", "syns", 0), 1);
    assert_eq!(u(&out, "handshake", "syns", 1), 2);
    assert_eq!(
        eb,
        ea + TIMEOUT_NS,
        "the retried SYN meets the same idle path"
    );
    assert!(u(&out, "flows", "finish_ns", 1) > eb);
}

/// Index of the channel named `name`.
fn channel(out: &Value, name: &str) -> usize {
    col(out, "channels", "name")
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no channel {name}: {}", out["channels"]["name"]))
}

#[test]
fn unanswered_syns_are_retried_at_doubling_intervals_then_given_up() {
    // A 10 Gb/s constant-bit-rate flow keeps a one-packet NIC queue busy: every SYN of flow b (l0 -> r1)
    // is dropped there when the CBR flow leaves l0, every SYN-ACK when it leaves r1; either way b sends
    // SYNs at 0, 10, 30, 70 ms (3 retries) and gives up at 150 ms.
    for (src, dst, nic) in [("l0", "r0", "l0->left"), ("r1", "l1", "r1->right")] {
        let mut s = one_flow(true);
        s["topology"]["nic_buffer"] = json!({"packets": 1});
        let mut cbr = flow("cbr", src, dst, 0, 1.0);
        cbr["cbr_bps"] = json!(10_000_000_000u64);
        let mut b = flow("b", "l0", "r1", 0, 1.0);
        b["start_ns"] = json!(1_000);
        b["size_bytes"] = json!(10_000);
        s["flows"] = json!([cbr, b]);
        for (dur_ms, syns) in [
            (9, 1),
            (11, 2),
            (29, 2),
            (31, 3),
            (69, 3),
            (71, 4),
            (300, 4),
        ] {
            s["duration_ns"] = json!(dur_ms * 1_000_000u64);
            let out = run(&s);
            let at = format!("{nic} at {dur_ms} ms");
            assert_eq!(u(&out, "handshake", "syns", 1), syns, "{at}");
            assert!(out["handshake"]["established_ns"][1].is_null(), "{at}");
            assert!(out["flows"]["finish_ns"][1].is_null(), "{at}");
            assert!(
                out["handshake"]["established_ns"][0].is_null(),
                "no handshake for CBR"
            );
            assert_eq!(
                u(&out, "flows", "timeouts", 1),
                0,
                "SYN timeouts are not RTOs"
            );
            // every SYN (SYN-ACK) dropped, at the NIC or at the bottleneck the CBR flow overloads,
            // counted with the packets without payload
            let lost: u64 = col(&out, "channels", "drops_ack")
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(lost, syns, "{at}");
            assert!(
                u(&out, "channels", "drops_ack", channel(&out, nic)) >= 1,
                "{at}"
            );
        }
    }
}

#[test]
fn handshake_parameters_are_validated() {
    for (key, val, msg) in [
        ("syn_bytes", json!(0), "transport.handshake.syn_bytes"),
        ("syn_bytes", json!(70_000), "transport.handshake.syn_bytes"),
        (
            "connect_timeout_ns",
            json!(0),
            "transport.handshake.connect_timeout_ns",
        ),
        ("syn_retries", json!(31), "transport.handshake.syn_retries"),
    ] {
        let mut s = one_flow(true);
        s["transport"]["handshake"][key] = val;
        let e = run_err(&s);
        assert!(e.contains(msg), "{key}: {e}");
    }
    let mut s = one_flow(true);
    s["transport"]["handshake"]["extra"] = json!(1);
    assert!(run_err(&s).contains("extra"));
}

#[test]
fn the_syn_ack_gives_the_first_rtt_sample() {
    // The flow starts at 0.93 ms: at the 1 ms sample its handshake (one round trip) is done and its
    // first data segment not yet acknowledged, so srtt is the handshake's round trip (none without it).
    let mut s = one_flow(true);
    s["flows"][0]["start_ns"] = json!(930_000);
    s["sampling"] = json!({"interval_ns": 1_000_000, "flows": "all", "cwnd": true});
    let out = run(&s);
    let rtt_ns = u(&out, "handshake", "established_ns", 0) - 930_000;
    let srtt_us = out["samples"]["srtt_us"][0][0].as_f64().unwrap();
    assert!(
        (srtt_us * 1e3 - rtt_ns as f64).abs() < 1.0,
        "srtt {srtt_us} us, handshake {rtt_ns} ns"
    );
    s["transport"]["handshake"] = Value::Null;
    assert_eq!(run(&s)["samples"]["srtt_us"][0][0].as_f64(), Some(0.0));
}
