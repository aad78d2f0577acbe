//! Subflow schedulers: which subflow of a connection carries its next data segment.
//!
//! A scheduler sees one [`SubflowView`] per subflow (in the connection's order: position 0 is the first,
//! "master", subflow) and returns the position of an *available* one, or `None` to send nothing now.
//! The connection ([`super::Connection::push`]) asks again after every segment, so a scheduler decides
//! one segment at a time; a subflow that could not take a segment (its NIC queue was full, its
//! recovery held it back) is then shown unavailable until the next push.
//!
//! Adding a scheduler (docs/adding-a-scheme.md): a new file with a type implementing
//! [`SubflowScheduler`] and a `parse` function reading its `scheduler` object, plus one line in
//! [`builtin`] (or, from outside the crate, [`crate::Registry::register_scheduler`]).
use crate::error::{EngineError, Result};
use serde_json::Value;

pub mod bg_first;
pub mod least_rtt;

/// What a scheduler knows of one subflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubflowView {
    /// Position in the connection (0 = the first subflow listed, MPTCP's master subflow).
    pub pos: usize,
    /// Class / mark of its packets.
    pub class: u8,
    /// Smoothed RTT (ns), `None` before the first sample.
    pub srtt_ns: Option<f64>,
    /// Congestion window (segments).
    pub cwnd: f64,
    /// Segments sent and not yet acknowledged.
    pub in_flight: u64,
    /// It may take a new segment now: started, not finished, window room, nothing granted unsent, its
    /// NIC queue not full (Linux's `mptcp_is_available` with TCP small queues).
    pub available: bool,
}

/// A subflow scheduler (one per connection, with its own state).
pub trait SubflowScheduler: std::fmt::Debug {
    /// The position of the subflow that carries the next segment (an available one), or `None`.
    fn pick(&mut self, subs: &[SubflowView]) -> Option<usize>;
}

/// Makes one connection's scheduler.
pub type SchedulerMaker = Box<dyn Fn() -> Box<dyn SubflowScheduler>>;

/// Reads a `scheduler` object (`kind` included) and returns the maker of its schedulers; errors name
/// the field relative to the object (`scheduler: ...`).
pub type SchedulerParser = fn(&Value) -> Result<SchedulerMaker>;

/// The built-in schedulers: `(kind, parser)`. One line per scheduler.
pub fn builtin() -> Vec<(&'static str, SchedulerParser)> {
    vec![
        ("least_rtt", least_rtt::parse),
        ("bg_first", bg_first::parse),
    ]
}

/// Rejects any key but `kind` in a scheduler object without parameters.
pub fn no_params(v: &Value) -> Result<()> {
    match v.as_object() {
        Some(o) => match o.keys().find(|k| k.as_str() != "kind") {
            Some(k) => Err(EngineError::Parse(format!(
                "scheduler: unknown field `{k}`"
            ))),
            None => Ok(()),
        },
        None => Err(EngineError::Parse("scheduler: must be an object".into())),
    }
}

/// The available subflow with the smallest smoothed RTT among `subs` (no sample counts as 0, as in
/// Linux, where a fresh subflow's srtt is 0); ties go to the lower position.
pub fn lowest_rtt<'a>(subs: impl Iterator<Item = &'a SubflowView>) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for s in subs.filter(|s| s.available) {
        let r = s.srtt_ns.unwrap_or(0.0);
        if best.is_none_or(|(b, _)| r < b) {
            best = Some((r, s.pos));
        }
    }
    best.map(|(_, p)| p)
}
