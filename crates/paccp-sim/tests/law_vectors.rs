//! Conformance of the control law against tests/vectors/paccp_law.json (tools/gen_law_vectors.py).
use paccp_sim::cc::{
    per_rtt, wmin_segments, CcCtx, Controller, LawParams, Paccp, Phase, Policy, Window,
};
use serde_json::Value;
use std::path::PathBuf;

fn vectors() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/paccp_law.json");
    let text =
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    serde_json::from_str(&text).expect("vectors JSON")
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

#[test]
fn per_rtt_and_per_ack_rules_match_the_vectors() {
    let v = vectors();
    let tol = v["float_tolerance_rel"].as_f64().unwrap();
    let min_cwnd = v["min_cwnd"].as_f64().unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() > 100);
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let f = |k: &str| c[k].as_f64().unwrap();
        let (cwnd, wmin, omega, rcos) = (f("cwnd"), f("wmin"), f("omega"), f("rcos"));
        let ss = c["phase"] == "ss";
        let loss = c["event"] == "loss";
        let phase = if ss {
            Phase::SlowStart
        } else {
            Phase::CongestionAvoidance
        };
        let p = LawParams {
            wmin,
            omega,
            rcos,
            min_cwnd,
        };
        // Closed-form per-RTT rule.
        let want = c["per_rtt"]["cwnd"].as_f64().unwrap();
        let got = per_rtt(phase, cwnd, &p, loss);
        assert!(close(got, want, tol), "{id}: per_rtt {got} != {want}");
        // The CC driven per ACK (ssthresh infinite in slow start, at or below cwnd in avoidance).
        let mut cc = Paccp { rcos, min_cwnd };
        // theta chosen so that theta * srtt / (8 MSS) = wmin (up to rounding).
        let ctx = CcCtx {
            now_ps: 0,
            srtt_ns: Some(1e9),
            mss_bytes: 1,
            policy: Policy {
                theta_bps: wmin * 8.0,
                omega,
            },
            peers: &[],
        };
        let mut w = Window {
            cwnd,
            ssthresh: if ss { f64::INFINITY } else { cwnd },
        };
        let pa = &c["per_ack"];
        if loss {
            cc.on_loss(&mut w, &ctx);
            let want_ss = pa["ssthresh"].as_f64().unwrap();
            assert!(
                close(w.ssthresh, want_ss, tol),
                "{id}: ssthresh {} != {want_ss}",
                w.ssthresh
            );
        } else {
            let acks = pa["acks"].as_u64().unwrap();
            // The per-segment rule with the vector's wmin (exact), and the trait hook, whose wmin
            // comes from (theta, srtt, mss), within the tolerance.
            let mut via_hook = w;
            for _ in 0..acks {
                cc.ack_segment(&mut w, wmin, omega);
                cc.on_ack(&mut via_hook, 1, &ctx);
            }
            let want = pa["cwnd"].as_f64().unwrap();
            assert!(
                close(via_hook.cwnd, want, tol),
                "{id}: on_ack hook {} != {want}",
                via_hook.cwnd
            );
        }
        let want = pa["cwnd"].as_f64().unwrap();
        assert!(
            close(w.cwnd, want, tol),
            "{id}: per_ack {} != {want}",
            w.cwnd
        );
    }
}

#[test]
fn wmin_matches_the_vectors() {
    let v = vectors();
    let tol = v["float_tolerance_rel"].as_f64().unwrap();
    for c in v["wmin_cases"].as_array().unwrap() {
        let theta = c["theta_bps"].as_u64().unwrap() as f64;
        let srtt = c["srtt_ns"].as_u64().unwrap() as f64;
        let mss = c["mss_bytes"].as_u64().unwrap();
        let want = c["wmin"].as_f64().unwrap();
        let got = wmin_segments(theta, srtt, mss);
        assert!(
            close(got, want, tol) || (want == 0.0 && got == 0.0),
            "{c}: {got} != {want}"
        );
    }
}
