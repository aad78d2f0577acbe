//! Unit tests of the simulation's flow life (VBP splits).
use super::*;
use crate::net::Pkt;

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

/// One NewReno (no SACK) Reno flow with a 40-segment initial window on a fast dumbbell whose queues
/// never drop; ACKs are fed to the sender by hand.
fn recovery_sim(prr: bool) -> Simulation {
    let link = r#"{"rate_bps": 100000000000, "delay_ns": 1000, "buffer": {"packets": 1000}}"#;
    let doc = format!(
        r#"{{"seed": 1, "duration_ns": 1000000000,
          "packet": {{"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40}},
          "transport": {{"init_cwnd_pkts": 40.0, "min_rto_ns": 200000000, "initial_rto_ns": 1000000000,
            "max_rto_ns": 1000000000, "delayed_ack": false, "delayed_ack_timeout_ns": 1,
            "dupack_threshold": 3, "sack": false, "host_backpressure": false, "host_fq_pkts": 0,
            "prr": {prr}}},
          "cc": {{"kind": "reno", "min_cwnd_pkts": 1.0}},
          "topology": {{"kind": "dumbbell", "left_hosts": 1, "right_hosts": 1, "access_link": {link},
            "bottleneck_link": {link}, "nic_buffer": {{"packets": 1000}}}},
          "routing": {{"kind": "ecmp"}}, "vms": [],
          "flows": [{{"id": "a", "src": "l0", "dst": "r0", "size_bytes": null, "start_ns": 0,
                "theta_bps": 0, "omega": 1.0, "vm": null, "label": "", "changes": []}}],
          "arrivals": [],
          "sampling": {{"interval_ns": 1000000, "flows": "none"}}}}"#
    );
    let mut sim = Simulation::new(crate::parse(&doc).expect("scenario")).expect("valid");
    sim.start_flow(0);
    sim
}

/// Feeds `n` duplicate ACKs for segment 0 (segment 0 lost, the others received); returns the new
/// segments (above the initial window) sent after each one.
fn dupacks_new_segments(sim: &mut Simulation, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    for k in 0..n {
        let pkt = Pkt {
            flow: 0,
            pos: sim.flows[0].info.route_ack,
            is_ack: true,
            class: 0,
            size: 40,
            seq: 0,
            ts: 0,
            sack: crate::sack::SackOpt::NONE,
            ce: false,
        };
        sim.q.now = 1_000_000 * (k as u64 + 1);
        let (flows, mut cx) = ctx!(sim);
        flows[0].on_ack(0, pkt, &mut cx);
        out.push(sim.flows[0].snd.snd_nxt - 40);
    }
    out
}

#[test]
fn newreno_recovery_sends_in_proportion_to_deliveries_with_prr() {
    // Window 40, one loss: ssthresh 20, RecoverFS 40. PRR (RFC 6937): after the k-th duplicate ACK of
    // the recovery about k * 20 / 40 segments have been sent (the retransmission first), spread over
    // the recovery. RFC 6582's inflation sends nothing new until the 20th-odd duplicate ACK, then one
    // per ACK.
    let mut sim = recovery_sim(true);
    assert_eq!(sim.flows[0].snd.snd_nxt, 40);
    let new = dupacks_new_segments(&mut sim, 37);
    let s = &sim.flows[0].snd;
    assert!(s.in_recovery);
    assert_eq!(s.retransmits, 1, "one fast retransmission");
    // Limited transmit (RFC 3042): the first two duplicate ACKs send one new segment each.
    assert_eq!(&new[..2], &[1, 2]);
    // k-th duplicate ACK of the recovery (k = 1 is the 3rd duplicate ACK): ceil(k / 2) segments sent in
    // the recovery, the first of them the retransmission.
    for (i, &n) in new.iter().enumerate().skip(2) {
        let k = i as u64 - 1;
        assert_eq!(n, 2 + k.div_ceil(2) - 1, "after duplicate ACK {}", i + 1);
    }
    let mut old = recovery_sim(false);
    let old_new = dupacks_new_segments(&mut old, 37);
    assert_eq!(
        old_new[18], 0,
        "inflation sends nothing new in the first half of the recovery"
    );
    assert!(new[18] >= 8);
}

#[test]
fn an_ack_echoes_the_ce_mark_of_the_data_it_acknowledges() {
    let mut sim = recovery_sim(true);
    let ch = sim.routes[sim.flows[0].info.route_ack as usize] as usize;
    for (seq, ce) in [(0, true), (1, false), (2, true)] {
        let pkt = Pkt {
            flow: 0,
            pos: 0,
            is_ack: false,
            class: 0,
            size: 1500,
            seq,
            ts: seq,
            sack: crate::sack::SackOpt::NONE,
            ce,
        };
        let (flows, mut cx) = ctx!(sim);
        flows[0].on_data(0, pkt, &mut cx);
        let (ack, _) = sim.channels[ch].pop_head(&mut sim.slab).expect("the ACK");
        assert!(ack.is_ack);
        assert_eq!((ack.seq, ack.ce), (seq + 1, ce));
    }
}
