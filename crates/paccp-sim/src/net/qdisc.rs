//! Queue disciplines: what sits in front of a channel's serialiser besides the plain FIFO.
//!
//! - FIFO drop-tail (no discipline; the channel's own fast path, see [`super::channel`]);
//! - [`Prio`]: N-level strict priority chosen by the packet's class (level `min(class, N-1)`,
//!   level 0 first), each level its own drop-tail limit, optionally RED in front of each;
//! - the host egress stages of [`crate::host`] (per-VM queues with a packet selector, token-bucket
//!   shapers) implement [`Qdisc`] there.
//!
//! A scenario names its disciplines by kind (`queues.host.kind`, `queues.switch.kind`); the parsers are
//! in `sim::qdiscs` (and [`crate::Registry::register_qdisc`] adds one from outside the crate).
//!
//! Limits of a scheduled discipline count the waiting packets (the one being serialised has left the
//! queue, as a Linux qdisc hands it to the NIC).
use super::red::{Red, RedCfg};
use super::{Pkt, QKey};
use crate::config::BufCfg;
use std::collections::VecDeque;

/// A scheduled queue discipline in front of a channel's serialiser.
pub trait Qdisc: std::fmt::Debug {
    /// Whether a packet of `size` bytes with key `key` fits (the limits only).
    fn has_room(&self, size: u64, key: QKey) -> bool;
    /// Admission of an arrival at `now` (`pkt_time`: a full packet's transmission time): the limits of
    /// [`Qdisc::has_room`] and any early drop (default: the limits only).
    fn admit(&mut self, size: u64, key: QKey, _now: u64, _pkt_time: u64) -> bool {
        self.has_room(size, key)
    }
    /// Queues an admitted packet.
    fn push(&mut self, pkt: Pkt, key: QKey);
    /// What the serialiser sends next at `now`.
    fn pop(&mut self, now: u64) -> Pop;
    /// Waiting bytes.
    fn bytes(&self) -> u64;
    /// Waiting packets.
    fn len(&self) -> usize;
    /// The rate (bit/s) and the (packet, byte) limits of the channel it is in front of, told once
    /// when the channel is built (the default: not needed).
    fn on_channel(&mut self, _rate_bps: u64, _limits: (u64, u64)) {}
    /// No packet waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// An ACK of a flow this host sends reached the host: the receive window (segments) it imposes
    /// from now on (`None`, the default: none). `base_ps`: the flow's unloaded RTT. Called only when
    /// [`Qdisc::wants_acks`] says so.
    fn on_ack_in(&mut self, _pkt: &Pkt, _base_ps: u64, _now_ps: u64) -> Option<u64> {
        None
    }
    /// Whether this discipline wants the ACKs of the flows it sends ([`Qdisc::on_ack_in`]).
    fn wants_acks(&self) -> bool {
        false
    }
    /// What its host's congestion control saw of each VM (engine index; the default: nothing;
    /// [`crate::host::Selector::law_counters`]).
    fn law_counters(&self) -> Vec<(u32, LawCounters)> {
        Vec::new()
    }
    /// A copy of data packet `pkt` (its flow's same segment) still waits here, so a retransmission
    /// of it would only take the copy's place on the wire again (the default: never looked for).
    /// The channel then drops the retransmission before admission, as a virtual switch holding the
    /// original would (Linux does the same for its own queues: `skb_still_in_host_queue`).
    fn holds_copy(&self, _pkt: &Pkt, _key: QKey) -> bool {
        false
    }
    /// The packets dropped from the queue since the last call as they came up for service (copies of
    /// segments already acknowledged; the default: none): the caller counts them out of the network.
    fn take_discarded(&mut self) -> u64 {
        0
    }
    /// A flow of VM `vm` (its sender on this host) starts: the receive window (segments) the host
    /// imposes on it from its first segment on, as a virtual switch rewriting the window of the
    /// connection's SYN-ACK would (`None`, the default: none). Called only when
    /// [`Qdisc::wants_acks`] says so.
    fn on_flow_start(&mut self, _flow: u32, _vm: u32, _now_ps: u64) -> Option<u64> {
        None
    }
    /// A flow of this host ended (its last byte acknowledged): forget it (the default: nothing).
    /// Called only when [`Qdisc::wants_acks`] says so.
    fn on_flow_end(&mut self, _flow: u32, _now_ps: u64) {}
    /// After [`Qdisc::on_ack_in`]: a flow whose window the host closed (0) or will reopen, and when
    /// it looks at it again (the engine then calls [`Qdisc::on_reopen`]); drained until `None` (the
    /// default).
    fn next_reopen(&mut self) -> Option<(u32, u64)> {
        None
    }
    /// The window (segments) the host gives `flow` at a time [`Qdisc::next_reopen`] named (`None`:
    /// leave it).
    fn on_reopen(&mut self, _flow: u32, _now_ps: u64) -> Option<u64> {
        None
    }
}

/// What a host's congestion control saw of one VM's traffic
/// ([`crate::host::Selector::law_counters`]): the signal its law met and the rate it set, for
/// comparing VMs at one bottleneck.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LawCounters {
    /// ACKs that carried an RTT sample.
    pub samples: u64,
    /// Their queueing delay beyond the host, summed (ps).
    pub delay_ps: f64,
    /// Time the law advanced over with the ACK marked (ps): each ACK's interval since its
    /// connection's previous one (since the VM's previous one while its ACKs are pooled).
    pub marked_ps: f64,
    /// The same, unmarked with the window in use (the law grows).
    pub unmarked_ps: f64,
    /// The same, unmarked with the window not in use (the law holds, unless the VM is below its
    /// guarantee).
    pub unused_ps: f64,
    /// The VM's law rate (its connections' windows over their RTTs) integrated over the time
    /// between its ACKs (segments).
    pub law_segments: f64,
    /// That time (ps).
    pub law_ps: f64,
}

/// What a discipline yields when the serialiser is free.
#[derive(Debug)]
pub enum Pop {
    /// Serialise this packet now.
    Packet(Pkt),
    /// Packets wait but none may leave before this time (a shaper's bucket refills then).
    WaitUntil(u64),
    /// Nothing queued.
    Empty,
}

/// A drop-tail FIFO with a packet and a byte limit.
#[derive(Debug, Clone, Default)]
pub struct Fifo {
    pkts: VecDeque<Pkt>,
    bytes: u64,
    limit_pkts: u64,
    limit_bytes: u64,
}

impl Fifo {
    /// An empty FIFO with the limit `buf`.
    pub fn new(buf: BufCfg) -> Fifo {
        let (limit_pkts, limit_bytes) = limits(buf);
        Fifo {
            pkts: VecDeque::new(),
            bytes: 0,
            limit_pkts,
            limit_bytes,
        }
    }
    /// Whether a packet of `size` bytes fits.
    #[inline]
    pub fn has_room(&self, size: u64) -> bool {
        (self.pkts.len() as u64) < self.limit_pkts && self.bytes + size <= self.limit_bytes
    }
    /// Appends a packet (the caller checked the room).
    #[inline]
    pub fn push(&mut self, p: Pkt) {
        self.bytes += p.size as u64;
        self.pkts.push_back(p);
    }
    /// The waiting packets, head first.
    pub fn iter(&self) -> impl Iterator<Item = &Pkt> {
        self.pkts.iter()
    }
    /// Removes the head packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Pkt> {
        let p = self.pkts.pop_front()?;
        self.bytes -= p.size as u64;
        Some(p)
    }
    /// Size of the head packet.
    pub fn head_size(&self) -> Option<u64> {
        self.pkts.front().map(|p| p.size as u64)
    }
    /// The head packet.
    pub fn head(&self) -> Option<&Pkt> {
        self.pkts.front()
    }
    /// Waiting packets.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }
    /// No packet waits.
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }
    /// Waiting bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// (packet limit, byte limit) of a buffer description.
pub fn limits(buf: BufCfg) -> (u64, u64) {
    match buf {
        BufCfg::Packets(n) => (n, u64::MAX),
        BufCfg::Bytes(b) => (u64::MAX, b),
    }
}

/// N-level strict priority: level 0 is always served first.
#[derive(Debug, Clone)]
pub struct Prio {
    levels: Vec<Fifo>,
    /// RED early drop per level (empty: drop-tail only).
    red: Vec<Red>,
    /// CE threshold (ps; 0: none): a packet that finds the levels together holding more than this
    /// at the channel's rate is marked CE, whatever its level (a port-wide ECN threshold).
    ce_ps: u64,
    /// That threshold in bytes at the channel's rate, set by [`Qdisc::on_channel`]: a data packet
    /// that finds at least this many bytes waiting is marked (`None`: no marking).
    ce_bytes: Option<u64>,
    /// The levels share one buffer, the channel's own (its link's `buffer`): (packet, byte) limits of
    /// all levels together, set by [`Qdisc::on_channel`] (`None`: each level has its own limit).
    shared: Option<(u64, u64)>,
}

impl Prio {
    /// Levels with these limits (level 0 = highest priority).
    pub fn new(levels: &[BufCfg]) -> Prio {
        Prio {
            levels: levels.iter().map(|&b| Fifo::new(b)).collect(),
            red: Vec::new(),
            ce_ps: 0,
            ce_bytes: None,
            shared: None,
        }
    }
    /// The same, marking CE on packets that find more than `ce_ns` of backlog (all levels; 0:
    /// none), and, if `shared_buffer`, with its levels sharing the channel's own buffer.
    pub fn with_ce(self, ce_ns: u64, shared_buffer: bool) -> Prio {
        Prio {
            ce_ps: ce_ns.saturating_mul(1000),
            shared: shared_buffer.then_some((u64::MAX, u64::MAX)),
            ..self
        }
    }
    /// The same levels with RED in front of each; level `i` draws from stream `{name}/{i}`.
    pub fn with_red(levels: &[BufCfg], cfg: RedCfg, seed: u64, name: &str) -> Prio {
        Prio {
            red: (0..levels.len())
                .map(|i| Red::new(cfg, seed, &format!("{name}/{i}")))
                .collect(),
            ..Prio::new(levels)
        }
    }
    #[inline]
    fn level(&self, key: QKey) -> usize {
        (key.class as usize).min(self.levels.len() - 1)
    }
}

impl Qdisc for Prio {
    fn has_room(&self, size: u64, key: QKey) -> bool {
        if let Some((pkts, bytes)) = self.shared {
            return (self.len() as u64) < pkts && self.bytes() + size <= bytes;
        }
        self.levels[self.level(key)].has_room(size)
    }

    fn admit(&mut self, size: u64, key: QKey, now: u64, pkt_time: u64) -> bool {
        let l = self.level(key);
        if self.red.is_empty() {
            return self.has_room(size, key);
        }
        self.red[l].admit(self.levels[l].len(), now, pkt_time) && self.has_room(size, key)
    }

    fn push(&mut self, mut pkt: Pkt, key: QKey) {
        let l = self.level(key);
        // data only: an ACK is not ECN-capable (its CE is the receiver's echo)
        if let (Some(min), false) = (self.ce_bytes, pkt.is_ack) {
            pkt.ce |= self.bytes() >= min;
        }
        self.levels[l].push(pkt)
    }

    fn on_channel(&mut self, rate_bps: u64, limits: (u64, u64)) {
        // marked when the backlog's time at the rate, in whole ps, is above `ce_ps`:
        // floor(bytes * 8e12 / rate) > ce_ps, i.e. bytes * 8e12 >= (ce_ps + 1) * rate
        if self.ce_ps > 0 && rate_bps > 0 {
            let min = (u128::from(self.ce_ps) + 1) * u128::from(rate_bps);
            self.ce_bytes =
                Some(u64::try_from(min.div_ceil(8_000_000_000_000)).unwrap_or(u64::MAX));
        }
        if self.shared.is_some() {
            self.shared = Some(limits);
        }
    }

    fn pop(&mut self, now: u64) -> Pop {
        let Some(l) = self.levels.iter().position(|l| !l.is_empty()) else {
            return Pop::Empty;
        };
        let pkt = self.levels[l].pop().expect("a non-empty level");
        if self.levels[l].is_empty() {
            if let Some(r) = self.red.get_mut(l) {
                r.went_idle(now);
            }
        }
        Pop::Packet(pkt)
    }

    fn bytes(&self) -> u64 {
        self.levels.iter().map(Fifo::bytes).sum()
    }

    fn len(&self) -> usize {
        self.levels.iter().map(Fifo::len).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sack::SackOpt;

    pub(crate) fn pkt(flow: u32, class: u8, size: u16) -> Pkt {
        Pkt {
            flow,
            pos: 0,
            is_ack: false,
            class,
            size,
            seq: 0,
            ts: 0,
            sack: SackOpt::NONE,
            ce: false,
        }
    }

    fn key(class: u8) -> QKey {
        QKey {
            class,
            vm: QKey::NO_VM,
        }
    }

    #[test]
    fn a_port_wide_ce_threshold_marks_data_of_every_level_but_no_ack() {
        // 1 Gb/s, 10 us: a packet that finds more than 1,250 bytes waiting (any level) is marked
        let mut s = Prio::new(&[BufCfg::Packets(10), BufCfg::Packets(10)]).with_ce(10_000, false);
        s.on_channel(1_000_000_000, (10, u64::MAX));
        s.push(pkt(0, 1, 1000), key(1));
        s.push(pkt(1, 0, 1000), key(0)); // finds 1,000 bytes: not marked
        s.push(pkt(2, 0, 1000), key(0)); // finds 2,000 bytes at the other level too: marked
        let mut ack = pkt(3, 0, 40);
        ack.is_ack = true;
        s.push(ack, key(0));
        let mut got = Vec::new();
        while let Pop::Packet(p) = s.pop(0) {
            got.push((p.flow, p.ce));
        }
        assert_eq!(got, vec![(1, false), (2, true), (3, false), (0, false)]);
        // without a threshold nothing is marked
        let mut s = Prio::new(&[BufCfg::Packets(10)]);
        s.on_channel(1_000_000_000, (10, u64::MAX));
        for f in 0..5 {
            s.push(pkt(f, 0, 1500), key(0));
        }
        while let Pop::Packet(p) = s.pop(0) {
            assert!(!p.ce);
        }
    }

    #[test]
    fn levels_may_share_the_channels_buffer() {
        // shared: 3 packets in all, whatever their level (the levels' own limits do not count)
        let mut s = Prio::new(&[BufCfg::Packets(1), BufCfg::Packets(1)]).with_ce(0, true);
        s.on_channel(1_000_000_000, (3, u64::MAX));
        for l in [1u8, 1, 0] {
            assert!(s.admit(1500, key(l), 0, 0));
            s.push(pkt(0, l, 1500), key(l));
        }
        assert!(!s.has_room(1500, key(0)) && !s.admit(1500, key(1), 0, 0));
        s.pop(0);
        assert!(s.has_room(1500, key(0)));
        // not shared: each level has its own limit
        let mut s = Prio::new(&[BufCfg::Packets(1), BufCfg::Packets(1)]).with_ce(0, false);
        s.on_channel(1_000_000_000, (3, u64::MAX));
        s.push(pkt(0, 1, 1500), key(1));
        assert!(!s.has_room(1500, key(1)) && s.has_room(1500, key(0)));
    }

    #[test]
    fn strict_priority_is_strict_and_limits_are_per_level() {
        let mut s = Prio::new(&[BufCfg::Packets(3), BufCfg::Packets(2)]);
        for i in 0..4 {
            // Low priority first, class 7 maps to the last level.
            let k = key(if i % 2 == 0 { 1 } else { 7 });
            if s.has_room(1500, k) {
                s.push(pkt(i, k.class, 1500), k);
            }
        }
        assert_eq!(s.len(), 2, "the low level holds 2 packets");
        assert!(!s.has_room(1500, key(1)));
        for i in 10..13 {
            assert!(s.has_room(1500, key(0)));
            s.push(pkt(i, 0, 1500), key(0));
        }
        assert!(!s.has_room(1500, key(0)), "the high level holds 3 packets");
        let order: Vec<u32> = std::iter::from_fn(|| match s.pop(0) {
            Pop::Packet(p) => Some(p.flow),
            _ => None,
        })
        .collect();
        assert_eq!(order, vec![10, 11, 12, 0, 1]);
        assert_eq!(s.bytes(), 0);
    }
}
