//! Unit tests of the simulation's flow life (VBP splits).
use super::*;

fn scenario() -> crate::config::Scenario {
    let link = r#"{"rate_bps": 1000000000, "delay_ns": 1000, "buffer": {"packets": 10}}"#;
    let flow = |id: &str, size: &str| {
        format!(
            r#"{{"id": "{id}", "src": "l0", "dst": "r0", "size_bytes": {size}, "start_ns": 0,
                "theta_bps": 0, "omega": 1.0, "vm": "vm", "label": "", "changes": []}}"#
        )
    };
    let doc = format!(
        r#"{{"seed": 1, "duration_ns": 1000000,
          "packet": {{"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40}},
          "transport": {{"init_cwnd_pkts": 10.0, "min_rto_ns": 1000000, "initial_rto_ns": 3000000,
            "max_rto_ns": 1000000000, "delayed_ack": false, "delayed_ack_timeout_ns": 1,
            "dupack_threshold": 3, "sack": false, "host_backpressure": false, "host_fq_pkts": 0}},
          "cc": {{"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 1.0}},
          "topology": {{"kind": "dumbbell", "left_hosts": 1, "right_hosts": 1, "access_link": {link},
            "bottleneck_link": {link}, "nic_buffer": {{"packets": 10}}}},
          "routing": {{"kind": "ecmp"}},
          "vms": [{{"id": "vm", "host": "l0", "label": "MRG", "theta_bps": 900, "omega": 3.0}}],
          "flows": [{}, {}, {}],
          "arrivals": [],
          "sampling": {{"interval_ns": 1000, "flows": "none"}}}}"#,
        flow("a", "null"),
        flow("b", "1000"),
        flow("c", "1000")
    );
    crate::parse(&doc).expect("scenario")
}

#[test]
fn vbp_resplits_on_start_and_finish() {
    let mut sim = Simulation::new(scenario()).expect("valid");
    let pair = |s: &Simulation, i: usize| (s.flows[i].policy.theta_bps, s.flows[i].policy.omega);
    sim.start_flow(0);
    assert_eq!(pair(&sim, 0), (900.0, 3.0));
    sim.start_flow(1);
    sim.start_flow(2);
    for i in 0..3 {
        assert_eq!(pair(&sim, i), (300.0, 1.0));
    }
    sim.finish_flow(1);
    assert_eq!(pair(&sim, 0), (450.0, 1.5));
    assert_eq!(pair(&sim, 2), (450.0, 1.5));
    sim.finish_flow(2);
    assert_eq!(pair(&sim, 0), (900.0, 3.0));
}
