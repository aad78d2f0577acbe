//! Random Early Detection (Floyd and Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", IEEE/ACM ToN 1(4), 1993), optionally in "gentle" mode (Floyd 2000), as an early-drop
//! stage in front of a drop-tail queue (one per level of a strict-priority discipline).
//!
//! At each arrival the average queue (packets) is updated, `avg = (1 - w_q) avg + w_q q`; after an
//! idle period of `m` packet times it decays as `(1 - w_q)^m avg` (the paper's section 11); an arrival
//! dropped at an empty queue leaves it idle, so the idle period restarts at it (as the paper's
//! pseudo-code, which decays at every arrival to an empty queue, and Linux's `sch_red`, whose dequeue
//! finds the queue empty again). Without that, a level whose average stands above `max_th` when its
//! senders back off would decay by only `w_q` per (retransmitted) arrival and drop them all for seconds.
//! Below
//! `min_th` nothing is dropped; between `min_th` and `max_th` the drop probability rises linearly to
//! `max_p`; above `max_th` every arrival is dropped (gentle: from `max_th` to `2 max_th` the
//! probability rises from `max_p` to 1, above it every arrival is dropped).
//! The probability is spread by the count of packets since the last drop, `p_a = p_b / (1 - count
//! p_b)`, so drops are roughly evenly spaced (the paper's "uniform" variant). Every draw comes from the
//! channel's own named random stream. A packet that passes still needs room under the hard limit.
use crate::rng::stream;
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use schemars::JsonSchema;
use serde::Deserialize;

/// RED's parameters (`queues.switch.red`); thresholds in packets of the level's average queue.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedCfg {
    /// Below this average (packets) nothing is dropped early.
    pub min_th: f64,
    /// At this average the drop probability reaches `max_p` (gentle: 1 at twice it).
    pub max_th: f64,
    /// Drop probability at `max_th`.
    pub max_p: f64,
    /// Weight of the newest queue sample in the average.
    pub w_q: f64,
    /// Gentle mode (default false: drop every arrival above `max_th`, as the original and Cisco's WRED).
    #[serde(default)]
    pub gentle: bool,
}

impl RedCfg {
    /// Why the parameters are unusable, if they are.
    pub fn check(&self) -> Result<(), String> {
        let ok = self.min_th >= 0.0
            && self.max_th > self.min_th
            && self.max_p > 0.0
            && self.max_p <= 1.0
            && self.w_q > 0.0
            && self.w_q <= 1.0;
        if ok {
            Ok(())
        } else {
            Err("needs 0 <= min_th < max_th, 0 < max_p <= 1 and 0 < w_q <= 1".into())
        }
    }
}

/// The early-drop state of one queue.
#[derive(Debug, Clone)]
pub struct Red {
    cfg: RedCfg,
    avg: f64,
    /// Packets since the last early drop (-1: the average was below `min_th`).
    count: i64,
    /// When the queue last became empty (ps; `None`: not empty since the last arrival).
    idle_since: Option<u64>,
    rng: Pcg64Mcg,
}

impl Red {
    /// The state of queue `name` (its random stream) under `seed`.
    pub fn new(cfg: RedCfg, seed: u64, name: &str) -> Red {
        Red {
            cfg,
            avg: 0.0,
            count: -1,
            idle_since: Some(0),
            rng: stream(seed, name),
        }
    }

    /// An arrival at time `now` finds `queued` packets waiting; `pkt_time` is the transmission time of
    /// a full packet (ps; for the idle decay). Returns false if RED drops it early.
    pub fn admit(&mut self, queued: usize, now: u64, pkt_time: u64) -> bool {
        let c = self.cfg;
        match self.idle_since.take() {
            Some(t) if queued == 0 => {
                let m = (now.saturating_sub(t) / pkt_time.max(1)) as i32;
                self.avg *= (1.0 - c.w_q).powi(m.min(1 << 20));
            }
            _ => self.avg = (1.0 - c.w_q) * self.avg + c.w_q * queued as f64,
        }
        let p_b = if self.avg < c.min_th {
            self.count = -1;
            return true;
        } else if self.avg < c.max_th {
            c.max_p * (self.avg - c.min_th) / (c.max_th - c.min_th)
        } else if c.gentle && self.avg < 2.0 * c.max_th {
            c.max_p + (1.0 - c.max_p) * (self.avg - c.max_th) / c.max_th
        } else {
            self.count = 0;
            self.idle_after_drop(queued, now);
            return false;
        };
        self.count += 1;
        let denom = 1.0 - self.count as f64 * p_b;
        let p_a = if denom <= 0.0 {
            1.0
        } else {
            (p_b / denom).min(1.0)
        };
        if self.rng.gen::<f64>() < p_a {
            self.count = 0;
            self.idle_after_drop(queued, now);
            return false;
        }
        true
    }

    /// An arrival at an empty queue was dropped: the queue stays idle from `now`.
    fn idle_after_drop(&mut self, queued: usize, now: u64) {
        if queued == 0 {
            self.idle_since = Some(now);
        }
    }

    /// The queue became empty at `now`.
    pub fn went_idle(&mut self, now: u64) {
        self.idle_since = Some(now);
    }

    /// The current average queue (packets).
    pub fn avg(&self) -> f64 {
        self.avg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOYD: RedCfg = RedCfg {
        min_th: 5.0,
        max_th: 15.0,
        max_p: 0.1,
        w_q: 0.002,
        gentle: true,
    };

    #[test]
    fn no_early_drop_below_min_th_and_all_above_twice_max_th() {
        let mut r = Red::new(FLOYD, 1, "t");
        assert!(
            (0..10_000).all(|i| r.admit(4, i * 12, 12)),
            "a steady 4-packet queue"
        );
        let mut r = Red::new(RedCfg { w_q: 1.0, ..FLOYD }, 1, "t");
        assert!(
            (0..100).all(|i| !r.admit(31, i * 12, 12)),
            "average above 2 max_th"
        );
        let mut r = Red::new(
            RedCfg {
                w_q: 1.0,
                gentle: false,
                ..FLOYD
            },
            1,
            "t",
        );
        assert!(
            (0..100).all(|i| !r.admit(16, i * 12, 12)),
            "not gentle: above max_th"
        );
        let mut r = Red::new(RedCfg { w_q: 1.0, ..FLOYD }, 1, "t");
        assert!(
            (0..100).any(|i| r.admit(16, i * 12, 12)),
            "gentle: some pass above max_th"
        );
    }

    #[test]
    fn drop_rate_between_the_thresholds_follows_the_linear_law() {
        // average pinned at 10 packets: p_b = 0.05; the count spreading makes the gap between drops
        // uniform on 1 .. 1 / p_b - 1, mean 10.
        let mut r = Red::new(RedCfg { w_q: 1.0, ..FLOYD }, 7, "t");
        let n = 200_000;
        let drops = (0..n).filter(|&i| !r.admit(10, i * 12, 12)).count();
        let gap = n as f64 / drops as f64;
        assert!((gap - 10.0).abs() < 0.4, "mean gap {gap}");
    }

    #[test]
    fn the_average_decays_over_idle_time_and_runs_repeat() {
        let mut a = Red::new(RedCfg { w_q: 0.5, ..FLOYD }, 3, "x");
        for i in 0..50 {
            a.admit(20, i, 12);
        }
        let before = a.avg();
        a.went_idle(1_000);
        a.admit(0, 1_000 + 12 * 10, 12);
        assert!(a.avg() < before / 500.0, "{} -> {}", before, a.avg());
        let run = |seed| {
            let mut r = Red::new(RedCfg { w_q: 1.0, ..FLOYD }, seed, "x");
            (0..1000).map(|i| r.admit(12, i, 12)).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn arrivals_dropped_at_an_empty_queue_keep_the_idle_decay() {
        // average far above max_th, then the queue empties; the first arrival is dropped, later ones
        // come 1,000 packet times apart (senders in timeout back-off): the idle time decays the average
        // within a few arrivals, where the per-arrival update alone would need ~ln(avg / max_th) / w_q =
        // 900 of them
        let mut r = Red::new(
            RedCfg {
                gentle: false,
                ..FLOYD
            },
            1,
            "t",
        );
        for i in 0..5_000 {
            r.admit(100, i * 12, 12);
        }
        assert!(r.avg() > 90.0, "{}", r.avg());
        let idle = 5_000 * 12;
        r.went_idle(idle);
        assert!(
            !r.admit(0, idle + 12 * 10, 12),
            "10 packet times idle: still far above max_th"
        );
        let passed = (1..=20).position(|k| r.admit(0, idle + 12 * 10 + k * 12_000, 12));
        assert!(
            matches!(passed, Some(k) if k < 5),
            "{passed:?}, avg {}",
            r.avg()
        );
    }
}
