//! One direction of a link: a queue discipline, a serialiser and a propagation pipe.
//!
//! A FIFO drop-tail channel fixes a packet's departure when it is accepted (start = max(now, end of
//! the previous serialisation), `done` = start + serialisation time), so only its arrival at the far
//! end (`done + delay`) is an event. `pipe` lists every accepted packet not yet received, in FIFO
//! order, in the simulation's packet slab ([`super::slab`]): the first ones have finished serialising
//! (they propagate), the rest are the queue. Packets move from queue to wire lazily
//! ([`Channel::advance`]) whenever the queue is looked at.
//!
//! A channel with a scheduled discipline ([`Qdisc`]: strict priority, per-VM queues, shaper...) keeps
//! its waiting packets there; the pipe then holds at most the packet being serialised plus the wire,
//! and an [`Ev::TxEnd`] at the end of each serialisation (or when a shaper's bucket refills) asks the
//! discipline for the next packet.
use super::qdisc::Qdisc;
use super::slab::{Fifo, Next, Slab};
use super::{NetStats, Pkt, QKey};
use crate::event::{Ev, EventQueue};
use crate::units::{Bps, Bytes};
use std::collections::VecDeque;

/// Runtime state of one channel. Laid out by use, one 64-byte line each: what every hop touches
/// (the pipe, the serialiser, whether a discipline is in front), what admission touches (limits,
/// serialisation times, counters written per accepted packet), and the cold rest (waiters, drops);
/// a 10,000-host fabric has 24,000 channels, so a hop's cost is mostly the cache lines it touches:
/// the channel a packet leaves reads line 1 only, the channel it enters lines 1 and 2.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Channel {
    // Line 1: every hop.
    pub(crate) pipe: Fifo,
    /// End of the last accepted packet's serialisation (the `done` of the pipe's last packet).
    pub(crate) busy_until: u64,
    /// Bytes in the queue part of the pipe (the packet being serialised included).
    pub(crate) bytes: u64,
    pub(crate) delay: u64,
    /// A scheduled discipline in front of the serialiser (`None`: FIFO drop-tail). Boxed twice: a
    /// `Box<dyn Qdisc>` is two words, and the channel must stay three cache lines.
    pub(crate) sched: Option<Box<Box<dyn Qdisc>>>,
    /// Never drops (a host NIC queue under host backpressure: data is gated before it).
    pub(crate) lossless: bool,
    /// A [`Ev::NicRoom`] event is scheduled.
    pub(crate) wake_pending: bool,
    // Line 2: admission.
    pub(crate) limit_pkts: u64,
    pub(crate) limit_bytes: u64,
    /// Serialisation times of the two common sizes: (MTU, ACK).
    pub(crate) tx_mtu: (u64, u64),
    pub(crate) tx_ack: (u64, u64),
    pub(crate) max_queue_bytes: u64,
    /// Bytes of every packet that entered the pipe ([`Channel::tx_bytes`] is this minus `bytes` at
    /// the end).
    acc_bytes: u64,
    // Line 3: the rest.
    /// Packets dropped (data segments and ACKs).
    pub(crate) drops: u64,
    /// Of `drops`, the ACKs (pure ACKs: the engine's ACKs carry no data).
    pub(crate) drops_ack: u64,
    pub(crate) rate_bps: u64,
    /// Flows waiting for room in this (host NIC) queue, served in turn (round-robin, one segment each).
    pub(crate) waiters: VecDeque<u32>,
    /// Scheduled discipline: the time of the pending [`Ev::TxEnd`] of a shaper wait (0 = none).
    pub(crate) wait_at: u64,
}

impl Channel {
    /// A FIFO drop-tail channel.
    pub(crate) fn new(rate: Bps, delay_ps: u64, limits: (u64, u64), sizes: (u64, u64)) -> Channel {
        let tx = |size: u64| (size, rate.tx_time(Bytes(size)).0);
        Channel {
            pipe: Fifo::default(),
            bytes: 0,
            busy_until: 0,
            rate_bps: rate.0,
            tx_mtu: tx(sizes.0),
            tx_ack: tx(sizes.1),
            delay: delay_ps,
            limit_pkts: limits.0,
            limit_bytes: limits.1,
            acc_bytes: 0,
            drops: 0,
            drops_ack: 0,
            max_queue_bytes: 0,
            waiters: VecDeque::new(),
            wake_pending: false,
            lossless: false,
            sched: None,
            wait_at: 0,
        }
    }

    /// Hints the CPU to load the two cache lines [`Channel::enqueue`] reads (no effect on results).
    #[inline(always)]
    pub(crate) fn prefetch_admission(&self) {
        crate::prefetch::prefetch(self);
        crate::prefetch::prefetch(&self.limit_pkts);
    }

    /// Moves the packets whose serialisation ended at or before `until` from the queue to the wire;
    /// returns the end time of the last one moved (0 if none).
    #[inline]
    pub(crate) fn advance(&mut self, until: u64, slab: &Slab) -> u64 {
        if self.busy_until <= until {
            // Every packet's serialisation has ended (the last one's is `busy_until`): no need to read
            // the queue's packets, which on a large fabric are rarely in cache.
            if self.pipe.all_on_wire() {
                self.bytes = 0;
                return self.busy_until;
            }
            return 0;
        }
        let mut last = 0;
        while let Some(done) = self.pipe.first_queued_done() {
            if done > until {
                break;
            }
            last = done;
            self.bytes -= self.pipe.one_on_wire(slab) as u64;
        }
        last
    }

    /// The end of the run at `end`: moves what has been serialised by then to the wire (for
    /// [`Channel::tx_bytes`]); returns the end time of the last packet moved (0 if none).
    pub(crate) fn finish(&mut self, end: u64, slab: &Slab) -> u64 {
        self.advance(end, slab)
    }

    /// Bytes serialised (after [`Channel::finish`]: by the end of the run). Computed, not stored, so
    /// the cold line has room for the drop counters.
    pub(crate) fn tx_bytes(&self) -> u64 {
        self.acc_bytes - self.bytes
    }

    /// Moves to the wire the packets that have left the queue as seen by an event at `now` scheduled
    /// at `from`: those whose serialisation ended before `now`, and one ending exactly at `now` if it
    /// started before `from` (when the end of a serialisation was an event of its own, scheduled at
    /// its start, it ran first in that case).
    #[inline]
    pub(crate) fn advance_for(&mut self, now: u64, from: u64, slab: &Slab) {
        self.advance(now.saturating_sub(1), slab);
        if self.pipe.first_queued_done() == Some(now) {
            let size = self
                .pipe
                .first_queued(slab)
                .map_or(0, |p| p.pkt.size as u64);
            if now - self.tx_time(size) < from {
                self.advance(now, slab);
            }
        }
    }

    /// Removes the pipe's head packet, which reaches the far end now (its serialisation has ended);
    /// returns it and, if another packet follows, that packet's slot and serialisation end.
    /// The rest of the queue is not advanced (whoever looks at the queue advances it first).
    #[inline]
    pub(crate) fn pop_head(&mut self, slab: &mut Slab) -> Option<(Pkt, Option<Next>)> {
        let (pkt, was_on_wire, next) = self.pipe.pop_front(slab)?;
        if !was_on_wire {
            // Not moved to the wire yet (nothing looked at the queue since its serialisation ended,
            // or zero propagation delay): it leaves the queue part now.
            self.bytes -= pkt.size as u64;
        }
        Some((pkt, next))
    }

    /// Packets in the queue part of the pipe (the one being serialised included).
    #[inline]
    pub(crate) fn queued(&self) -> u64 {
        self.pipe.queued()
    }

    /// [`Channel::advance_for`] unless the queue has room for a packet of `size` bytes with key `key`
    /// even as it stands: a queue not brought up to date only overstates itself, so whoever then
    /// asks [`Channel::has_room`] gets the same answer, without reading the queue's head packet
    /// (rarely in cache on a large fabric). [`Channel::schedule_wake`] brings the queue up to date
    /// itself before it looks at the next departure.
    #[inline]
    pub(crate) fn advance_unless_room(
        &mut self,
        size: u64,
        key: QKey,
        now: u64,
        from: u64,
        slab: &Slab,
    ) {
        if !self.has_room(size, key) {
            self.advance_for(now, from, slab);
        }
    }

    /// Whether the queue admits a packet of `size` bytes with key `key` (FIFO: the channel's packet
    /// and byte limits, the packet being serialised included; scheduled: the discipline's limits).
    #[inline]
    pub(crate) fn has_room(&self, size: u64, key: QKey) -> bool {
        match &self.sched {
            None => self.queued() < self.limit_pkts && self.bytes + size <= self.limit_bytes,
            Some(s) => s.has_room(size, key),
        }
    }

    /// Serialisation time of `size` bytes.
    #[inline]
    pub(crate) fn tx_time(&self, size: u64) -> u64 {
        if size == self.tx_mtu.0 {
            self.tx_mtu.1
        } else if size == self.tx_ack.0 {
            self.tx_ack.1
        } else {
            Bps(self.rate_bps).tx_time(Bytes(size)).0
        }
    }

    /// Bytes queued in the channel (discipline and serialiser).
    #[inline]
    pub(crate) fn queue_bytes(&self) -> u64 {
        self.bytes + self.sched.as_ref().map_or(0, |s| s.bytes())
    }

    /// Admission of `pkt` at `q.now`; an accepted packet's serialisation end and (if it is the pipe's
    /// head) its arrival at the far end are scheduled at once. Returns false if it was dropped.
    pub(crate) fn enqueue(
        &mut self,
        ch: u32,
        pkt: Pkt,
        key: QKey,
        q: &mut EventQueue,
        stats: &mut NetStats,
        slab: &mut Slab,
    ) -> bool {
        let now = q.now;
        let size = pkt.size as u64;
        // The pipe's wire mark and `bytes` lag behind (packets whose serialisation has ended may still
        // count as queued), so they only overstate the queue: if even the lagging queue admits the
        // packet and does not raise `max_queue_bytes`, the exact one does the same, and the queue's
        // head packet (rarely in cache on a large fabric) need not be read.
        let lagging_ok = self.sched.is_none()
            && (self.lossless
                || (self.queued() < self.limit_pkts && self.bytes + size <= self.limit_bytes))
            && self.bytes + size <= self.max_queue_bytes;
        if !lagging_ok {
            self.advance_for(now, q.cur_from, slab);
        }
        if self.sched.as_ref().is_some_and(|s| s.holds_copy(&pkt, key)) {
            // a retransmission of a segment still waiting here: the original goes in its place
            stats.in_flight -= 1;
            return true;
        }
        let admitted = self.lossless
            || match self.sched.as_mut() {
                None => self.queued() < self.limit_pkts && self.bytes + size <= self.limit_bytes,
                Some(s) => s.admit(size, key, now, self.tx_mtu.1),
            };
        if !admitted {
            self.drops += 1;
            self.drops_ack += pkt.is_ack as u64;
            stats.packets_dropped += 1;
            stats.in_flight -= 1;
            return false;
        }
        if let Some(s) = self.sched.as_mut() {
            s.push(pkt, key);
            if self.busy_until <= now {
                self.start_next(ch, q, slab, stats);
            }
            self.max_queue_bytes = self.max_queue_bytes.max(self.queue_bytes());
            return true;
        }
        let done = self.busy_until.max(now) + self.tx_time(size);
        self.busy_until = done;
        self.bytes += size;
        self.acc_bytes += size;
        self.max_queue_bytes = self.max_queue_bytes.max(self.bytes);
        let head = self.pipe.is_empty();
        let slot = self.pipe.push_back(slab, pkt, done, ch);
        if head {
            q.schedule_from(done, done + self.delay, Ev::Hop { slot });
        }
        true
    }

    /// Scheduled discipline, serialiser idle at `q.now`: starts serialising the packet the discipline
    /// picks, or schedules a wake-up for when a shaper's bucket allows one.
    pub(crate) fn start_next(
        &mut self,
        ch: u32,
        q: &mut EventQueue,
        slab: &mut Slab,
        stats: &mut NetStats,
    ) {
        let now = q.now;
        if self.busy_until > now {
            return; // serialising (a stale or duplicate wake-up)
        }
        let Some(s) = self.sched.as_mut() else {
            return;
        };
        let popped = s.pop(now);
        stats.in_flight -= s.take_discarded();
        match popped {
            super::qdisc::Pop::Packet(pkt) => {
                let size = pkt.size as u64;
                let done = now + self.tx_time(size);
                self.busy_until = done;
                self.bytes += size;
                self.acc_bytes += size;
                let head = self.pipe.is_empty();
                let slot = self.pipe.push_back(slab, pkt, done, ch);
                if head {
                    q.schedule_from(done, done + self.delay, Ev::Hop { slot });
                }
                q.schedule(done, Ev::TxEnd { ch });
            }
            super::qdisc::Pop::WaitUntil(t) => {
                if self.wait_at <= now || self.wait_at > t {
                    self.wait_at = t;
                    q.schedule(t, Ev::TxEnd { ch });
                }
            }
            super::qdisc::Pop::Empty => {}
        }
    }

    /// Host backpressure: schedules a [`Ev::NicRoom`] for when the queue's next packet has left, if
    /// flows wait and none is scheduled.
    pub(crate) fn schedule_wake(&mut self, ch: u32, q: &mut EventQueue, slab: &Slab) {
        if self.wake_pending || self.waiters.is_empty() {
            return;
        }
        // A no-op where the caller brought the queue up to date (to `now`, or as seen from this event).
        self.advance_for(q.now, q.cur_from, slab);
        if let Some(t) = self.next_departure() {
            self.wake_pending = true;
            q.schedule(t, Ev::NicRoom { ch });
        }
    }

    /// When the next packet leaves the queue (for the NIC's waiters), if any is queued.
    pub(crate) fn next_departure(&self) -> Option<u64> {
        if let Some(done) = self.pipe.first_queued_done() {
            return Some(done);
        }
        match &self.sched {
            Some(s) if !s.is_empty() && self.wait_at > 0 => Some(self.wait_at),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lagging_queue_admits_and_peaks_as_an_exact_fifo() {
        // Arrivals at random instants (each handled as an event scheduled at its own instant), heads
        // leaving at their arrival at the far end, against a model that recomputes the queue from
        // every accepted packet: admission, the NIC-room check and max_queue_bytes must agree, though
        // the channel looks at its queue only when the queue as it stands cannot decide.
        let rate = Bps(1_000_000_000);
        let (limit_pkts, limit_bytes) = (8, 6 * 1500);
        let mut c = Channel::new(rate, 5_000_000, (limit_pkts, limit_bytes), (1500, 40));
        let (mut q, mut stats) = (EventQueue::default(), NetStats::default());
        let mut slab = Slab::default();
        let key = QKey {
            class: 0,
            vm: QKey::NO_VM,
        };
        let mut accepted: Vec<(u64, u64)> = Vec::new(); // (serialisation end, size)
        let mut arrived = 0; // accepted packets that have reached the far end
        let (mut busy, mut peak, mut now, mut x) = (0u64, 0u64, 0u64, 9u64);
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for step in 0..40_000 {
            now += next() % 14_000_000;
            q.now = now;
            q.cur_from = now;
            while accepted.get(arrived).is_some_and(|a| a.0 + c.delay <= now) {
                c.pop_head(&mut slab);
                arrived += 1;
            }
            let size = if next() % 3 == 0 { 40 } else { 1500 };
            let (n, bytes) = accepted
                .iter()
                .filter(|a| a.0 > now)
                .fold((0, 0), |(n, b), a| (n + 1, b + a.1));
            let want = n < limit_pkts && bytes + size <= limit_bytes;
            if next() % 2 == 0 {
                c.advance_unless_room(size, key, now, now, &slab);
                assert_eq!(c.has_room(size, key), want, "room, step {step}");
            }
            stats.in_flight += 1;
            let pkt = Pkt {
                size: size as u16,
                ..Pkt::EMPTY
            };
            assert_eq!(
                c.enqueue(0, pkt, key, &mut q, &mut stats, &mut slab),
                want,
                "step {step}"
            );
            if want {
                busy = busy.max(now) + rate.tx_time(Bytes(size)).0;
                accepted.push((busy, size));
                peak = peak.max(bytes + size);
            }
            assert_eq!(c.max_queue_bytes, peak, "step {step}");
        }
        assert!(
            stats.packets_dropped > 1000 && peak == limit_bytes,
            "the queue never filled"
        );
        c.finish(now, &slab);
        let sent: u64 = accepted.iter().filter(|a| a.0 <= now).map(|a| a.1).sum();
        assert_eq!(c.tx_bytes(), sent);
    }

    #[test]
    fn a_channel_is_three_cache_lines() {
        assert_eq!(std::mem::size_of::<super::Channel>(), 192);
        assert_eq!(std::mem::align_of::<super::Channel>(), 64);
    }
}
