//! LeastRTT, Linux MPTCP's default scheduler (`mptcp_sched.c`, "default"): the available subflow with
//! the smallest smoothed RTT.
use super::{lowest_rtt, no_params, SchedulerMaker, SubflowScheduler, SubflowView};
use crate::error::Result;
use serde_json::Value;

/// The LeastRTT scheduler (no state).
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastRtt;

impl SubflowScheduler for LeastRtt {
    fn pick(&mut self, subs: &[SubflowView]) -> Option<usize> {
        lowest_rtt(subs.iter())
    }
}

/// Parses `{"kind": "least_rtt"}`.
pub fn parse(v: &Value) -> Result<SchedulerMaker> {
    no_params(v)?;
    Ok(Box::new(|| Box::new(LeastRtt)))
}
