//! The event queue: integer time, a calendar of time buckets and the same-instant order.
//!
//! Events are small `Copy` values keyed by (time, instant scheduled at, insertion sequence), so
//! simultaneous events run in the order of the instant they were scheduled at, then in the order they
//! were scheduled, and every run is deterministic. The key is a strict total order (the sequence
//! number is unique), so any correct priority queue pops the same sequence.
//!
//! The queue is a calendar (a timing wheel with an exact order): time is cut into buckets of
//! `2^shift` ps; a ring of [`SLOTS`] buckets holds the events of the next `SLOTS` buckets as unsorted
//! lists, the current bucket's events are in a small 4-ary heap ([`heap::Heap`]), and events beyond
//! the ring wait in a second heap. On a 10,000-host fabric tens of thousands of events are pending (one
//! per busy channel); one big heap made every pop a sift through levels that were not in cache, while
//! the current bucket's heap stays small and hot, and a push is an append. The bucket width adapts to
//! the event rate (about [`TARGET_PER_BUCKET`] events per bucket). The upcoming buckets are also a
//! look-ahead: the engine prefetches what their events will touch ([`EventQueue::upcoming`]).
mod heap;

use std::cmp::Ordering;

/// An event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The head packet of a channel's pipe, in packet slot `slot`, reaches the far end (one event per
    /// packet hop; [`crate::net::slab`]).
    Hop { slot: u32 },
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
    /// The host reopens the receive window it closed on a flow ([`crate::net::Qdisc::next_reopen`]).
    HostWnd { flow: u32 },
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
    /// The order key.
    #[inline(always)]
    fn key(&self) -> (u64, u64, u64) {
        (self.t, self.from, self.seq)
    }

    /// Runs before `o`.
    #[inline(always)]
    fn before(&self, o: &Entry) -> bool {
        (self.t, self.from, self.seq) < (o.t, o.from, o.seq)
    }
}

/// Buckets in the ring (a power of two).
const SLOTS: usize = 4096;
/// The bucket width adapts so that a bucket holds about this many events when it becomes current.
const TARGET_PER_BUCKET: u64 = 32;
/// Bucket loads between two checks of the bucket width.
const ADAPT_EVERY: u64 = 1024;
/// Bucket width bounds (log2 ps): 256 ps .. about 0.27 s.
const MIN_SHIFT: u32 = 8;
const MAX_SHIFT: u32 = 38;

/// The clock and the pending events.
#[derive(Debug)]
pub(crate) struct EventQueue {
    /// The events bucket `cur_idx` held when it became current, sorted latest first (popped from the
    /// end).
    sorted: Vec<Entry>,
    /// Events scheduled into the current bucket after it became current.
    cur: heap::Heap,
    /// The events of buckets `cur_idx + 1 .. cur_idx + SLOTS`, bucket `i` at slot `i % SLOTS`.
    ring: Vec<Vec<Entry>>,
    /// One bit per ring slot: the slot holds events.
    occupied: Vec<u64>,
    /// Events in the ring.
    ring_len: usize,
    /// Events of buckets at or past `cur_idx + SLOTS`.
    far: heap::Heap,
    /// Bucket width (log2 ps).
    shift: u32,
    /// The current bucket (time >> shift).
    cur_idx: u64,
    /// Bucket width adaptation: buckets loaded and events they held since the last check.
    loads: u64,
    loaded: u64,
    /// A scratch list (re-bucketing).
    scratch: Vec<Entry>,
    pub(crate) seq: u64,
    /// The current instant (ps).
    pub(crate) now: u64,
    /// The instant the event being handled was scheduled at.
    pub(crate) cur_from: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            sorted: Vec::new(),
            cur: heap::Heap::default(),
            ring: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: vec![0; SLOTS / 64],
            ring_len: 0,
            far: heap::Heap::default(),
            shift: 16,
            cur_idx: 0,
            loads: 0,
            loaded: 0,
            scratch: Vec::new(),
            seq: 0,
            now: 0,
            cur_from: 0,
        }
    }
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

    /// Files an entry in the current heap, its ring slot or the far heap.
    #[inline]
    fn push(&mut self, e: Entry) {
        let idx = e.t >> self.shift;
        if idx <= self.cur_idx {
            self.cur.push(e);
        } else if idx - self.cur_idx < SLOTS as u64 {
            let slot = idx as usize % SLOTS;
            let b = &mut self.ring[slot];
            if b.capacity() == 0 {
                b.reserve(TARGET_PER_BUCKET as usize);
            }
            b.push(e);
            self.occupied[slot / 64] |= 1 << (slot % 64);
            self.ring_len += 1;
        } else {
            self.far.push(e);
        }
    }

    /// The current bucket is done: [`EventQueue::refill`] must run before the next
    /// [`EventQueue::peek`].
    #[inline(always)]
    pub(crate) fn needs_refill(&self) -> bool {
        self.sorted.is_empty() && self.cur.len() == 0
    }

    /// Makes the next non-empty bucket current (no effect if nothing is pending).
    pub(crate) fn refill(&mut self) {
        while self.needs_refill() {
            if self.loads >= ADAPT_EVERY {
                self.adapt();
                continue;
            }
            if self.ring_len > 0 {
                self.cur_idx = self.next_occupied();
            } else if let Some(e) = self.far.peek() {
                self.cur_idx = e.t >> self.shift;
            } else {
                return;
            }
            // The ring now reaches one bucket further (or, after a jump, many): bring in what it covers.
            while let Some(e) = self.far.peek() {
                if (e.t >> self.shift) - self.cur_idx >= SLOTS as u64 {
                    break;
                }
                let e = self.far.pop().expect("peeked");
                self.push(e);
            }
            // The bucket's list becomes the sorted current list (its memory goes with it: a slot holds
            // memory only while it holds events, so the ring's footprint follows the pending events,
            // and the list freed here is the next one allocated, still in cache).
            let slot = self.cur_idx as usize % SLOTS;
            let n = self.ring[slot].len();
            if n > 0 {
                self.sorted = std::mem::take(&mut self.ring[slot]);
                self.sorted
                    .sort_unstable_by_key(|e| std::cmp::Reverse(e.key()));
                self.occupied[slot / 64] &= !(1 << (slot % 64));
                self.ring_len -= n;
            }
            self.loads += 1;
            self.loaded += (self.sorted.len() + self.cur.len()) as u64;
        }
    }

    /// The first occupied ring bucket after the current one (the ring is not empty).
    fn next_occupied(&self) -> u64 {
        let start = (self.cur_idx as usize + 1) % SLOTS;
        let words = SLOTS / 64;
        let (w0, b0) = (start / 64, start % 64);
        let mut w = w0;
        let mut bits = self.occupied[w] & (u64::MAX << b0);
        for _ in 0..=words {
            if bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                let dist = (slot + SLOTS - start) % SLOTS;
                return self.cur_idx + 1 + dist as u64;
            }
            w = (w + 1) % words;
            bits = self.occupied[w];
        }
        unreachable!("next_occupied on an empty ring")
    }

    /// Halves or doubles the bucket width if the last buckets held far more or far fewer events than
    /// the target, and files every pending event again (the current bucket is empty here).
    fn adapt(&mut self) {
        let per = self.loaded / self.loads.max(1);
        self.loads = 0;
        self.loaded = 0;
        let shift = if per > 4 * TARGET_PER_BUCKET && self.shift > MIN_SHIFT {
            self.shift - 1
        } else if per * 4 < TARGET_PER_BUCKET && self.shift < MAX_SHIFT {
            self.shift + 1
        } else {
            return;
        };
        let mut all = std::mem::take(&mut self.scratch);
        for slot in 0..SLOTS {
            all.extend(std::mem::take(&mut self.ring[slot]));
        }
        self.far.drain_into(&mut all);
        self.occupied.fill(0);
        self.ring_len = 0;
        self.shift = shift;
        self.cur_idx = self.now >> shift;
        for e in all.drain(..) {
            self.push(e);
        }
        self.scratch = all;
    }

    /// Whether the earliest event is the sorted list's last one (else the late heap's top).
    #[inline(always)]
    fn sorted_first(&self) -> bool {
        match (self.sorted.last(), self.cur.peek()) {
            (Some(a), Some(b)) => a.before(b),
            (a, _) => a.is_some(),
        }
    }

    /// The earliest event (call [`EventQueue::refill`] first when [`EventQueue::needs_refill`]).
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<&Entry> {
        if self.sorted_first() {
            self.sorted.last()
        } else {
            self.cur.peek()
        }
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        if self.sorted_first() {
            self.sorted.pop()
        } else {
            self.cur.pop()
        }
    }

    /// Replaces the earliest event by `e` (the same order as a pop and a push).
    #[inline]
    pub(crate) fn replace_top(&mut self, e: Entry) {
        self.pop();
        self.push(e);
    }

    /// The `k`-th event after the earliest one in the current bucket's sorted list (`k >= 1`; an
    /// event scheduled into the bucket later may come before it). For prefetching only.
    #[inline(always)]
    pub(crate) fn ahead(&self, k: usize) -> Option<&Entry> {
        let n = self.sorted.len();
        (n > k).then(|| &self.sorted[n - 1 - k])
    }

    /// The events of the `k`-th bucket after the current one (unsorted; `0 < k < SLOTS`). For
    /// prefetching only.
    #[inline]
    pub(crate) fn upcoming(&self, k: usize) -> &[Entry] {
        &self.ring[(self.cur_idx as usize + k) % SLOTS]
    }

    /// The events of the current bucket (in heap order). For prefetching only.
    #[inline]
    pub(crate) fn current(&self) -> impl Iterator<Item = &Entry> {
        self.sorted.iter().chain(self.cur.entries())
    }

    /// Number of pending events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sorted.len() + self.cur.len() + self.ring_len + self.far.len()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    impl EventQueue {
        /// Pops the earliest event, refilling the current bucket first.
        fn next(&mut self) -> Option<Entry> {
            if self.needs_refill() {
                self.refill();
            }
            self.pop()
        }
    }

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
                let e = q.next().expect("non-empty");
                plain.sort_unstable();
                assert_eq!((e.t, e.from, e.seq), plain.remove(0), "step {step}");
            } else {
                if q.needs_refill() {
                    q.refill();
                }
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
    fn the_calendar_pops_in_key_order_across_buckets_jumps_and_width_changes() {
        // A clock that follows the popped events, delays from 0 to far past the ring (the far heap, jumps
        // over empty time) and phases of dense and sparse traffic (the bucket width adapts both ways),
        // against a reference heap.
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut q = EventQueue::default();
        let mut plain: BinaryHeap<Reverse<(u64, u64, u64)>> = BinaryHeap::new();
        let mut x: u64 = 7;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let (mut shifts, mut popped) = (std::collections::BTreeSet::new(), 0u64);
        for step in 0..400_000u64 {
            let dense = (step / 50_000) % 2 == 0;
            let r = next();
            if r % 2 == 0 || plain.is_empty() {
                let d = match next() % 10 {
                    0 => 0,
                    1..=6 if dense => next() % 20_000,
                    1..=6 => next() % 5_000_000,
                    7 | 8 => next() % 2_000_000_000,
                    _ => next() % 1_000_000_000_000,
                };
                let t = q.now + d;
                let from = t.saturating_sub(next() % 3).max(q.now);
                q.schedule_from(from, t, Ev::Sample);
                plain.push(Reverse((t, from, q.seq)));
            } else {
                let e = q.next().expect("non-empty");
                q.now = e.t;
                popped += 1;
                shifts.insert(q.shift);
                assert_eq!(
                    Some(Reverse((e.t, e.from, e.seq))),
                    plain.pop(),
                    "step {step}"
                );
            }
            assert_eq!(q.len(), plain.len());
        }
        assert!(popped > 150_000);
        assert!(
            shifts.len() > 2,
            "the bucket width never changed: {shifts:?}"
        );
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
        let order: Vec<Ev> = std::iter::from_fn(|| q.next().map(|e| e.ev)).collect();
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
