//! OLIA, the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic, Upadhyay, Le Boudec,
//! "MPTCP is not Pareto-optimal", CoNEXT 2012; draft-khalili-mptcp-congestion-control): a coupled
//! congestion control over the subflows of one connection ([`CcCtx::peers`] are the others).
//!
//! In congestion avoidance each acknowledged segment on path r adds
//! `(w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + alpha_r / w_r` segments. With `l_p` the segments a path
//! delivered between its last two losses or since its last loss, whichever is larger, the *best* paths
//! maximise `l_p^2 / rtt_p` and the *max-window* paths maximise `w_p`; if some best path is not a
//! max-window path ("collected"), `alpha_r = 1 / (n |collected|)` on those, `-1 / (n |max|)` on the
//! max-window paths, 0 elsewhere; otherwise 0 everywhere (n = number of paths). Slow start, the loss
//! response (halve the path's own window) and the timeout are Reno's. Paths without an RTT sample are
//! left out; a path alone is exactly Reno.
use super::{
    check_min_cwnd, config, AnyController, CcCtx, CcMaker, Controller, Phase, Reno, Window,
};
use crate::error::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The OLIA controller of one subflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Olia {
    /// Floor of the window (segments).
    pub min_cwnd: f64,
    /// Segments delivered since the last loss.
    pub since_loss: f64,
    /// Segments delivered between the last two losses.
    pub between_losses: f64,
}

impl Olia {
    /// A controller with no loss history.
    pub fn new(min_cwnd: f64) -> Olia {
        Olia {
            min_cwnd,
            since_loss: 0.0,
            between_losses: 0.0,
        }
    }

    fn reno(&self) -> Reno {
        Reno {
            min_cwnd: self.min_cwnd,
        }
    }

    fn loss(&mut self) {
        self.between_losses = self.since_loss;
        self.since_loss = 0.0;
    }
}

/// One path as OLIA sees it: window, RTT (ns), l (segments).
#[derive(Debug, Clone, Copy)]
struct PathView {
    w: f64,
    rtt: f64,
    l: f64,
}

/// OLIA's per-ACK increase of path 0 of `paths` (in segments); the module docstring's rule.
fn olia_increase(paths: &[PathView]) -> f64 {
    let me = paths[0];
    let sum: f64 = paths.iter().map(|p| p.w / p.rtt).sum();
    let coupled = (me.w / (me.rtt * me.rtt)) / (sum * sum);
    let n = paths.len() as f64;
    let wmax = paths.iter().map(|p| p.w).fold(0.0, f64::max);
    let qual = |p: &PathView| p.l * p.l / p.rtt;
    let qbest = paths.iter().map(qual).fold(0.0, f64::max);
    let is_max = |p: &PathView| p.w >= wmax;
    let is_best = |p: &PathView| qual(p) >= qbest;
    let collected = paths.iter().filter(|p| is_best(p) && !is_max(p)).count() as f64;
    let maxw = paths.iter().filter(|p| is_max(p)).count() as f64;
    let alpha = if collected == 0.0 {
        0.0
    } else if is_best(&me) && !is_max(&me) {
        1.0 / (n * collected)
    } else if is_max(&me) {
        -1.0 / (n * maxw)
    } else {
        0.0
    };
    coupled + alpha / me.w
}

impl Controller for Olia {
    fn on_ack(&mut self, w: &mut Window, acked: u64, ctx: &CcCtx<'_>) {
        self.since_loss += acked as f64;
        let Some(own) = ctx.srtt_ns.filter(|_| !ctx.peers.is_empty()) else {
            return self.reno().increase(w, acked, 1.0);
        };
        if w.phase() == Phase::SlowStart {
            return self.reno().increase(w, acked, 1.0);
        }
        let mut paths = Vec::with_capacity(ctx.peers.len() + 1);
        for _ in 0..acked {
            paths.clear();
            paths.push(PathView {
                w: w.cwnd,
                rtt: own.max(1.0),
                l: self.since_loss.max(self.between_losses),
            });
            paths.extend(ctx.peers.iter().filter_map(|p| {
                p.srtt_ns.map(|r| PathView {
                    w: p.cwnd,
                    rtt: r.max(1.0),
                    l: p.loss_interval,
                })
            }));
            w.cwnd = (w.cwnd + olia_increase(&paths)).max(self.min_cwnd);
        }
    }

    fn on_loss(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.loss();
        self.reno().on_loss(w, ctx);
    }

    fn on_rto(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.loss();
        self.reno().on_rto(w, ctx);
    }

    fn loss_interval(&self) -> f64 {
        self.since_loss.max(self.between_losses)
    }
}

/// The `cc` object of OLIA (Khalili et al. 2012): coupled increase over the subflows of a connection.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OliaCfg {
    /// `"olia"`.
    #[allow(dead_code)]
    kind: String,
    /// Floor of cwnd after every increase and decrease (segments, >= 1; default 1, the scenario schema's too).
    #[serde(default = "super::default_min_cwnd")]
    min_cwnd_pkts: f64,
}

/// Parses `{"kind": "olia", "min_cwnd_pkts": M}`.
pub fn parse(v: &Value) -> Result<CcMaker> {
    let c: OliaCfg = config(v)?;
    check_min_cwnd(c.min_cwnd_pkts)?;
    let m = c.min_cwnd_pkts;
    Ok(Box::new(move || {
        AnyController::Custom(Box::new(Olia::new(m)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{PeerWindow, Policy};

    fn pv(w: f64, rtt: f64, l: f64) -> PathView {
        PathView { w, rtt, l }
    }

    #[test]
    fn equal_paths_share_the_coupled_term_only() {
        // Two identical paths: alpha = 0 (no collected path), each adds (w / rtt^2) / (2 w / rtt)^2 =
        // 1 / (4 w) per ACK: a quarter segment per RTT, as LIA, half a TCP for the connection.
        let inc = olia_increase(&[pv(100.0, 1e5, 500.0), pv(100.0, 1e5, 500.0)]);
        assert!((inc - 1.0 / 400.0).abs() < 1e-12, "{inc}");
    }

    #[test]
    fn a_best_path_with_a_small_window_gains_and_the_max_window_path_gives_up() {
        // Path 0: small window but the best loss interval (l^2 / rtt); path 1: the largest window.
        let a = [pv(10.0, 1e5, 1000.0), pv(50.0, 1e5, 100.0)];
        let b = [a[1], a[0]];
        let coupled0 = (10.0 / 1e10) / (60.0f64 / 1e5).powi(2);
        let coupled1 = (50.0 / 1e10) / (60.0f64 / 1e5).powi(2);
        let i0 = olia_increase(&a);
        let i1 = olia_increase(&b);
        assert!((i0 - (coupled0 + 0.5 / 10.0)).abs() < 1e-12, "{i0}");
        assert!((i1 - (coupled1 - 0.5 / 50.0)).abs() < 1e-12, "{i1}");
    }

    #[test]
    fn loss_history_and_reno_when_alone() {
        let c = CcCtx {
            now_ps: 0,
            srtt_ns: Some(1e5),
            mss_bytes: 1460,
            policy: Policy {
                theta_bps: 0.0,
                omega: 1.0,
            },
            peers: &[],
        };
        let (mut o, mut r) = (Olia::new(1.0), Reno { min_cwnd: 1.0 });
        let (mut a, mut b) = (
            Window {
                cwnd: 4.0,
                ssthresh: 20.0,
            },
            Window {
                cwnd: 4.0,
                ssthresh: 20.0,
            },
        );
        for i in 0..400u64 {
            if i % 37 == 36 {
                o.on_loss(&mut a, &c);
                r.on_loss(&mut b, &c);
            } else {
                o.on_ack(&mut a, 1, &c);
                r.on_ack(&mut b, 1, &c);
            }
            assert_eq!(a, b);
        }
        // 400 steps, a loss every 37th: the last loss at step 369 after 36 ACKs; 30 ACKs since.
        assert_eq!((o.between_losses, o.since_loss), (36.0, 30.0));
        assert_eq!(o.loss_interval(), 36.0);
        // With a peer, the increase uses the coupled rule (smaller than Reno's for equal paths).
        let peers = [PeerWindow {
            cwnd: a.cwnd,
            srtt_ns: Some(1e5),
            loss_interval: 36.0,
        }];
        let cp = CcCtx { peers: &peers, ..c };
        let before = a;
        o.on_ack(&mut a, 1, &cp);
        r.on_ack(&mut b, 1, &c);
        assert!(a.cwnd - before.cwnd < b.cwnd - before.cwnd);
    }
}
