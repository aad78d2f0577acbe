//! LIA, the Linked Increases Algorithm of MPTCP (RFC 6356, Raiciu, Handley, Wischik): a coupled
//! congestion control over the subflows of one connection ([`CcCtx::peers`] are the others).
//!
//! In congestion avoidance each acknowledged segment on subflow i adds
//! `min(alpha / cwnd_total, 1 / cwnd_i)` segments, with
//! `alpha = cwnd_total * max_k(cwnd_k / rtt_k^2) / (sum_k cwnd_k / rtt_k)^2` (RFC 6356 section 3, in
//! segments instead of bytes: all subflows share one MSS). Slow start, the loss response (halve the
//! subflow's own window) and the timeout are Reno's, per subflow, as the RFC keeps them. Subflows
//! without an RTT sample yet are left out of the sums; a subflow alone (no peers) is exactly Reno.
use super::{
    check_min_cwnd, config, AnyController, CcCtx, CcMaker, Controller, Phase, Reno, Window,
};
use crate::error::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The LIA controller of one subflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lia {
    /// Floor of the window (segments).
    pub min_cwnd: f64,
}

/// `(cwnd_total, alpha)` over this subflow (`cwnd`, `srtt_ns`) and its peers (RFC 6356 section 3);
/// `None` when this subflow has no RTT sample.
pub fn lia_alpha(cwnd: f64, ctx: &CcCtx<'_>) -> Option<(f64, f64)> {
    let own = ctx.srtt_ns?;
    let subflows = std::iter::once((cwnd, own)).chain(
        ctx.peers
            .iter()
            .filter_map(|p| p.srtt_ns.map(|r| (p.cwnd, r))),
    );
    let (mut total, mut best, mut sum) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (w, rtt) in subflows {
        let rtt = rtt.max(1.0);
        total += w;
        best = best.max(w / (rtt * rtt));
        sum += w / rtt;
    }
    (sum > 0.0).then(|| (total, total * best / (sum * sum)))
}

impl Lia {
    fn reno(&self) -> Reno {
        Reno {
            min_cwnd: self.min_cwnd,
        }
    }
}

impl Controller for Lia {
    fn on_ack(&mut self, w: &mut Window, acked: u64, ctx: &CcCtx<'_>) {
        if w.phase() == Phase::SlowStart || ctx.peers.is_empty() {
            return self.reno().increase(w, acked, 1.0);
        }
        for _ in 0..acked {
            let inc = match lia_alpha(w.cwnd, ctx) {
                Some((total, alpha)) => (alpha / total).min(1.0 / w.cwnd),
                None => 1.0 / w.cwnd,
            };
            w.cwnd = (w.cwnd + inc).max(self.min_cwnd);
        }
    }

    fn on_loss(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.reno().on_loss(w, ctx);
    }

    fn on_rto(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.reno().on_rto(w, ctx);
    }
}

/// The `cc` object of LIA (RFC 6356): coupled increase over the subflows of a connection.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LiaCfg {
    /// `"lia"`.
    #[allow(dead_code)]
    kind: String,
    /// Floor of cwnd after every increase and decrease (segments, >= 1; default 1, the scenario schema's too).
    #[serde(default = "super::default_min_cwnd")]
    min_cwnd_pkts: f64,
}

/// Parses `{"kind": "lia", "min_cwnd_pkts": M}`.
pub fn parse(v: &Value) -> Result<CcMaker> {
    let c: LiaCfg = config(v)?;
    check_min_cwnd(c.min_cwnd_pkts)?;
    let l = Lia {
        min_cwnd: c.min_cwnd_pkts,
    };
    Ok(Box::new(move || AnyController::Custom(Box::new(l))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{PeerWindow, Policy};

    fn ctx(srtt_ns: f64, peers: &[PeerWindow]) -> CcCtx<'_> {
        CcCtx {
            now_ps: 0,
            srtt_ns: Some(srtt_ns),
            mss_bytes: 1460,
            policy: Policy {
                theta_bps: 0.0,
                omega: 1.0,
            },
            peers,
        }
    }

    fn avoid(cwnd: f64) -> Window {
        Window {
            cwnd,
            ssthresh: 1.0,
        }
    }

    /// One RTT of avoidance on a subflow (cwnd acknowledged segments): how much it grew.
    fn one_rtt(w0: f64, c: &CcCtx<'_>) -> f64 {
        let mut l = Lia { min_cwnd: 1.0 };
        let mut w = avoid(w0);
        l.on_ack(&mut w, w0 as u64, c);
        w.cwnd - w0
    }

    #[test]
    fn two_equal_subflows_on_equal_rtts_take_a_quarter_segment_per_rtt_each() {
        // RFC 6356: n equal subflows, equal RTTs: alpha = 1/n, each grows 1/n^2 per RTT, the connection
        // 1/n per RTT: together no more aggressive than one TCP on a shared bottleneck.
        let peers = [PeerWindow {
            cwnd: 100.0,
            srtt_ns: Some(1e5),
            loss_interval: 0.0,
        }];
        let c = ctx(1e5, &peers);
        let (total, alpha) = lia_alpha(100.0, &c).unwrap();
        assert!(
            (total - 200.0).abs() < 1e-9 && (alpha - 0.5).abs() < 1e-9,
            "{alpha}"
        );
        let g = one_rtt(100.0, &c);
        assert!((g - 0.25).abs() < 0.01, "{g}");
    }

    #[test]
    fn increase_never_exceeds_reno_and_alone_is_reno() {
        // A small subflow next to a big one on a shorter RTT: capped at Reno's 1 / cwnd.
        let peers = [PeerWindow {
            cwnd: 5.0,
            srtt_ns: Some(1e6),
            loss_interval: 0.0,
        }];
        let c = ctx(1e4, &peers);
        let g = one_rtt(50.0, &c);
        assert!(g <= 1.0 + 1e-9, "{g}");
        assert!(g > 0.9, "the fast subflow keeps about Reno's increase: {g}");
        // No peers: Reno exactly.
        let mut l = Lia { min_cwnd: 1.0 };
        let mut r = Reno { min_cwnd: 1.0 };
        let (mut a, mut b) = (avoid(10.0), avoid(10.0));
        let c = ctx(1e5, &[]);
        for i in 0..300u64 {
            if i % 41 == 40 {
                l.on_loss(&mut a, &c);
                r.on_loss(&mut b, &c);
            } else {
                l.on_ack(&mut a, 1 + i % 2, &c);
                r.on_ack(&mut b, 1 + i % 2, &c);
            }
            assert_eq!(a, b);
        }
    }

    #[test]
    fn the_slow_subflow_grows_by_its_share_of_alpha() {
        // Subflow 1: 10 segments at 1 ms; subflow 2 (peer): 90 segments at 100 us. alpha is set by the
        // best path (the peer); subflow 1 grows alpha / total per ACK, far below Reno's 1 / cwnd.
        let peers = [PeerWindow {
            cwnd: 90.0,
            srtt_ns: Some(1e5),
            loss_interval: 0.0,
        }];
        let c = ctx(1e6, &peers);
        let (total, alpha) = lia_alpha(10.0, &c).unwrap();
        let want = 100.0 * (90.0 / 1e10) / (10.0f64 / 1e6 + 90.0 / 1e5).powi(2);
        assert!((alpha - want).abs() < 1e-9 * want && total == 100.0);
        let g = one_rtt(10.0, &c);
        assert!((g - 10.0 * alpha / 100.0).abs() < 0.01, "{g}");
        assert!(g < 0.99);
    }
}
