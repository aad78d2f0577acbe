//! Fair work conservation (Ali, Chen, Khan, IEEE Access 2019, Eq. 7): Reno whose congestion-avoidance
//! increase is `alpha_w = omega^2` segments per RTT instead of 1. The MPTCP BG/WC scheme puts a VM's WC
//! subflows in an engine VM of weight A_l, whose per-VM split gives each of its K active subflows
//! omega = A_l / K, so each increases by (A_l / K)^2 per RTT and the K together are as aggressive as A_l
//! Reno flows. Slow start and the loss response are Reno's.
use super::{check_min_cwnd, config, AnyController, CcCtx, CcMaker, Controller, Reno, Window};
use crate::error::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The fair-WC controller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FairWc {
    /// Floor of the window (segments).
    pub min_cwnd: f64,
}

impl FairWc {
    fn reno(&self) -> Reno {
        Reno {
            min_cwnd: self.min_cwnd,
        }
    }
}

impl Controller for FairWc {
    fn on_ack(&mut self, w: &mut Window, acked: u64, ctx: &CcCtx<'_>) {
        let alpha = ctx.policy.omega * ctx.policy.omega;
        self.reno().increase(w, acked, alpha);
    }

    fn on_loss(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.reno().on_loss(w, ctx);
    }

    fn on_rto(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        self.reno().on_rto(w, ctx);
    }
}

/// The `cc` object of MPTCP BG/WC's fair WC subflows: Reno with an avoidance increase of omega^2 segments per RTT.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FairWcCfg {
    /// `"fair_wc"`.
    #[allow(dead_code)]
    kind: String,
    /// Floor of cwnd after every increase and decrease (segments, >= 1; default 1, the scenario schema's too).
    #[serde(default = "super::default_min_cwnd")]
    min_cwnd_pkts: f64,
}

/// Parses `{"kind": "fair_wc", "min_cwnd_pkts": M}`.
pub fn parse(v: &Value) -> Result<CcMaker> {
    let c: FairWcCfg = config(v)?;
    check_min_cwnd(c.min_cwnd_pkts)?;
    let r = FairWc {
        min_cwnd: c.min_cwnd_pkts,
    };
    Ok(Box::new(move || AnyController::Custom(Box::new(r))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{Policy, Reno};

    fn ctx(omega: f64) -> CcCtx<'static> {
        CcCtx {
            now_ps: 0,
            srtt_ns: Some(100_000.0),
            mss_bytes: 1460,
            policy: Policy {
                theta_bps: 0.0,
                omega,
            },
            peers: &[],
        }
    }

    #[test]
    fn increase_per_rtt_is_omega_squared_and_omega_one_is_reno() {
        // One RTT of avoidance = cwnd acknowledged segments: the window grows by about omega^2.
        for (omega, want) in [(2.5, 6.25), (1.0 / 3.0, 1.0 / 9.0), (1.0, 1.0)] {
            let mut f = FairWc { min_cwnd: 1.0 };
            let mut w = Window {
                cwnd: 1000.0,
                ssthresh: 10.0,
            };
            f.on_ack(&mut w, 1000, &ctx(omega));
            assert!(
                (w.cwnd - 1000.0 - want).abs() < 0.01 * want,
                "{omega}: {w:?}"
            );
        }
        let (mut f, mut r) = (FairWc { min_cwnd: 1.0 }, Reno { min_cwnd: 1.0 });
        let (mut a, mut b) = (
            Window {
                cwnd: 2.0,
                ssthresh: 30.0,
            },
            Window {
                cwnd: 2.0,
                ssthresh: 30.0,
            },
        );
        for i in 0..500u64 {
            if i % 53 == 52 {
                f.on_loss(&mut a, &ctx(1.0));
                r.on_loss(&mut b, &ctx(1.0));
            } else {
                f.on_ack(&mut a, 1 + i % 2, &ctx(1.0));
                r.on_ack(&mut b, 1 + i % 2, &ctx(1.0));
            }
            assert_eq!(a, b);
        }
    }
}
