//! Where packets in the network live: one slab of 64-byte slots for all of them, and per channel a FIFO
//! list threaded through the slots ([`Fifo`]).
//!
//! A slot is freed when its packet leaves a channel and taken again, last freed first, when a packet
//! enters one, so a packet forwarded at a hop is written into the line it was just read from, and the
//! slab's footprint is the packets in flight, not the largest burst each channel ever held (per-channel
//! ring buffers grow to that and cycle through all of it: 49 MB of rings for 14 MB of packets on a
//! 10,000-host fabric). A slot carries the serialisation end of the packet after it in its channel
//! (a packet's own is in the slot before it, or in the channel for its first queued packet), so a hop
//! that schedules the next packet's arrival reads one slot, not two.
use super::Pkt;

/// No slot (ends a list).
const NONE: u32 = u32::MAX;

/// A packet accepted by a channel, with what its channel's list needs; one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    pub(crate) pkt: Pkt,
    /// When the serialisation of the next packet of the same channel ends (valid if `next` is a slot).
    next_done: u64,
    /// The next packet of the same channel ([`NONE`] at the tail).
    next: u32,
    /// The channel the packet is in (a hop event names the slot of its channel's head).
    pub(crate) ch: u32,
}

/// Every packet accepted by a channel and not yet delivered or passed on.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    slots: Vec<Slot>,
    /// Free slots, the last freed on top.
    free: Vec<u32>,
}

impl Slab {
    #[inline(always)]
    pub(crate) fn slot(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }

    /// A slot holding `pkt` at the tail of a list.
    #[inline(always)]
    fn alloc(&mut self, pkt: Pkt, ch: u32) -> u32 {
        let s = Slot {
            pkt,
            next_done: 0,
            next: NONE,
            ch,
        };
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = s;
                i
            }
            None => {
                let i = self.slots.len();
                assert!(i < NONE as usize, "more than 2^32 - 1 packets in flight");
                self.slots.push(s);
                i as u32
            }
        }
    }
}

/// The packet after a list's head: its slot and serialisation end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Next {
    pub(crate) slot: u32,
    pub(crate) done: u64,
}

/// One channel's packets in FIFO order: those before `queued_first` have finished serialising (they
/// propagate), the rest are the queue.
#[derive(Debug)]
pub(crate) struct Fifo {
    /// The serialisation end of `queued_first` (kept here so that a look at the queue that moves
    /// nothing to the wire reads no slot).
    queued_done: u64,
    head: u32,
    tail: u32,
    /// The first packet not known to be on the wire ([`NONE`] if every packet is).
    queued_first: u32,
    /// Packets from `queued_first` on.
    queued: u32,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            queued_done: 0,
            head: NONE,
            tail: NONE,
            queued_first: NONE,
            queued: 0,
        }
    }
}

impl Fifo {
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NONE
    }

    /// Packets not known to be on the wire.
    #[inline(always)]
    pub(crate) fn queued(&self) -> u64 {
        self.queued as u64
    }

    /// The serialisation end of the first packet not known to be on the wire, if any.
    #[inline(always)]
    pub(crate) fn first_queued_done(&self) -> Option<u64> {
        (self.queued_first != NONE).then_some(self.queued_done)
    }

    /// The head (the next packet to reach the far end).
    #[cfg(test)]
    pub(crate) fn front<'s>(&self, slab: &'s Slab) -> Option<&'s Slot> {
        (self.head != NONE).then(|| slab.slot(self.head))
    }

    /// The first packet not known to be on the wire.
    #[inline(always)]
    pub(crate) fn first_queued<'s>(&self, slab: &'s Slab) -> Option<&'s Slot> {
        (self.queued_first != NONE).then(|| slab.slot(self.queued_first))
    }

    /// Every packet is on the wire; returns whether any was not known to be.
    #[inline(always)]
    pub(crate) fn all_on_wire(&mut self) -> bool {
        let moved = self.queued > 0;
        self.queued = 0;
        self.queued_first = NONE;
        moved
    }

    /// The first queued packet is on the wire (there is one); returns its size.
    #[inline(always)]
    pub(crate) fn one_on_wire(&mut self, slab: &Slab) -> u16 {
        let s = slab.slot(self.queued_first);
        self.queued_first = s.next;
        self.queued_done = s.next_done;
        self.queued -= 1;
        s.pkt.size
    }

    /// Appends `pkt`, whose serialisation ends at `done`, to the list of channel `ch`; it is queued.
    /// Returns its slot.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, slab: &mut Slab, pkt: Pkt, done: u64, ch: u32) -> u32 {
        let i = slab.alloc(pkt, ch);
        if self.tail == NONE {
            self.head = i;
        } else {
            let t = &mut slab.slots[self.tail as usize];
            t.next = i;
            t.next_done = done;
        }
        self.tail = i;
        if self.queued_first == NONE {
            self.queued_first = i;
            self.queued_done = done;
        }
        self.queued += 1;
        i
    }

    /// Removes the head and frees its slot: the packet, whether it was known to be on the wire, and the
    /// slot and serialisation end of the packet after it, if any.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self, slab: &mut Slab) -> Option<(Pkt, bool, Option<Next>)> {
        if self.head == NONE {
            return None;
        }
        let i = self.head;
        let s = slab.slot(i);
        let (pkt, next, next_done) = (s.pkt, s.next, s.next_done);
        // The packets before the first queued one are on the wire.
        let was_on_wire = self.queued_first != i;
        if !was_on_wire {
            self.queued_first = next;
            self.queued_done = next_done;
            self.queued -= 1;
        }
        self.head = next;
        if next == NONE {
            self.tail = NONE;
        }
        slab.free.push(i);
        let next = (next != NONE).then_some(Next {
            slot: next,
            done: next_done,
        });
        Some((pkt, was_on_wire, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_fifos_sharing_one_slab_with_reuse() {
        // Three lists on one slab, random pushes, pops and wire marks, against VecDeque models: order,
        // the next packet's serialisation end, the queued / on-wire split, and slot reuse.
        let mut slab = Slab::default();
        let mut lists: Vec<Fifo> = (0..3).map(|_| Fifo::default()).collect();
        let mut models: Vec<std::collections::VecDeque<u64>> = vec![Default::default(); 3];
        let mut wire = [0usize; 3];
        let mut x: u64 = 3;
        let mut peak = 0;
        for step in 0..30_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let l = ((x >> 20) % 3) as usize;
            let (f, m) = (&mut lists[l], &mut models[l]);
            match (x >> 40) % 7 {
                0..=2 => {
                    let pkt = Pkt {
                        seq: step,
                        ..Pkt::EMPTY
                    };
                    f.push_back(&mut slab, pkt, step * 10, l as u32);
                    m.push_back(step);
                }
                3 | 4 => {
                    let got = f.pop_front(&mut slab);
                    match m.pop_front() {
                        None => assert!(got.is_none()),
                        Some(seq) => {
                            let (pkt, on, next) = got.expect("non-empty");
                            assert_eq!(pkt.seq, seq, "step {step}");
                            assert_eq!(on, wire[l] > 0);
                            wire[l] = wire[l].saturating_sub(1);
                            let next = next.map(|n| (slab.slot(n.slot).pkt.seq * 10, n.done));
                            assert_eq!(next, m.front().map(|s| (s * 10, s * 10)));
                        }
                    }
                }
                5 => {
                    if wire[l] < m.len() {
                        assert_eq!(
                            f.first_queued(&slab).map(|s| s.pkt.seq),
                            m.get(wire[l]).copied()
                        );
                        f.one_on_wire(&slab);
                        wire[l] += 1;
                    }
                }
                _ => {
                    assert_eq!(f.all_on_wire(), wire[l] < m.len());
                    wire[l] = m.len();
                }
            }
            let f = &lists[l];
            assert_eq!(f.is_empty(), models[l].is_empty());
            assert_eq!(f.queued() as usize, models[l].len() - wire[l]);
            let first = models[l].get(wire[l]).map(|s| s * 10);
            assert_eq!(f.first_queued_done(), first, "step {step}");
            assert_eq!(
                f.front(&slab).map(|s| s.pkt.seq),
                models[l].front().copied()
            );
            peak = peak.max(models.iter().map(|m| m.len()).sum::<usize>());
        }
        // Freed slots are taken again: the slab never outgrew the most packets held at once.
        assert_eq!(slab.slots.len(), peak);
    }
}
