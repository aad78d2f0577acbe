//! Congestion control: the PACCP law (SPEC section 3, paper Eqs. 14-18) and TCP Reno.
//!
//! Windows are fractional segments (`f64`). The per-RTT rules are applied per acknowledged segment:
//! a per-RTT factor `g` adds `g - 1`, a per-RTT increment `a` adds `a / cwnd`; the regime
//! (`cwnd < wmin`) and the phase (`cwnd < ssthresh` = slow start) are re-evaluated at every segment.
//! Every result is floored at `min_cwnd` (1 segment by default; Reno uses the same floor).

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

/// Phase of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// cwnd < ssthresh.
    SlowStart,
    /// cwnd >= ssthresh.
    CongestionAvoidance,
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

/// Window state of one sender.
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

/// The congestion-control algorithms (an enum, not a trait object).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cc {
    /// PACCP with its rcos.
    Paccp {
        /// Acceleration constant.
        rcos: f64,
        /// Window floor.
        min_cwnd: f64,
    },
    /// TCP Reno (theta and omega ignored).
    Reno {
        /// Window floor.
        min_cwnd: f64,
    },
}

impl Cc {
    /// Window floor.
    pub fn min_cwnd(&self) -> f64 {
        match *self {
            Cc::Paccp { min_cwnd, .. } | Cc::Reno { min_cwnd } => min_cwnd,
        }
    }

    /// One acknowledged segment (no loss); `wmin` and `omega` are the flow's current values.
    pub fn on_ack_segment(&self, w: &mut Window, wmin: f64, omega: f64) {
        match *self {
            Cc::Paccp { rcos, min_cwnd } => {
                let c = w.cwnd;
                let next = match w.phase() {
                    Phase::SlowStart if c < wmin => c + (ss_factor_below(omega, rcos) - 1.0),
                    Phase::SlowStart => c + (ss_factor_above(omega) - 1.0),
                    Phase::CongestionAvoidance if c < wmin => {
                        c + ((rcos + 1.0) / 2.0 - 1.0) + (rcos - 1.0 + omega) / c
                    }
                    Phase::CongestionAvoidance => c + omega / c,
                };
                w.cwnd = next.max(min_cwnd);
            }
            Cc::Reno { min_cwnd } => {
                let c = w.cwnd;
                let next = match w.phase() {
                    Phase::SlowStart => c + 1.0,
                    Phase::CongestionAvoidance => c + 1.0 / c,
                };
                w.cwnd = next.max(min_cwnd);
            }
        }
    }

    /// `acked` segments acknowledged by one ACK (applied one segment at a time).
    pub fn on_ack(&self, w: &mut Window, acked: u64, wmin: f64, omega: f64) {
        for _ in 0..acked {
            self.on_ack_segment(w, wmin, omega);
        }
    }

    /// The decreased window of a loss event in the current phase.
    pub fn loss_window(&self, w: &Window, omega: f64) -> f64 {
        match *self {
            Cc::Paccp { rcos, min_cwnd } => {
                let p = LawParams {
                    wmin: 0.0,
                    omega,
                    rcos,
                    min_cwnd,
                };
                per_rtt(w.phase(), w.cwnd, &p, true)
            }
            Cc::Reno { min_cwnd } => (w.cwnd / 2.0).max(min_cwnd),
        }
    }

    /// A loss event detected by duplicate ACKs: cwnd = ssthresh = the decreased window.
    pub fn on_fast_retransmit(&self, w: &mut Window, omega: f64) {
        let d = self.loss_window(w, omega);
        w.cwnd = d;
        w.ssthresh = d;
    }

    /// A retransmission timeout: ssthresh = the decreased window, cwnd = 1 segment (the floor), slow start.
    pub fn on_rto(&self, w: &mut Window, omega: f64) {
        let d = self.loss_window(w, omega);
        w.ssthresh = d;
        w.cwnd = self.min_cwnd().max(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reno_equals_paccp_with_theta0_omega1() {
        let p = Cc::Paccp {
            rcos: 3.0,
            min_cwnd: 1.0,
        };
        let r = Cc::Reno { min_cwnd: 1.0 };
        let mut a = Window {
            cwnd: 1.0,
            ssthresh: 40.0,
        };
        let mut b = a;
        for i in 0..2000u64 {
            if i % 97 == 96 {
                p.on_fast_retransmit(&mut a, 1.0);
                r.on_fast_retransmit(&mut b, 1.0);
            } else if i == 1500 {
                p.on_rto(&mut a, 1.0);
                r.on_rto(&mut b, 1.0);
            } else {
                p.on_ack(&mut a, 1 + i % 3, 0.0, 1.0);
                r.on_ack(&mut b, 1 + i % 3, 0.0, 1.0);
            }
            assert!(
                (a.cwnd - b.cwnd).abs() <= 1e-12 * b.cwnd,
                "step {i}: {a:?} vs {b:?}"
            );
            assert_eq!(a.ssthresh, b.ssthresh);
        }
    }
}
