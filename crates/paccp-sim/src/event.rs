//! The event queue: integer time, a 4-ary heap and the same-instant order.
//!
//! Events are small `Copy` values in a 4-ary min-heap keyed by (time, instant scheduled at, insertion
//! sequence), so simultaneous events run in the order of the instant they were scheduled at, then in
//! the order they were scheduled, and every run is deterministic. The key is a strict total order (the
//! sequence number is unique), so any correct priority queue pops the same sequence. The heap is
//! 4-ary and stored in 128-byte aligned blocks so that a node's four children are one block (two
//! cache lines, not three): on a 10,000-host fabric the heap holds tens of thousands of entries (one
//! per busy channel) and outgrows the caches, so a sift costs about one miss per level below the top.
use std::cmp::Ordering;

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
    /// A delayed-ACK timer (ignored unless `gen` matches; 16 bits keep an event in 8 bytes, and 65,536
    /// ACKs of one flow within one delayed-ACK timeout cannot happen).
    DelAck { flow: u32, gen: u16 },
    /// A sampling tick.
    Sample,
    /// An FBP change of a flow.
    Change { flow: u32, idx: u16 },
    /// An arrival of generator `gen`.
    Arrival { gen: u32 },
    /// A constant-bit-rate flow sends its next datagram.
    CbrSend { flow: u32 },
    /// Step `idx` of a subflow's extra delay line `line` takes effect (`crate::sim::conn`).
    DelayStep { line: u32, idx: u16 },
    /// A single-path flow's `stop_ns`: it takes no new data.
    Stop { flow: u32 },
    /// A connection's `stop_ns`: its stream ends at the data handed out so far (`crate::sim::conn`).
    ConnStop { conn: u32 },
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

impl Entry {
    /// Runs before `o`.
    #[inline(always)]
    fn before(&self, o: &Entry) -> bool {
        (self.t, self.from, self.seq) < (o.t, o.from, o.seq)
    }
}

/// Children per heap node.
const ARITY: usize = 4;

/// Four heap slots on their own two cache lines: node `k` lives at position `k + 3`, so the children
/// of node `k` (nodes `4k+1 ..= 4k+4`, positions `4k+4 ..= 4k+7`) are exactly block `k + 1`. A sift
/// step then reads one aligned 128-byte block instead of 128 bytes straddling three lines.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(128))]
struct Block([Entry; ARITY]);

/// An unused slot: never before any event, so a sift step may compare all four slots of a block.
const EMPTY: Entry = Entry {
    t: u64::MAX,
    from: u64::MAX,
    seq: u64::MAX,
    ev: Ev::Sample,
};

/// The clock and the pending events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    /// A 4-ary min-heap in aligned blocks (see [`Block`]); slots at or past `len` are [`EMPTY`].
    heap: Vec<Block>,
    /// Number of pending events.
    len: usize,
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
        self.push(Entry {
            t,
            from,
            seq: self.seq,
            ev,
        });
    }

    #[inline(always)]
    fn at(&self, node: usize) -> &Entry {
        let p = node + ARITY - 1;
        &self.heap[p / ARITY].0[p % ARITY]
    }

    #[inline(always)]
    fn set(&mut self, node: usize, e: Entry) {
        let p = node + ARITY - 1;
        self.heap[p / ARITY].0[p % ARITY] = e;
    }

    /// The earliest event.
    #[inline]
    pub(crate) fn peek(&self) -> Option<&Entry> {
        (self.len > 0).then(|| self.at(0))
    }

    /// The root's children: the second earliest pending event is one of them (slots past the end are
    /// [`EMPTY`]). For prefetching only.
    #[inline]
    pub(crate) fn next_candidates(&self) -> &[Entry] {
        self.heap.get(1).map_or(&[], |b| &b.0[..])
    }

    /// Number of pending events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, e: Entry) {
        let mut i = self.len;
        self.len += 1;
        let pos = i + ARITY - 1; // node i's position (see `Block`)
        if pos / ARITY >= self.heap.len() {
            self.heap.push(Block([EMPTY; ARITY]));
        }
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pe = *self.at(parent);
            if !e.before(&pe) {
                break;
            }
            self.set(i, pe);
            i = parent;
        }
        self.set(i, e);
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let last = *self.at(self.len);
        self.set(self.len, EMPTY);
        if self.len == 0 {
            return Some(last);
        }
        let top = *self.at(0);
        self.sift_down(last);
        Some(top)
    }

    /// Replaces the earliest event by `e` (one sift instead of a pop and a push; the same order).
    #[inline]
    pub(crate) fn replace_top(&mut self, e: Entry) {
        self.sift_down(e);
    }

    /// Puts `e` at the root's place and moves it down to where it belongs.
    #[inline]
    fn sift_down(&mut self, e: Entry) {
        let n = self.len;
        let mut i = 0;
        loop {
            if ARITY * i + 1 >= n {
                break;
            }
            // Node i's children are block i + 1; unused slots are EMPTY and never win.
            let b = &self.heap[i + 1].0;
            let mut best = 0;
            for c in 1..ARITY {
                if b[c].before(&b[best]) {
                    best = c;
                }
            }
            if !b[best].before(&e) {
                break;
            }
            let child = ARITY * i + 1 + best;
            let be = b[best];
            self.set(i, be);
            i = child;
        }
        self.set(i, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_entries_stay_small() {
        assert_eq!(std::mem::size_of::<Ev>(), 8);
        assert_eq!(std::mem::size_of::<Entry>(), 32);
    }

    #[test]
    fn the_heap_pops_in_key_order_with_replacements() {
        // A deterministic pseudo-random mix of pushes, pops and top replacements, against a sorted list.
        let mut q = EventQueue::default();
        let mut plain: Vec<(u64, u64, u64)> = Vec::new();
        let mut x: u64 = 11;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for step in 0..20_000u64 {
            let r = next();
            if r % 3 != 0 || q.len() == 0 {
                let t = next() % 500;
                let from = t.saturating_sub(next() % 3);
                q.schedule_from(from, t, Ev::Sample);
                plain.push((t, from, q.seq));
            } else if r % 2 == 0 {
                let e = q.pop().expect("non-empty");
                plain.sort_unstable();
                assert_eq!((e.t, e.from, e.seq), plain.remove(0), "step {step}");
            } else {
                let top = *q.peek().expect("non-empty");
                plain.sort_unstable();
                assert_eq!((top.t, top.from, top.seq), plain.remove(0));
                q.seq += 1;
                let e = Entry {
                    t: top.t + next() % 50,
                    from: top.t,
                    seq: q.seq,
                    ev: Ev::Sample,
                };
                q.replace_top(e);
                plain.push((e.t, e.from, e.seq));
            }
        }
    }

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
        let order: Vec<Ev> = std::iter::from_fn(|| q.pop().map(|e| e.ev)).collect();
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
