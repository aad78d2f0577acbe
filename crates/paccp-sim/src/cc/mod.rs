//! Congestion control: a [`Controller`] trait with its own per-flow state, one file per algorithm,
//! dispatched through the [`AnyController`] enum (no dynamic call for the built-in algorithms).
//!
//! Windows are fractional segments (`f64`) held by the sender in a [`Window`]; the transport calls the
//! hooks with a [`CcCtx`] (time, smoothed RTT, MSS, the flow's policy). Loss recovery (which segments to
//! retransmit, window inflation, the end of a recovery) belongs to the transport, not to the controller.
//!
//! Adding an algorithm (docs/adding-a-scheme.md): a new file with a type implementing [`Controller`]
//! and a `parse` function reading its `cc` object, plus one line in [`builtin`] (or, from outside the
//! crate, [`crate::Registry::register_cc`], which wraps it in [`AnyController::Custom`]).
use crate::error::{EngineError, Result};
use serde_json::Value;

pub mod fair_wc;
pub mod lia;
pub mod olia;
pub mod paccp;
pub mod reno;

pub use paccp::{
    per_rtt, ss_factor_above, ss_factor_below, ss_factor_loss, wmin_segments, LawParams, Paccp,
};
pub use reno::Reno;

/// Phase of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// cwnd < ssthresh.
    SlowStart,
    /// cwnd >= ssthresh.
    CongestionAvoidance,
}

/// Window state of one sender (segments).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Congestion window (segments).
    pub cwnd: f64,
    /// Slow-start threshold (segments; infinite at start).
    pub ssthresh: f64,
}

impl Window {
    /// Current phase.
    pub fn phase(&self) -> Phase {
        if self.cwnd < self.ssthresh {
            Phase::SlowStart
        } else {
            Phase::CongestionAvoidance
        }
    }
}

/// A flow's current policy: its (theta, omega) pair (after the VBP split or an FBP change).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Minimum rate in bit/s.
    pub theta_bps: f64,
    /// Weight.
    pub omega: f64,
}

impl Policy {
    /// The flow's Wmin in segments at smoothed RTT `srtt_ns` (0 before the first RTT sample).
    pub fn wmin(&self, srtt_ns: Option<f64>, mss_bytes: u64) -> f64 {
        match srtt_ns {
            Some(s) => wmin_segments(self.theta_bps, s, mss_bytes),
            None => 0.0,
        }
    }
}

/// The window of another subflow of the same connection (for coupled multipath algorithms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeerWindow {
    /// Its congestion window (segments).
    pub cwnd: f64,
    /// Its smoothed RTT (ns), if sampled.
    pub srtt_ns: Option<f64>,
    /// Its controller's [`Controller::loss_interval`] (segments; OLIA's l).
    pub loss_interval: f64,
}

/// What a controller sees at a hook besides its window.
#[derive(Debug, Clone, Copy)]
pub struct CcCtx<'a> {
    /// Current time (ps).
    pub now_ps: u64,
    /// Smoothed RTT (ns), `None` before the first sample.
    pub srtt_ns: Option<f64>,
    /// Maximum segment size (bytes).
    pub mss_bytes: u64,
    /// The flow's current (theta, omega).
    pub policy: Policy,
    /// The other subflows of the flow's connection (empty for a single-path flow).
    pub peers: &'a [PeerWindow],
}

impl CcCtx<'_> {
    /// The flow's Wmin in segments (0 before the first RTT sample).
    pub fn wmin(&self) -> f64 {
        self.policy.wmin(self.srtt_ns, self.mss_bytes)
    }
}

/// A congestion-control algorithm with its per-flow state (smoltcp `Controller` style). Every hook
/// has a no-op default.
pub trait Controller: std::fmt::Debug {
    /// `acked` new segments acknowledged by one ACK outside loss recovery.
    fn on_ack(&mut self, _w: &mut Window, _acked: u64, _ctx: &CcCtx<'_>) {}
    /// A loss event detected by duplicate ACKs or SACK (fast retransmit): set the decreased window.
    fn on_loss(&mut self, _w: &mut Window, _ctx: &CcCtx<'_>) {}
    /// A retransmission timeout: set ssthresh and restart from a small window.
    fn on_rto(&mut self, _w: &mut Window, _ctx: &CcCtx<'_>) {}
    /// A data segment `seg` is about to be sent.
    fn on_send(&mut self, _w: &mut Window, _seg: u64, _ctx: &CcCtx<'_>) {}
    /// Segments delivered between the last two losses or since the last one, whichever is larger,
    /// for controllers that track it (OLIA); what its peers see in [`PeerWindow::loss_interval`].
    fn loss_interval(&self) -> f64 {
        0.0
    }
}

/// The controller of one flow: the built-in algorithms as variants (static dispatch), plus
/// [`AnyController::Custom`] for algorithms registered from outside the crate.
#[derive(Debug)]
pub enum AnyController {
    /// TCP Reno.
    Reno(Reno),
    /// PACCP (SPEC section 3).
    Paccp(Paccp),
    /// An algorithm registered with [`crate::Registry::register_cc`].
    Custom(Box<dyn Controller>),
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyController::Reno($c) => $e,
            AnyController::Paccp($c) => $e,
            AnyController::Custom($c) => $e,
        }
    };
}

impl Controller for AnyController {
    #[inline]
    fn on_ack(&mut self, w: &mut Window, acked: u64, ctx: &CcCtx<'_>) {
        dispatch!(self, c => c.on_ack(w, acked, ctx))
    }
    #[inline]
    fn on_loss(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        dispatch!(self, c => c.on_loss(w, ctx))
    }
    #[inline]
    fn on_rto(&mut self, w: &mut Window, ctx: &CcCtx<'_>) {
        dispatch!(self, c => c.on_rto(w, ctx))
    }
    #[inline]
    fn on_send(&mut self, w: &mut Window, seg: u64, ctx: &CcCtx<'_>) {
        dispatch!(self, c => c.on_send(w, seg, ctx))
    }
    #[inline]
    fn loss_interval(&self) -> f64 {
        dispatch!(self, c => c.loss_interval())
    }
}

/// Makes one flow's controller (called once per flow).
pub type CcMaker = Box<dyn Fn() -> AnyController>;

/// Reads a scenario's `cc` object (`kind` included) and returns the maker of its controllers; errors
/// name the field (`cc.rcos: ...`).
pub type CcParser = fn(&Value) -> Result<CcMaker>;

/// The built-in algorithms: `(kind, parser)`. One line per algorithm.
pub fn builtin() -> Vec<(&'static str, CcParser)> {
    vec![
        ("reno", reno::parse),
        ("paccp", paccp::parse),
        ("fair_wc", fair_wc::parse),
        ("lia", lia::parse),
        ("olia", olia::parse),
    ]
}

/// Deserialises a `cc` object into an algorithm's own config type, naming `cc` in the error.
pub fn config<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| EngineError::Parse(format!("cc: {e}")))
}

/// The default window floor of `cc.min_cwnd_pkts` (1 segment; the scenario schema's default too).
pub fn default_min_cwnd() -> f64 {
    1.0
}

/// `v` must be a finite number >= 1 (a window floor in segments); the words of the scenario schema.
pub fn check_min_cwnd(v: f64) -> Result<()> {
    if v.is_finite() && v >= 1.0 {
        Ok(())
    } else {
        Err(EngineError::invalid(
            "cc.min_cwnd_pkts",
            format!("must be a finite number >= 1 (got {v})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reno_equals_paccp_with_theta0_omega1() {
        let mut p = AnyController::Paccp(Paccp {
            rcos: 3.0,
            min_cwnd: 1.0,
        });
        let mut r = AnyController::Reno(Reno { min_cwnd: 1.0 });
        let ctx = CcCtx {
            now_ps: 0,
            srtt_ns: Some(100_000.0),
            mss_bytes: 1460,
            policy: Policy {
                theta_bps: 0.0,
                omega: 1.0,
            },
            peers: &[],
        };
        let mut a = Window {
            cwnd: 1.0,
            ssthresh: 40.0,
        };
        let mut b = a;
        for i in 0..2000u64 {
            if i % 97 == 96 {
                p.on_loss(&mut a, &ctx);
                r.on_loss(&mut b, &ctx);
            } else if i == 1500 {
                p.on_rto(&mut a, &ctx);
                r.on_rto(&mut b, &ctx);
            } else {
                p.on_ack(&mut a, 1 + i % 3, &ctx);
                r.on_ack(&mut b, 1 + i % 3, &ctx);
            }
            assert!(
                (a.cwnd - b.cwnd).abs() <= 1e-12 * b.cwnd,
                "step {i}: {a:?} vs {b:?}"
            );
            assert_eq!(a.ssthresh, b.ssthresh);
        }
    }
}
