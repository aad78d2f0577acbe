//! PACCP (SPEC section 3, paper Eqs. 14-18): the control law and its [`Controller`].
//!
//! The per-RTT rules are applied per acknowledged segment: a per-RTT factor `g` adds `g - 1`, a
//! per-RTT increment `a` adds `a / cwnd`; the regime (`cwnd < wmin`) and the phase
//! (`cwnd < ssthresh` = slow start) are re-evaluated at every segment. Every result is floored at
//! `min_cwnd`. The same law, in fixed point, is `bpf/paccp_law.h`; both are checked against
//! `tests/vectors/paccp_law.json`.
use super::{check_min_cwnd, config, AnyController, CcCtx, CcMaker, Controller, Phase, Window};
use crate::error::{EngineError, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Slow-start factor below Wmin: `(3 rcos - 3^(1-omega)) / 2 + 1`.
pub fn ss_factor_below(omega: f64, rcos: f64) -> f64 {
    (3.0 * rcos - 3f64.powf(1.0 - omega)) / 2.0 + 1.0
}

/// Slow-start factor at or above Wmin: `(3 - 3^(1-omega)) / 2 + 1` (2 for omega = 1).
pub fn ss_factor_above(omega: f64) -> f64 {
    (3.0 - 3f64.powf(1.0 - omega)) / 2.0 + 1.0
}

/// Slow-start loss factor: `1 - 3^(1-omega) / 2` (1/2 for omega = 1).
pub fn ss_factor_loss(omega: f64) -> f64 {
    1.0 - 3f64.powf(1.0 - omega) / 2.0
}

/// Parameters of a flow's law at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LawParams {
    /// Minimum window in segments (theta * srtt / (8 * MSS)).
    pub wmin: f64,
    /// Weight.
    pub omega: f64,
    /// Acceleration constant.
    pub rcos: f64,
    /// Floor of the window.
    pub min_cwnd: f64,
}

/// The closed-form per-RTT rule (one RTT without loss, or one loss event), floored at `min_cwnd`.
pub fn per_rtt(phase: Phase, cwnd: f64, p: &LawParams, loss: bool) -> f64 {
    let w = match (phase, loss) {
        (Phase::SlowStart, true) => ss_factor_loss(p.omega) * cwnd,
        (Phase::SlowStart, false) if cwnd < p.wmin => ss_factor_below(p.omega, p.rcos) * cwnd,
        (Phase::SlowStart, false) => ss_factor_above(p.omega) * cwnd,
        (Phase::CongestionAvoidance, true) => cwnd / 2.0 + (p.omega - 1.0),
        (Phase::CongestionAvoidance, false) if cwnd < p.wmin => {
            (p.rcos + 1.0) * cwnd / 2.0 + (p.rcos - 1.0 + p.omega)
        }
        (Phase::CongestionAvoidance, false) => cwnd + p.omega,
    };
    w.max(p.min_cwnd)
}

/// The Wmin of a flow in segments: `theta * srtt / (8 * MSS)`.
pub fn wmin_segments(theta_bps: f64, srtt_ns: f64, mss_bytes: u64) -> f64 {
    theta_bps * srtt_ns / (8.0 * mss_bytes as f64 * 1e9)
}

/// The PACCP controller: its constants (the per-flow pair comes with each hook's context).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paccp {
    /// Acceleration constant below Wmin (> 1).
    pub rcos: f64,
    /// Floor of the window (segments).
    pub min_cwnd: f64,
}

impl Paccp {
    /// One acknowledged segment (no loss) with the flow's current `wmin` and `omega`.
    #[inline]
    pub fn ack_segment(&self, w: &mut Window, wmin: f64, omega: f64) {
        let (rcos, c) = (self.rcos, w.cwnd);
        let next = match w.phase() {
            Phase::SlowStart if c < wmin => c + (ss_factor_below(omega, rcos) - 1.0),
            Phase::SlowStart => c + (ss_factor_above(omega) - 1.0),
            Phase::CongestionAvoidance if c < wmin => {
                c + ((rcos + 1.0) / 2.0 - 1.0) + (rcos - 1.0 + omega) / c
            }
            Phase::CongestionAvoidance => c + omega / c,
        };
        w.cwnd = next.max(self.min_cwnd);
    }

    /// The decreased window of a loss event in the current phase.
    pub fn loss_window(&self, w: &Window, omega: f64) -> f64 {
        let p = LawParams {
            wmin: 0.0,
            omega,
            rcos: self.rcos,
            min_cwnd: self.min_cwnd,
        };
        per_rtt(w.phase(), w.cwnd, &p, true)
    }
}

impl Controller for Paccp {
    #[inline]
    fn on_ack(&mut self, w: &mut Window, acked: u64, ctx: &CcCtx<'_>) {
        let wmin = ctx.wmin();
        for _ in 0..acked {
            self.ack_segment(w, wmin, ctx.policy.omega);
        }
    }

    fn on_loss(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        let d = self.loss_window(w, ctx.policy.omega);
        w.cwnd = d;
        w.ssthresh = d;
    }

    fn on_rto(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        w.ssthresh = self.loss_window(w, ctx.policy.omega);
        w.cwnd = self.min_cwnd.max(1.0);
    }
}

/// The `cc` object of PACCP.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PaccpCfg {
    /// `"paccp"`.
    #[allow(dead_code)]
    kind: String,
    /// PACCP's rcos (> 1): the growth factor of a flow below its Wmin (SPEC section 3).
    rcos: f64,
    /// Floor of cwnd after every increase and decrease (segments, >= 1; default 1, the scenario schema's too).
    #[serde(default = "super::default_min_cwnd")]
    min_cwnd_pkts: f64,
}

/// Parses `{"kind": "paccp", "rcos": R, "min_cwnd_pkts": M}`.
pub fn parse(v: &Value) -> Result<CcMaker> {
    let c: PaccpCfg = config(v)?;
    if !(c.rcos.is_finite() && c.rcos > 1.0) {
        return Err(EngineError::invalid(
            "cc.rcos",
            format!("must be a finite number > 1 (got {})", c.rcos),
        ));
    }
    check_min_cwnd(c.min_cwnd_pkts)?;
    let p = Paccp {
        rcos: c.rcos,
        min_cwnd: c.min_cwnd_pkts,
    };
    Ok(Box::new(move || AnyController::Paccp(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_in_avoidance_keeps_omega_minus_one_above_half() {
        let p = Paccp {
            rcos: 3.0,
            min_cwnd: 1.0,
        };
        let w = Window {
            cwnd: 20.0,
            ssthresh: 10.0,
        };
        assert_eq!(p.loss_window(&w, 3.0), 12.0);
        assert_eq!(p.loss_window(&w, 1.0), 10.0);
        let w = Window {
            cwnd: 1.5,
            ssthresh: 1.0,
        };
        assert_eq!(p.loss_window(&w, 1.0), 1.0, "floored at min_cwnd");
    }

    #[test]
    fn parse_rejects_bad_constants() {
        let err = |v: Value| parse(&v).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err(serde_json::json!({"kind": "paccp", "rcos": 1.0, "min_cwnd_pkts": 1.0}))
                .starts_with("cc.rcos: must be")
        );
        assert!(
            err(serde_json::json!({"kind": "paccp", "rcos": 3.0, "min_cwnd_pkts": 0.5}))
                .starts_with("cc.min_cwnd_pkts: must be")
        );
        assert!(
            err(serde_json::json!({"kind": "paccp", "rcos": 3.0, "x": 1}))
                .contains("unknown field")
        );
    }
}
