//! Token-bucket rate limiters at a host's egress, one per class or per VM (like HTB classes with
//! `rate = ceil`, i.e. without borrowing; or one `tbf` per class). Traffic that matches no bucket goes
//! to an unshaped FIFO beside them. The serialiser serves the eligible queues round-robin: the
//! unshaped FIFO and every bucket whose head packet fits its tokens.
//!
//! A bucket holds at most `burst_bytes` of tokens (full at start) and gains `rate_bps`; a packet of
//! `s` bytes needs `s` bytes of tokens. Over any interval of length `T` a bucket sends at most
//! `burst + rate * T` bytes. Integer arithmetic: tokens are counted in bit-picoseconds per second
//! (bits * 10^12), which `rate_bps` adds every picosecond exactly.
use crate::config::BufCfg;
use crate::net::qdisc::{Fifo, Pop, Qdisc};
use crate::net::{Pkt, QKey};
use std::collections::BTreeSet;

const SCALE: u128 = 1_000_000_000_000;

/// What the buckets are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeBy {
    /// The packet's class / mark.
    Class,
    /// The VM of the packet's flow.
    Vm,
}

/// One token bucket with its queue.
#[derive(Debug, Clone)]
pub struct Bucket {
    /// The class or VM index it shapes.
    pub key: u32,
    rate_bps: u64,
    cap: u128,
    tokens: u128,
    last: u64,
    fifo: Fifo,
}

impl Bucket {
    /// A full bucket of `burst_bytes` filling at `rate_bps` (> 0), with the queue limit `buffer`.
    pub fn new(key: u32, rate_bps: u64, burst_bytes: u64, buffer: BufCfg) -> Bucket {
        let cap = burst_bytes as u128 * 8 * SCALE;
        Bucket {
            key,
            rate_bps,
            cap,
            tokens: cap,
            last: 0,
            fifo: Fifo::new(buffer),
        }
    }

    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last) as u128;
        self.tokens = (self.tokens + dt * self.rate_bps as u128).min(self.cap);
        self.last = now;
    }

    fn need(size: u64) -> u128 {
        size as u128 * 8 * SCALE
    }

    /// When the head packet's tokens are there (`now` if already).
    fn ready_at(&self, now: u64) -> Option<u64> {
        let size = self.fifo.head_size()?;
        let need = Self::need(size);
        if self.tokens >= need {
            return Some(now);
        }
        let wait = (need - self.tokens).div_ceil(self.rate_bps.max(1) as u128);
        Some(now.saturating_add(wait as u64))
    }
}

/// The shapers of one host NIC.
#[derive(Debug, Clone)]
pub struct Shaper {
    by: ShapeBy,
    buckets: Vec<Bucket>,
    unshaped: Fifo,
    /// Round-robin position over [unshaped, bucket 0, bucket 1, ...].
    rr: usize,
    /// Serve eligible buckets in their listed order before the unshaped FIFO (instead of round-robin).
    priority: bool,
    /// Bucket of each key (`key` -> index + 1; 0 = none).
    index: Vec<u32>,
    /// Buckets with a packet waiting (only these can be served or set a wait: a bucket's refill is
    /// lazy, so skipping the empty ones changes nothing and a NIC with many VMs' buckets stays fast).
    busy: BTreeSet<usize>,
    /// Scratch: the positions [unshaped = 0, bucket b = b + 1] to visit at a dequeue.
    order: Vec<usize>,
}

impl Shaper {
    /// Buckets keyed `by` class or VM; `unshaped` is the limit of the FIFO of everything else. With
    /// `priority`, eligible buckets are served in their listed order before the unshaped FIFO;
    /// otherwise every eligible queue in turn.
    pub fn new(by: ShapeBy, buckets: Vec<Bucket>, unshaped: BufCfg, priority: bool) -> Shaper {
        let mut index = vec![
            0u32;
            buckets
                .iter()
                .map(|b| b.key as usize + 1)
                .max()
                .unwrap_or(0)
        ];
        for (i, b) in buckets.iter().enumerate().rev() {
            index[b.key as usize] = i as u32 + 1; // the first bucket of a key wins, as a search would
        }
        Shaper {
            by,
            buckets,
            unshaped: Fifo::new(unshaped),
            rr: 0,
            priority,
            index,
            busy: BTreeSet::new(),
            order: Vec::new(),
        }
    }

    #[inline]
    fn bucket_of(&self, key: QKey) -> Option<usize> {
        let k = match self.by {
            ShapeBy::Class => key.class as u32,
            ShapeBy::Vm => key.vm,
        };
        match self.index.get(k as usize) {
            Some(&i) if i > 0 => Some(i as usize - 1),
            _ => None,
        }
    }

    /// The positions to visit, in service order: buckets in listed order then the unshaped FIFO
    /// (priority), or every position from `rr` on, cyclically (round-robin); empty buckets left out.
    fn fill_order(&mut self) {
        let order = &mut self.order;
        order.clear();
        if self.priority {
            order.extend(self.busy.iter().map(|&b| b + 1));
            order.push(0);
            return;
        }
        let rr = self.rr;
        if rr == 0 {
            order.push(0);
            order.extend(self.busy.iter().map(|&b| b + 1));
        } else {
            order.extend(self.busy.range(rr - 1..).map(|&b| b + 1));
            order.push(0);
            order.extend(self.busy.range(..rr - 1).map(|&b| b + 1));
        }
    }
}

impl Qdisc for Shaper {
    fn has_room(&self, size: u64, key: QKey) -> bool {
        match self.bucket_of(key) {
            Some(i) => self.buckets[i].fifo.has_room(size),
            None => self.unshaped.has_room(size),
        }
    }

    fn push(&mut self, pkt: Pkt, key: QKey) {
        match self.bucket_of(key) {
            Some(i) => {
                self.buckets[i].fifo.push(pkt);
                self.busy.insert(i);
            }
            None => self.unshaped.push(pkt),
        }
    }

    fn pop(&mut self, now: u64) -> Pop {
        let n = self.buckets.len() + 1;
        let mut wait: Option<u64> = None;
        self.fill_order();
        for k in 0..self.order.len() {
            let q = self.order[k];
            if q == 0 {
                if let Some(p) = self.unshaped.pop() {
                    self.rr = 1 % n;
                    return Pop::Packet(p);
                }
                continue;
            }
            let b = &mut self.buckets[q - 1];
            b.refill(now);
            match b.ready_at(now) {
                Some(t) if t <= now => {
                    let p = b.fifo.pop().expect("a head packet");
                    b.tokens -= Bucket::need(p.size as u64);
                    if b.fifo.is_empty() {
                        self.busy.remove(&(q - 1));
                    }
                    self.rr = (q + 1) % n;
                    return Pop::Packet(p);
                }
                Some(t) => wait = Some(wait.map_or(t, |w: u64| w.min(t))),
                None => {}
            }
        }
        match wait {
            Some(t) => Pop::WaitUntil(t),
            None => Pop::Empty,
        }
    }

    fn bytes(&self) -> u64 {
        self.unshaped.bytes()
            + self
                .busy
                .iter()
                .map(|&b| self.buckets[b].fifo.bytes())
                .sum::<u64>()
    }

    fn len(&self) -> usize {
        self.unshaped.len()
            + self
                .busy
                .iter()
                .map(|&b| self.buckets[b].fifo.len())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::qdisc::tests::pkt;

    /// Drives a shaper behind a serialiser of `link_bps` for `until` ps with every queue backlogged;
    /// returns bytes sent per class.
    fn drive(s: &mut Shaper, link_bps: u64, until: u64) -> [u64; 3] {
        let mut sent = [0u64; 3];
        let mut now = 0u64;
        let tx = |size: u64| size * 8 * 1_000_000_000_000 / link_bps;
        while now < until {
            for class in 0..3u8 {
                let k = QKey {
                    class,
                    vm: QKey::NO_VM,
                };
                while s.has_room(1500, k) {
                    s.push(pkt(0, class, 1500), k);
                }
            }
            match s.pop(now) {
                Pop::Packet(p) => {
                    sent[p.class as usize] += p.size as u64;
                    now += tx(p.size as u64);
                }
                Pop::WaitUntil(t) => now = t,
                Pop::Empty => unreachable!("backlogged"),
            }
        }
        sent
    }

    #[test]
    fn buckets_hold_their_rates_and_unshaped_traffic_takes_the_rest() {
        // 10 Gb/s link; class 1 shaped to 1 Gb/s, class 2 to 3 Gb/s (burst 15 kB each); class 0 free.
        let buf = BufCfg::Packets(50);
        let mut s = Shaper::new(
            ShapeBy::Class,
            vec![
                Bucket::new(1, 1_000_000_000, 15_000, buf),
                Bucket::new(2, 3_000_000_000, 15_000, buf),
            ],
            buf,
            false,
        );
        let t = 100_000_000_000u64; // 100 ms
        let sent = drive(&mut s, 10_000_000_000, t);
        let rate = |b: u64| b as f64 * 8.0 / 0.1;
        let (r0, r1, r2) = (rate(sent[0]), rate(sent[1]), rate(sent[2]));
        // At most rate * T + burst; at least rate * T - one packet (the buckets are always backlogged).
        assert!(
            sent[1] <= 1_000_000_000 / 8 / 10 + 15_000 && r1 > 0.99e9,
            "{r1}"
        );
        assert!(
            sent[2] <= 3_000_000_000 / 8 / 10 + 15_000 && r2 > 2.99e9,
            "{r2}"
        );
        assert!(
            (r0 + r1 + r2) > 9.99e9 && r0 > 5.9e9,
            "work-conserving: {r0}"
        );
    }

    #[test]
    fn a_lone_shaped_class_waits_for_tokens() {
        let buf = BufCfg::Packets(10);
        let mut s = Shaper::new(
            ShapeBy::Vm,
            vec![Bucket::new(7, 1_000_000_000, 3_000, buf)],
            buf,
            true,
        );
        let k = QKey { class: 0, vm: 7 };
        for _ in 0..3 {
            s.push(pkt(0, 0, 1500), k);
        }
        assert!(matches!(s.pop(0), Pop::Packet(_)));
        assert!(matches!(s.pop(0), Pop::Packet(_)));
        // The burst (2 packets) is spent: the third waits 1500 B at 1 Gb/s = 12 us.
        match s.pop(0) {
            Pop::WaitUntil(t) => assert_eq!(t, 12_000_000),
            other => panic!("{other:?}"),
        }
        assert!(matches!(s.pop(12_000_000), Pop::Packet(_)));
        assert!(matches!(s.pop(12_000_000), Pop::Empty));
        // Priority order: an eligible bucket goes before unshaped traffic.
        s.push(pkt(1, 0, 1500), QKey { class: 0, vm: 3 });
        s.push(pkt(2, 0, 1500), k);
        match s.pop(100_000_000) {
            Pop::Packet(p) => assert_eq!(p.flow, 2),
            other => panic!("{other:?}"),
        }
    }
}
