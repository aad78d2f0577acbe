//! BG-first, the paper's Algorithm 1 (Ali, Chen, Khan, IEEE Access 2019, section III-C4): the first
//! (master, BG) subflow whenever it is available, whatever the RTTs; else a WC subflow (with several,
//! the available one with the smallest RTT, LeastRTT's rule; the paper has exactly one).
use super::{lowest_rtt, no_params, SchedulerMaker, SubflowScheduler, SubflowView};
use crate::error::Result;
use serde_json::Value;

/// The BG-first scheduler (no state).
#[derive(Debug, Clone, Copy, Default)]
pub struct BgFirst;

impl SubflowScheduler for BgFirst {
    fn pick(&mut self, subs: &[SubflowView]) -> Option<usize> {
        match subs.first() {
            Some(bg) if bg.available => Some(bg.pos),
            _ => lowest_rtt(subs.iter().skip(1)),
        }
    }
}

/// Parses `{"kind": "bg_first"}`.
pub fn parse(v: &Value) -> Result<SchedulerMaker> {
    no_params(v)?;
    Ok(Box::new(|| Box::new(BgFirst)))
}

#[cfg(test)]
mod tests {
    use super::super::least_rtt::LeastRtt;
    use super::*;

    fn view(pos: usize, srtt: f64, available: bool) -> SubflowView {
        SubflowView {
            pos,
            class: pos.min(1) as u8,
            srtt_ns: Some(srtt),
            cwnd: 10.0,
            in_flight: 0,
            available,
        }
    }

    #[test]
    fn bg_first_prefers_the_master_and_least_rtt_the_fastest() {
        // The WC subflow is faster: LeastRTT takes it, BG-first still takes the BG subflow.
        let subs = [view(0, 300_000.0, true), view(1, 50_000.0, true)];
        assert_eq!(LeastRtt.pick(&subs), Some(1));
        assert_eq!(BgFirst.pick(&subs), Some(0));
        // BG full: both take the WC subflow; nothing available: nothing.
        let subs = [view(0, 300_000.0, false), view(1, 50_000.0, true)];
        assert_eq!(LeastRtt.pick(&subs), Some(1));
        assert_eq!(BgFirst.pick(&subs), Some(1));
        let subs = [view(0, 300_000.0, false), view(1, 50_000.0, false)];
        assert_eq!(LeastRtt.pick(&subs), None);
        assert_eq!(BgFirst.pick(&subs), None);
        // Several WC subflows behind a full BG subflow: the fastest available one.
        let subs = [
            view(0, 1.0, false),
            view(1, 90.0, true),
            view(2, 40.0, true),
            view(3, 10.0, false),
        ];
        assert_eq!(BgFirst.pick(&subs), Some(2));
    }
}
