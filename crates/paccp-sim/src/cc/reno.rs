//! TCP Reno: slow start adds one segment per acknowledged segment, avoidance `1 / cwnd`, a loss halves
//! the window (floored at `min_cwnd`). Exactly PACCP with theta = 0 and omega = 1.
use super::{check_min_cwnd, config, AnyController, CcCtx, CcMaker, Controller, Phase, Window};
use crate::error::Result;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The Reno controller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reno {
    /// Floor of the window (segments).
    pub min_cwnd: f64,
}

impl Reno {
    /// Per acknowledged segment: slow start adds one, avoidance `alpha / cwnd` (alpha segments per RTT;
    /// Reno's alpha is 1), floored at `min_cwnd`. Variants with another increase call this.
    #[inline]
    pub fn increase(&self, w: &mut Window, acked: u64, alpha: f64) {
        for _ in 0..acked {
            let c = w.cwnd;
            let next = match w.phase() {
                Phase::SlowStart => c + 1.0,
                Phase::CongestionAvoidance => c + alpha / c,
            };
            w.cwnd = next.max(self.min_cwnd);
        }
    }
}

impl Controller for Reno {
    #[inline]
    fn on_ack(&mut self, w: &mut Window, acked: u64, _ctx: &CcCtx<'_>) {
        self.increase(w, acked, 1.0);
    }

    fn on_loss(&mut self, w: &mut Window, _ctx: &CcCtx<'_>) {
        let d = (w.cwnd / 2.0).max(self.min_cwnd);
        w.cwnd = d;
        w.ssthresh = d;
    }

    fn on_rto(&mut self, w: &mut Window, _ctx: &CcCtx<'_>) {
        w.ssthresh = (w.cwnd / 2.0).max(self.min_cwnd);
        w.cwnd = self.min_cwnd.max(1.0);
    }
}

/// The `cc` object of Reno.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RenoCfg {
    /// `"reno"`.
    #[allow(dead_code)]
    kind: String,
    /// Floor of cwnd after every increase and decrease (segments, >= 1; default 1, the scenario schema's too).
    #[serde(default = "super::default_min_cwnd")]
    min_cwnd_pkts: f64,
}

/// Parses `{"kind": "reno", "min_cwnd_pkts": M}`.
pub fn parse(v: &Value) -> Result<CcMaker> {
    let c: RenoCfg = config(v)?;
    check_min_cwnd(c.min_cwnd_pkts)?;
    let r = Reno {
        min_cwnd: c.min_cwnd_pkts,
    };
    Ok(Box::new(move || AnyController::Reno(r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::Policy;

    #[test]
    fn slow_start_doubles_per_window_and_loss_halves() {
        let mut r = Reno { min_cwnd: 1.0 };
        let ctx = CcCtx {
            now_ps: 0,
            srtt_ns: None,
            mss_bytes: 1460,
            policy: Policy {
                theta_bps: 0.0,
                omega: 1.0,
            },
            peers: &[],
        };
        let mut w = Window {
            cwnd: 10.0,
            ssthresh: f64::INFINITY,
        };
        r.on_ack(&mut w, 10, &ctx);
        assert_eq!(w.cwnd, 20.0);
        r.on_loss(&mut w, &ctx);
        assert_eq!((w.cwnd, w.ssthresh), (10.0, 10.0));
        r.on_ack(&mut w, 10, &ctx);
        assert!((w.cwnd - 11.0).abs() < 0.05, "about one segment per window");
        r.on_rto(&mut w, &ctx);
        assert_eq!(w.cwnd, 1.0);
    }
}
