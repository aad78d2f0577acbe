//! Multipath connections: one byte stream over several subflows, the subflow schedulers (and one added
//! from this test code alone), the connection-level receive window with Linux's penalisation and
//! reinjection, the dynamic receive buffer, and the subflows' extra delay.
mod common;
use common::*;
use paccp_sim::{Registry, SchedulerMaker, SubflowScheduler, SubflowView};
use serde_json::{json, Value};

/// A dumbbell (1 Gb/s bottleneck) with subflows `s0 .. s{n-1}` from l0 to r0 (s1.. on s0's path), all
/// Reno, and one connection `c` over them.
fn conn_scenario(n: usize, size: Option<u64>, scheduler: &str, rcvbuf: u64) -> Value {
    let mut s = dumbbell(1, 1_000_000_000, 100);
    s["cc"] = json!({"kind": "reno"});
    let mut flows = Vec::new();
    for k in 0..n {
        let mut f = flow(&format!("s{k}"), "l0", "r0", 0, 1.0);
        if k > 0 {
            f["same_path_as"] = json!("s0");
            f["class"] = json!(1);
        }
        flows.push(f);
    }
    s["flows"] = json!(flows);
    s["connections"] = json!([{
        "id": "c",
        "subflows": (0..n).map(|k| json!({"flow": format!("s{k}")})).collect::<Vec<_>>(),
        "size_bytes": size,
        "scheduler": {"kind": scheduler},
        "receive_buffer_bytes": rcvbuf,
    }]);
    s
}

fn conn_col<'a>(out: &'a Value, c: &str) -> &'a Value {
    &out["connections"][c][0]
}

#[test]
fn a_finite_stream_over_two_subflows_completes_in_order() {
    let size = 3_000_000u64;
    let s = conn_scenario(2, Some(size), "least_rtt", 6_291_456);
    let out = run(&s);
    assert_eq!(conn_col(&out, "bytes_delivered"), &json!(size));
    let fin = conn_col(&out, "finish_ns").as_u64().expect("finished");
    // Both subflows carried data and finish with their connection.
    let a = acked(&out);
    assert!(a[0] > 0 && a[1] > 0, "both subflows used: {a:?}");
    for v in col(&out, "flows", "finish_ns") {
        assert_eq!(v.as_u64(), Some(fin));
    }
    // 3 MB at under 1 Gb/s takes more than 24 ms; with both subflows filling the link, under 60 ms.
    assert!((24_000_000..60_000_000).contains(&fin), "finish {fin}");
    // Bit-identical rerun.
    assert_eq!(out, run(&s));
}

#[test]
fn least_rtt_prefers_the_fast_subflow_and_bg_first_the_first() {
    // Subflow 0 (the "BG" subflow) is 500 us slower one way; a 40-segment receive window makes both
    // subflows compete for each freed DSN, which the scheduler decides.
    let run_with = |sched: &str| {
        let mut s = conn_scenario(2, None, sched, 40 * 1460);
        s["connections"][0]["subflows"][0]["extra_delay_ns"] = json!(500_000);
        s["connections"][0]["penalize"] = json!(false);
        acked(&run(&s))
    };
    let lr = run_with("least_rtt");
    let bf = run_with("bg_first");
    eprintln!("least_rtt {lr:?} bg_first {bf:?}");
    assert!(
        lr[1] > 3 * lr[0],
        "LeastRTT sends mostly on the fast subflow: {lr:?}"
    );
    assert!(
        bf[0] > 2 * lr[0],
        "BG-first sends more on the first subflow: {bf:?} vs {lr:?}"
    );
}

/// A toy scheduler: the last subflow only, when it is available.
#[derive(Debug)]
struct LastOnly;

impl SubflowScheduler for LastOnly {
    fn pick(&mut self, subs: &[SubflowView]) -> Option<usize> {
        subs.last().filter(|s| s.available).map(|s| s.pos)
    }
}

fn parse_last(_: &Value) -> paccp_sim::Result<SchedulerMaker> {
    Ok(Box::new(|| Box::new(LastOnly)))
}

#[test]
fn a_scheduler_added_from_test_code() {
    let mut reg = Registry::default();
    reg.register_scheduler("last_only", parse_last);
    let s = conn_scenario(3, Some(2_000_000), "last_only", 6_291_456);
    let out: Value =
        serde_json::from_str(&paccp_sim::run_json_with(&reg, &s.to_string(), None).expect("run"))
            .expect("json");
    let a = acked(&out);
    eprintln!("acked {a:?}");
    assert_eq!(conn_col(&out, "bytes_delivered"), &json!(2_000_000));
    assert_eq!(
        &a[..2],
        &[0, 0],
        "only the last subflow carries data: {a:?}"
    );
    // Unknown to the default registry: a one-line error naming the field and the known ones.
    assert_eq!(
        run_err(&s),
        "connections[0].scheduler.kind: unknown subflow scheduler 'last_only' (known: \
         least_rtt, bg_first)"
    );
}

#[test]
fn a_small_receive_buffer_penalises_the_slow_subflow() {
    // The paper's Fig. 6: subflow 0 (BG) shaped to 300 Mb/s at the host (a 5-packet bucket queue, so
    // its RTT stays short) and served first by the switch, subflow 1 (WC) 2 ms slower one way and low
    // priority; BG-first, SACK, host backpressure; 128 KiB vs 6 MiB vs dynamic (floor 128 KiB).
    let run_with = |rcvbuf: u64, penalize: bool, beta: Option<f64>| {
        let mut s = conn_scenario(2, None, "bg_first", rcvbuf);
        s["transport"]["sack"] = json!(true);
        s["transport"]["host_backpressure"] = json!(true);
        s["queues"] = json!({
            "host": {"kind": "shaper", "by": "class", "unshaped_buffer": {"packets": 100},
                     "priority": true,
                     "buckets": [{"class": 0, "rate_bps": 300_000_000u64, "burst_bytes": 39_000,
                                  "buffer": {"packets": 5}}]},
            "switch": {"kind": "strict_priority", "levels": [{"packets": 100}, {"packets": 100}]}
        });
        s["duration_ns"] = json!(300_000_000u64);
        s["connections"][0]["subflows"][1]["extra_delay_ns"] = json!(2_000_000);
        s["connections"][0]["penalize"] = json!(penalize);
        s["connections"][0]["dynamic_beta"] = json!(beta);
        let out = run(&s);
        let mbps: Vec<f64> = acked(&out)
            .iter()
            .map(|&b| b as f64 * 8.0 / 0.3 / 1e6)
            .collect();
        let c = |k: &str| out["connections"][k][0].as_u64().unwrap();
        eprintln!(
            "buffer {rcvbuf} penalize {penalize} beta {beta:?}: BG / WC {mbps:.0?} Mb/s, blocked {}, \
             penalisations {}, reinjections {}, max rwnd {}, max ooo {}",
            c("window_blocked"),
            c("penalisations"),
            c("reinjections"),
            c("max_rwnd_bytes"),
            c("max_ooo_bytes")
        );
        (
            mbps,
            c("penalisations"),
            c("reinjections"),
            c("max_ooo_bytes"),
        )
    };
    let (small, pen, reinj, ooo) = run_with(131_072, true, None);
    let (nopen, pen0, reinj0, _) = run_with(131_072, false, None);
    let (large, _, _, _) = run_with(6_291_456, true, None);
    let (dynamic, _, _, _) = run_with(131_072, true, Some(3.0));
    assert!(pen > 0 && reinj > 0 && pen0 == 0 && reinj0 == 0);
    assert!(ooo <= 131_072, "out-of-order data within the buffer: {ooo}");
    // Penalisation protects the fast (BG) subflow at the slow one's expense.
    assert!(
        small[1] < 0.8 * nopen[1] && small[0] > 1.1 * nopen[0],
        "{small:?} vs {nopen:?}"
    );
    // A large buffer lets the WC subflow take the idle bandwidth; so does the dynamic one.
    assert!(small[1] < 0.5 * large[1], "{small:?} vs {large:?}");
    assert!(large[0] + large[1] > 900.0, "the link is full: {large:?}");
    assert!(dynamic[1] > 0.9 * large[1], "{dynamic:?} vs {large:?}");
}

#[test]
fn a_subflows_extra_delay_and_its_steps() {
    // One one-segment stream: its completion time is one one-way trip (plus serialisation).
    let fin = |delay: u64, steps: Value, start: u64| {
        let mut s = conn_scenario(1, Some(1000), "bg_first", 65_536);
        s["flows"][0]["start_ns"] = json!(start);
        s["connections"][0]["subflows"][0]["extra_delay_ns"] = json!(delay);
        s["connections"][0]["subflows"][0]["delay_steps"] = steps;
        let out = run(&s);
        // The delay line is not a link: the route names the network's channels only.
        assert_eq!(col(&out, "flows", "route")[0].as_array().unwrap().len(), 3);
        conn_col(&out, "finish_ns").as_u64().unwrap() - start
    };
    let base = fin(0, json!([]), 0);
    assert_eq!(fin(1_000_000, json!([]), 0), base + 1_000_000);
    let step = json!([{"at_ns": 5_000_000, "delay_ns": 2_000_000}]);
    assert_eq!(fin(1_000_000, step.clone(), 0), base + 1_000_000);
    assert_eq!(fin(1_000_000, step, 10_000_000), base + 2_000_000);
}

#[test]
fn bad_connections_are_one_line_errors() {
    let base = conn_scenario(2, Some(10_000), "bg_first", 65_536);
    let err = |f: &dyn Fn(&mut Value)| {
        let mut s = base.clone();
        f(&mut s);
        run_err(&s)
    };
    assert_eq!(
        err(&|s| s["connections"][0]["subflows"][1]["flow"] = json!("nope")),
        "connections[0].subflows[1].flow: no flow 'nope'"
    );
    assert_eq!(
        err(&|s| s["flows"][1]["size_bytes"] = json!(5)),
        "connections[0].subflows[1].flow: flow 's1' must have size_bytes null (the connection has \
         the size)"
    );
    assert_eq!(
        err(&|s| s["connections"][0]["subflows"][1]["flow"] = json!("s0")),
        "connections[0].subflows[1].flow: flow 's0' is already a subflow"
    );
    assert_eq!(
        err(&|s| s["connections"][0]["receive_buffer_bytes"] = json!(0)),
        "connections[0].receive_buffer_bytes: must be > 0"
    );
    assert_eq!(
        err(&|s| s["connections"][0]["dynamic_beta"] = json!(0.5)),
        "connections[0].dynamic_beta: must be a finite number >= 1 (got 0.5)"
    );
    assert_eq!(
        err(&|s| s["connections"][0]["subflows"] = json!([])),
        "connections[0].subflows: needs 1 to 32 subflows"
    );
    assert_eq!(
        err(&|s| s["connections"][0]["scheduler"] = json!({"kind": "bg_first", "x": 1})),
        "connections[0].scheduler: unknown field `x`"
    );
}
