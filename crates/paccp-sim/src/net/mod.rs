//! The network at run time: packets, channels (one direction of a link: a queue discipline, a
//! serialiser and a propagation pipe) and the queue disciplines. Topologies and routes are
//! [`crate::topo`].
pub(crate) mod channel;
pub mod qdisc;
pub mod red;
pub(crate) mod slab;

use crate::sack::SackOpt;

/// A packet in the network (data segment or ACK); a small `Copy` value.
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    /// Flow index.
    pub flow: u32,
    /// Position in the simulation's flat route table of the channel the packet is on (the next
    /// channel is at `pos + 1`; [`ROUTE_END`] ends a route), so forwarding never reads the flow.
    pub pos: u32,
    /// ACK (true) or data (false).
    pub is_ack: bool,
    /// Class / mark (0 by default): selects the level of a strict-priority queue or a shaper class.
    pub class: u8,
    /// Size on the wire (bytes; the MTU is at most 65,535).
    pub size: u16,
    /// Data: segment number; ACK: cumulative next expected segment.
    pub seq: u64,
    /// Data: send time (ps); ACK: echoed send time of the segment that triggered it.
    pub ts: u64,
    /// ACK only, with `transport.sack`: the SACK blocks (relative to `seq`).
    pub(crate) sack: SackOpt,
    /// Congestion experienced: data, a switch queue with a CE threshold found its backlog above it
    /// (`queues.switch.ce_ns`); ACK, the receiver echoes it (as ECN's CE and ECE, per ACK as DCTCP).
    pub ce: bool,
}

impl Pkt {
    /// A placeholder.
    #[cfg(test)]
    pub(crate) const EMPTY: Pkt = Pkt {
        flow: 0,
        pos: 0,
        is_ack: false,
        class: 0,
        size: 0,
        seq: 0,
        ts: 0,
        sack: SackOpt::NONE,
        ce: false,
    };
}

/// Ends a route in the flat route table.
pub const ROUTE_END: u32 = u32::MAX;

/// What a queue discipline may classify a packet by: its class (mark) and the VM of its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QKey {
    /// The packet's class / mark.
    pub class: u8,
    /// The VM of the packet's flow ([`QKey::NO_VM`] if none).
    pub vm: u32,
}

impl QKey {
    /// The VM id of a flow without a VM.
    pub const NO_VM: u32 = u32::MAX;
}

/// Engine-wide packet counters.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NetStats {
    pub(crate) packets_sent: u64,
    pub(crate) packets_dropped: u64,
    pub(crate) in_flight: u64,
    pub(crate) peak_in_flight: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_packet_stays_small() {
        // 41 bytes of fields (40 before the CE mark), padded to 48; a packet in flight lives in a
        // slab slot, which stays one cache line with it
        assert_eq!(std::mem::size_of::<super::Pkt>(), 48);
        assert_eq!(std::mem::size_of::<super::slab::Slot>(), 64);
    }
}
