//! The host egress stage: what sits in front of a host's NIC serialiser besides the plain FIFO.
//!
//! - [`PerVm`]: one drop-tail queue per VM of the host, served by a pluggable [`Selector`]
//!   (the packet selector; [`RoundRobin`] is built in, SoftBW's fulfilment scheduler is another);
//! - [`shaper::Shaper`]: token-bucket rate limiters per class or per VM (HTB-like classes without
//!   borrowing), unshaped traffic in a FIFO beside them.
//!
//! Adding a selector (docs/adding-a-scheme.md): a new file with a type implementing [`Selector`] and a
//! `parse` function, plus one line in [`builtin_selectors`] (or [`crate::Registry::register_selector`]
//! from outside the crate, wrapped in [`AnySelector::Custom`]).
pub mod elasticswitch;
pub mod paccp_host;
pub mod shaper;
pub mod softbw;

use crate::config::BufCfg;
use crate::error::{EngineError, Result};
pub use crate::net::qdisc::LawCounters;
use crate::net::qdisc::{limits, Fifo, Pop, Qdisc};
use crate::net::{Pkt, QKey};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// One VM's queue at a host's egress (or one of its sub-queues, see [`Selector::subqueue`]).
#[derive(Debug, Clone)]
pub struct VmQueue {
    /// Engine index of the VM ([`QKey::NO_VM`] for flows without a VM).
    pub vm: u32,
    /// The sub-queue of the VM the selector put this queue's packets in (0 unless it splits VMs).
    pub sub: u32,
    /// Its packets.
    pub fifo: Fifo,
}

/// A VM known to the engine (what a selector's parser may read).
#[derive(Debug, Clone)]
pub struct VmInfo {
    /// Its id.
    pub id: String,
    /// Engine index of its host node.
    pub host: u32,
    /// Its minimum rate (bit/s).
    pub theta_bps: u64,
    /// Its weight.
    pub omega: f64,
}

/// Picks which VM queue a host's NIC serves next.
pub trait Selector: std::fmt::Debug {
    /// The index of a non-empty queue to serve now, or `None` if none may send now (at least one
    /// queue is non-empty when called).
    fn select(&mut self, queues: &[VmQueue], now_ps: u64) -> Option<usize>;
    /// After `select` returned `None`: the earliest time one may send (`None`: at the next arrival).
    fn next_eligible(&self, _queues: &[VmQueue], _now_ps: u64) -> Option<u64> {
        None
    }
    /// Packet `pkt` left queue `idx`.
    fn on_dequeue(&mut self, _idx: usize, _pkt: &Pkt, _now_ps: u64) {}
    /// After [`Selector::on_dequeue`]: the class (priority level in the switches) the host gives the
    /// packet (`None`, the default: the one its guest gave it).
    fn class_of(&mut self, _pkt: &Pkt, _now_ps: u64) -> Option<u8> {
        None
    }
    /// The sub-queue of its VM a packet joins (default 0: one queue per VM). The VM's buffer limit
    /// holds for all its sub-queues together.
    fn subqueue(&self, _pkt: &Pkt) -> u32 {
        0
    }
    /// An ACK of a flow this host sends reached the host (before its guest sees it): the receive
    /// window (segments) the host imposes on the flow from now on, as a virtual switch rewriting the
    /// ACK's window would (AC/DC TCP, vCC); `None` (the default): leave it. `base_ps`: the flow's
    /// unloaded RTT (propagation and serialisation of its path, both ways). Called only when
    /// [`Selector::wants_acks`] says so.
    fn on_ack_in(&mut self, _pkt: &Pkt, _base_ps: u64, _now_ps: u64) -> Option<u64> {
        None
    }
    /// Whether the host wants the ACKs of its flows ([`Selector::on_ack_in`]).
    fn wants_acks(&self) -> bool {
        false
    }
    /// What its congestion control saw of each VM (engine index), for the output's `host_law`
    /// (the default: nothing).
    fn law_counters(&self) -> Vec<(u32, LawCounters)> {
        Vec::new()
    }
    /// Whether the host drops a retransmission of a segment whose original still waits in its
    /// queue ([`Qdisc::holds_copy`]; the default: no).
    fn drops_copies(&self) -> bool {
        false
    }
    /// Whether a data packet waiting in its queue is a copy of a segment the host has already seen
    /// acknowledged (a guest's spurious retransmission): dropped when it comes up for service
    /// instead of taking its VM's share (the default: never).
    fn stale(&self, _pkt: &Pkt) -> bool {
        false
    }
    /// A flow of VM `vm` starts (its sender on this host; `queues`: the host's queues now): the
    /// receive window (segments) the host imposes on it from its first segment on, as a virtual
    /// switch rewriting the window of the connection's SYN-ACK would (`None`, the default: none).
    /// Called only when [`Selector::wants_acks`] says so.
    fn on_flow_start(
        &mut self,
        _queues: &[VmQueue],
        _flow: u32,
        _vm: u32,
        _now_ps: u64,
    ) -> Option<u64> {
        None
    }
    /// A flow of this host ended (its last byte acknowledged; a virtual switch sees the
    /// connection's FIN): forget it (the default: nothing). Called only when
    /// [`Selector::wants_acks`] says so.
    fn on_flow_end(&mut self, _flow: u32, _now_ps: u64) {}
    /// After [`Selector::on_ack_in`]: a flow whose window the host closed (0) or will reopen, and
    /// when it looks at it again, as a virtual switch sending its guest a window update would (the
    /// engine then calls [`Selector::on_reopen`]); drained until `None` (the default).
    fn next_reopen(&mut self) -> Option<(u32, u64)> {
        None
    }
    /// The window (segments) the host gives `flow` at a time [`Selector::next_reopen`] named
    /// (`None`: leave it).
    fn on_reopen(&mut self, _flow: u32, _now_ps: u64) -> Option<u64> {
        None
    }
    /// Whether a new sub-queue may take over an empty queue slot of any VM (false, the default:
    /// slots are kept, for selectors with state per slot). A selector with a sub-queue per
    /// connection says true, so a host's slots stay as many as its queues with data at once, not
    /// as many as the connections it ever carried.
    fn recycles_slots(&self) -> bool {
        false
    }
}

/// Packet round-robin over the non-empty VM queues (fair in packets).
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    last: Option<usize>,
}

impl Selector for RoundRobin {
    fn select(&mut self, queues: &[VmQueue], _now_ps: u64) -> Option<usize> {
        let n = queues.len();
        let start = self.last.map_or(0, |l| l + 1);
        let pick = (0..n)
            .map(|i| (start + i) % n)
            .find(|&i| !queues[i].fifo.is_empty())?;
        self.last = Some(pick);
        Some(pick)
    }
}

/// The selector of one host: built-in variants (static dispatch) plus registered ones.
#[derive(Debug)]
pub enum AnySelector {
    /// Round-robin.
    RoundRobin(RoundRobin),
    /// A selector registered with [`crate::Registry::register_selector`].
    Custom(Box<dyn Selector>),
}

impl Selector for AnySelector {
    fn select(&mut self, q: &[VmQueue], now: u64) -> Option<usize> {
        match self {
            AnySelector::RoundRobin(s) => s.select(q, now),
            AnySelector::Custom(s) => s.select(q, now),
        }
    }
    fn next_eligible(&self, q: &[VmQueue], now: u64) -> Option<u64> {
        match self {
            AnySelector::RoundRobin(s) => s.next_eligible(q, now),
            AnySelector::Custom(s) => s.next_eligible(q, now),
        }
    }
    fn on_dequeue(&mut self, idx: usize, pkt: &Pkt, now: u64) {
        match self {
            AnySelector::RoundRobin(s) => s.on_dequeue(idx, pkt, now),
            AnySelector::Custom(s) => s.on_dequeue(idx, pkt, now),
        }
    }
    fn class_of(&mut self, pkt: &Pkt, now: u64) -> Option<u8> {
        match self {
            AnySelector::RoundRobin(_) => None,
            AnySelector::Custom(s) => s.class_of(pkt, now),
        }
    }
    fn subqueue(&self, pkt: &Pkt) -> u32 {
        match self {
            AnySelector::RoundRobin(s) => s.subqueue(pkt),
            AnySelector::Custom(s) => s.subqueue(pkt),
        }
    }
    fn on_ack_in(&mut self, pkt: &Pkt, base: u64, now: u64) -> Option<u64> {
        match self {
            AnySelector::RoundRobin(_) => None,
            AnySelector::Custom(s) => s.on_ack_in(pkt, base, now),
        }
    }
    fn wants_acks(&self) -> bool {
        match self {
            AnySelector::RoundRobin(_) => false,
            AnySelector::Custom(s) => s.wants_acks(),
        }
    }
    fn law_counters(&self) -> Vec<(u32, LawCounters)> {
        match self {
            AnySelector::RoundRobin(_) => Vec::new(),
            AnySelector::Custom(s) => s.law_counters(),
        }
    }
    fn drops_copies(&self) -> bool {
        match self {
            AnySelector::RoundRobin(_) => false,
            AnySelector::Custom(s) => s.drops_copies(),
        }
    }
    fn stale(&self, pkt: &Pkt) -> bool {
        match self {
            AnySelector::RoundRobin(_) => false,
            AnySelector::Custom(s) => s.stale(pkt),
        }
    }
    fn recycles_slots(&self) -> bool {
        match self {
            AnySelector::RoundRobin(_) => false,
            AnySelector::Custom(s) => s.recycles_slots(),
        }
    }
    fn on_flow_start(&mut self, q: &[VmQueue], flow: u32, vm: u32, now: u64) -> Option<u64> {
        match self {
            AnySelector::RoundRobin(_) => None,
            AnySelector::Custom(s) => s.on_flow_start(q, flow, vm, now),
        }
    }
    fn on_flow_end(&mut self, flow: u32, now: u64) {
        if let AnySelector::Custom(s) = self {
            s.on_flow_end(flow, now);
        }
    }
    fn next_reopen(&mut self) -> Option<(u32, u64)> {
        match self {
            AnySelector::RoundRobin(_) => None,
            AnySelector::Custom(s) => s.next_reopen(),
        }
    }
    fn on_reopen(&mut self, flow: u32, now: u64) -> Option<u64> {
        match self {
            AnySelector::RoundRobin(_) => None,
            AnySelector::Custom(s) => s.on_reopen(flow, now),
        }
    }
}

/// Makes the selector of one host (argument: the host's node index).
pub type SelectorMaker = Box<dyn Fn(u32) -> AnySelector>;

/// Reads a `selector` object (`kind` included) given the scenario's VMs; errors name the field.
pub type SelectorParser = fn(&Value, &[VmInfo]) -> Result<SelectorMaker>;

/// The built-in selectors: `(kind, parser)`. One line per selector.
pub fn builtin_selectors() -> Vec<(&'static str, SelectorParser)> {
    vec![
        ("round_robin", parse_round_robin),
        ("softbw", softbw::parse),
        ("elasticswitch", elasticswitch::parse),
        ("paccp_host", paccp_host::parse),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RoundRobinCfg {
    /// `"round_robin"`.
    #[allow(dead_code)]
    kind: String,
}

fn parse_round_robin(v: &Value, _vms: &[VmInfo]) -> Result<SelectorMaker> {
    let _: RoundRobinCfg = serde_json::from_value(v.clone())
        .map_err(|e| EngineError::Parse(format!("queues.host.selector: {e}")))?;
    Ok(Box::new(|_| AnySelector::RoundRobin(RoundRobin::default())))
}

/// Per-VM queues at a host's egress, each with the same drop-tail limit, served by a selector.
#[derive(Debug)]
pub struct PerVm {
    queues: Vec<VmQueue>,
    buffer: BufCfg,
    selector: AnySelector,
    /// Packets dropped at the head of their queue since the channel last asked (`Selector::stale`).
    discarded: u64,
}

impl PerVm {
    /// No queue yet (one is made for each VM at its first packet).
    pub fn new(buffer: BufCfg, selector: AnySelector) -> PerVm {
        PerVm {
            queues: Vec::new(),
            buffer,
            selector,
            discarded: 0,
        }
    }

    fn slot(&self, vm: u32, sub: u32) -> Option<usize> {
        self.queues.iter().position(|q| q.vm == vm && q.sub == sub)
    }
}

impl Qdisc for PerVm {
    fn has_room(&self, size: u64, key: QKey) -> bool {
        // The VM's limit over all its sub-queues (one queue per VM unless the selector splits).
        let (limit_pkts, limit_bytes) = limits(self.buffer);
        let (pkts, bytes) = self
            .queues
            .iter()
            .filter(|q| q.vm == key.vm)
            .fold((0u64, 0u64), |(n, b), q| {
                (n + q.fifo.len() as u64, b + q.fifo.bytes())
            });
        pkts < limit_pkts && bytes + size <= limit_bytes
    }

    fn holds_copy(&self, pkt: &Pkt, key: QKey) -> bool {
        if pkt.is_ack || !self.selector.drops_copies() {
            return false;
        }
        self.slot(key.vm, self.selector.subqueue(pkt))
            .is_some_and(|i| {
                self.queues[i]
                    .fifo
                    .iter()
                    .any(|p| p.flow == pkt.flow && p.seq == pkt.seq && !p.is_ack)
            })
    }

    fn push(&mut self, pkt: Pkt, key: QKey) {
        let sub = self.selector.subqueue(&pkt);
        let i = match self.slot(key.vm, sub) {
            Some(i) => i,
            None => {
                // a new sub-queue takes over an empty slot if the selector recycles them
                let free = if self.selector.recycles_slots() {
                    self.queues.iter().position(|q| q.fifo.is_empty())
                } else {
                    None
                };
                match free {
                    Some(i) => {
                        let q = &mut self.queues[i];
                        (q.vm, q.sub) = (key.vm, sub);
                        i
                    }
                    None => {
                        self.queues.push(VmQueue {
                            vm: key.vm,
                            sub,
                            fifo: Fifo::new(self.buffer),
                        });
                        self.queues.len() - 1
                    }
                }
            }
        };
        self.queues[i].fifo.push(pkt);
    }

    fn pop(&mut self, now: u64) -> Pop {
        if self.selector.drops_copies() {
            // copies of segments the host saw acknowledged go before any queue is chosen, so that
            // none is charged to its VM's share
            for q in &mut self.queues {
                while q.fifo.head().is_some_and(|p| self.selector.stale(p)) {
                    q.fifo.pop();
                    self.discarded += 1;
                }
            }
        }
        if self.len() == 0 {
            return Pop::Empty;
        }
        match self.selector.select(&self.queues, now) {
            Some(i) => match self.queues[i].fifo.pop() {
                Some(mut p) => {
                    self.selector.on_dequeue(i, &p, now);
                    if let Some(c) = self.selector.class_of(&p, now) {
                        p.class = c;
                    }
                    Pop::Packet(p)
                }
                None => Pop::Empty,
            },
            None => match self.selector.next_eligible(&self.queues, now) {
                Some(t) if t > now => Pop::WaitUntil(t),
                _ => Pop::Empty,
            },
        }
    }

    fn take_discarded(&mut self) -> u64 {
        std::mem::take(&mut self.discarded)
    }

    fn bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.fifo.bytes()).sum()
    }

    /// [`Selector::on_ack_in`] of its selector.
    fn on_ack_in(&mut self, pkt: &Pkt, base: u64, now: u64) -> Option<u64> {
        self.selector.on_ack_in(pkt, base, now)
    }

    /// [`Selector::wants_acks`] of its selector.
    fn wants_acks(&self) -> bool {
        self.selector.wants_acks()
    }

    /// [`Selector::law_counters`] of its selector.
    fn law_counters(&self) -> Vec<(u32, LawCounters)> {
        self.selector.law_counters()
    }

    /// [`Selector::on_flow_start`] of its selector, with its queues.
    fn on_flow_start(&mut self, flow: u32, vm: u32, now: u64) -> Option<u64> {
        self.selector.on_flow_start(&self.queues, flow, vm, now)
    }

    /// [`Selector::on_flow_end`] of its selector.
    fn on_flow_end(&mut self, flow: u32, now: u64) {
        self.selector.on_flow_end(flow, now);
    }

    /// [`Selector::next_reopen`] of its selector.
    fn next_reopen(&mut self) -> Option<(u32, u64)> {
        self.selector.next_reopen()
    }

    /// [`Selector::on_reopen`] of its selector.
    fn on_reopen(&mut self, flow: u32, now: u64) -> Option<u64> {
        self.selector.on_reopen(flow, now)
    }

    fn len(&self) -> usize {
        self.queues.iter().map(|q| q.fifo.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::qdisc::tests::pkt;

    #[test]
    fn round_robin_is_fair_between_vms() {
        let mut v = PerVm::new(
            BufCfg::Packets(100),
            AnySelector::RoundRobin(RoundRobin::default()),
        );
        // VM 0 is backlogged with 50 packets, VM 1 with 10, VM 2 with 20.
        for (vm, n) in [(0u32, 50u32), (1, 10), (2, 20)] {
            for _ in 0..n {
                let k = QKey { class: 0, vm };
                assert!(v.has_room(1500, k));
                v.push(pkt(vm, 0, 1500), k);
            }
        }
        let mut served = [0u32; 3];
        for _ in 0..30 {
            match v.pop(0) {
                Pop::Packet(p) => served[p.flow as usize] += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            served,
            [10, 10, 10],
            "equal shares while all are backlogged"
        );
        for _ in 0..30 {
            if let Pop::Packet(p) = v.pop(0) {
                served[p.flow as usize] += 1;
            }
        }
        assert_eq!(served, [30, 10, 20], "an empty queue is skipped");
        let k = QKey { class: 0, vm: 0 };
        let mut small = PerVm::new(
            BufCfg::Packets(2),
            AnySelector::RoundRobin(RoundRobin::default()),
        );
        small.push(pkt(0, 0, 1500), k);
        small.push(pkt(0, 0, 1500), k);
        assert!(!small.has_room(1500, k), "each VM queue is drop-tail");
        assert!(small.has_room(1500, QKey { class: 0, vm: 1 }));
    }
}
