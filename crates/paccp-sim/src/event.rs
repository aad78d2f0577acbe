//! The event queue: integer time, a binary heap and the same-instant order.
//!
//! Events are small `Copy` values in a binary heap keyed by (time, instant scheduled at, insertion
//! sequence), so simultaneous events run in the order of the instant they were scheduled at, then in
//! the order they were scheduled, and every run is deterministic.
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The head packet of channel `ch`'s pipe reaches the far end (one event per packet hop).
    Hop { ch: u32 },
    /// A scheduled queue discipline (strict priority, per-VM, shaper) of channel `ch` may start
    /// serialising its next packet (the previous one ended, or a shaper's bucket refilled).
    TxEnd { ch: u32 },
    /// The queued head packet of host NIC channel `ch` has left the queue: its waiters retry.
    NicRoom { ch: u32 },
    /// Host fair queuing: the oldest of a flow's packets in its NIC queue has been serialised.
    FqRoom { flow: u32 },
    /// A fixed flow starts.
    FlowStart { flow: u32 },
    /// A flow's retransmission timer.
    Rto { flow: u32 },
    /// A delayed-ACK timer (ignored unless `gen` matches).
    DelAck { flow: u32, gen: u32 },
    /// A sampling tick.
    Sample,
    /// An FBP change of a flow.
    Change { flow: u32, idx: u32 },
    /// An arrival of generator `gen`.
    Arrival { gen: u32 },
}

/// A heap entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// When the event runs (ps).
    pub(crate) t: u64,
    /// The instant the event logically was scheduled at (see [`EventQueue::schedule_from`]).
    pub(crate) from: u64,
    /// Insertion sequence number (the last tie-break).
    pub(crate) seq: u64,
    /// The event.
    pub(crate) ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.from == o.from && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: the heap pops the earliest (time, from, seq) first.
        (o.t, o.from, o.seq).cmp(&(self.t, self.from, self.seq))
    }
}

/// The clock and the pending events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    pub(crate) heap: BinaryHeap<Entry>,
    pub(crate) seq: u64,
    /// The current instant (ps).
    pub(crate) now: u64,
    /// The instant the event being handled was scheduled at.
    pub(crate) cur_from: u64,
}

impl EventQueue {
    /// Schedules `ev` at `t`, scheduled now.
    #[inline]
    pub(crate) fn schedule(&mut self, t: u64, ev: Ev) {
        self.schedule_from(self.now, t, ev);
    }

    /// Schedules `ev` at `t` as if it had been scheduled at instant `from` (<= t): events at the same
    /// instant run in the order of `from`, then in the order they were scheduled. A packet's arrival
    /// at the far end of a channel counts as scheduled when its serialisation ends, as when that end
    /// was an event of its own.
    #[inline]
    pub(crate) fn schedule_from(&mut self, from: u64, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            t,
            from,
            seq: self.seq,
            ev,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_instant_events_run_by_scheduling_instant_then_order() {
        let mut q = EventQueue {
            now: 5,
            ..Default::default()
        };
        q.schedule(10, Ev::Sample); // from 5, seq 1
        q.schedule_from(3, 10, Ev::Rto { flow: 1 }); // from 3: runs first
        q.schedule(10, Ev::Rto { flow: 2 }); // from 5, seq 3
        q.schedule(9, Ev::Rto { flow: 3 }); // earlier time
        let order: Vec<Ev> = std::iter::from_fn(|| q.heap.pop().map(|e| e.ev)).collect();
        assert_eq!(
            order,
            vec![
                Ev::Rto { flow: 3 },
                Ev::Rto { flow: 1 },
                Ev::Sample,
                Ev::Rto { flow: 2 }
            ]
        );
    }
}
