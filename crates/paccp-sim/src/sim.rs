//! The discrete-event core: a [`Simulation`] value owns the network, the flows and the event queue.
//!
//! Time is integer picoseconds. Events are small `Copy` values in a binary heap keyed by
//! (time, instant scheduled at, insertion sequence), so simultaneous events run in the order they were
//! scheduled and every run is deterministic. One event per packet hop: a FIFO drop-tail channel fixes a
//! packet's serialisation end when it accepts it, so only the arrival at the far end is an event, and
//! each channel has at most one such event in the heap (its pipe's head). Packets are `Copy` structs
//! held in the channels' pipes; a route is a slice of channel indices precomputed per flow.
//!
//! Transport model (window-based TCP, segment-numbered sequence space):
//! - MSS = mtu - header; a finite flow of `size` bytes sends `ceil(size / MSS)` segments, the last one
//!   shorter. The usable window is `max(1, floor(cwnd))` segments (plus the NewReno inflation in recovery).
//! - The receiver sends cumulative ACKs (next expected segment) echoing the send time of the segment that
//!   triggered them (like TCP timestamps), keeps out-of-order segments, and acknowledges out-of-order or
//!   duplicate segments at once; with `delayed_ack` it acknowledges every second in-order segment or on
//!   the timeout.
//! - Fast retransmit after `dupack_threshold` duplicate ACKs, then NewReno recovery (RFC 6582): partial ACKs
//!   retransmit the next hole; the window is inflated by one segment per duplicate ACK.
//! - RTO per RFC 6298 (srtt, rttvar, min/initial/max, exponential backoff); on expiry ssthresh becomes the
//!   loss decrease of the current window, cwnd = 1 segment, slow start, go-back-N from the first unacked
//!   segment.
//! - Queues are drop-tail; a queue's limit counts the packet being serialised.
use crate::cc::{wmin_segments, Cc, Window};
use crate::config::{
    ArrivalCfg, BufCfg, CcCfg, ChangeCfg, CosRule, DestRule, NodeKind, SampleFlows, Scenario,
    TopologyCfg,
};
use crate::error::{EngineError, Result};
use crate::rng::stream;
use crate::sack::{Ranges, SackOpt, MAX_BLOCKS};
use crate::topo::{Network, Router};
use crate::units::{Bytes, Ps};
use rand::{Rng, RngCore};
use rand_pcg::Pcg64Mcg;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

/// A packet in the network (data segment or ACK).
#[derive(Debug, Clone, Copy)]
struct Pkt {
    /// Flow index.
    flow: u32,
    /// Index in the route of the channel the packet is on.
    hop: u16,
    /// ACK (true) or data (false).
    is_ack: bool,
    /// Size on the wire.
    size: u32,
    /// Data: segment number; ACK: cumulative next expected segment.
    seq: u64,
    /// Data: send time (ps); ACK: echoed send time of the segment that triggered it.
    ts: u64,
    /// ACK only, with `transport.sack`: the SACK blocks (relative to `seq`).
    sack: SackOpt,
}

/// An event.
#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The head packet of channel `ch`'s pipe reaches the far end (one event per packet hop).
    Hop { ch: u32 },
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

#[derive(Debug, Clone, Copy)]
struct Entry {
    t: u64,
    /// The instant the event logically was scheduled at (see [`Simulation::schedule_from`]).
    from: u64,
    seq: u64,
    ev: Ev,
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

/// A packet accepted by a channel, with the time its serialisation ends.
#[derive(Debug, Clone, Copy)]
struct InPipe {
    done: u64,
    pkt: Pkt,
}

/// Runtime state of one channel.
///
/// A FIFO drop-tail link fixes a packet's departure when it is accepted (start = max(now, end of the
/// previous serialisation), `done` = start + serialisation time), so only its arrival at the far end
/// (`done + delay`) is an event. `pipe` holds every accepted packet not yet received, in FIFO order:
/// the first `on_wire` have finished serialising (they propagate), the rest are the queue. Packets move
/// from queue to wire lazily ([`Channel::advance`]) whenever the queue is looked at.
#[derive(Debug)]
struct Channel {
    pipe: VecDeque<InPipe>,
    on_wire: usize,
    /// Bytes in the queue (the packet being serialised included).
    bytes: u64,
    /// End of the last accepted packet's serialisation.
    busy_until: u64,
    rate_bps: u64,
    /// Serialisation times of the two common sizes: (MTU, ACK).
    tx_mtu: (u64, u64),
    tx_ack: (u64, u64),
    delay: u64,
    limit_pkts: u64,
    limit_bytes: u64,
    tx_bytes: u64,
    drops: u64,
    max_queue_bytes: u64,
    /// Flows waiting for room in this (host NIC) queue, served in turn (round-robin, one segment each).
    waiters: VecDeque<u32>,
    /// A [`Ev::NicRoom`] event is scheduled.
    wake_pending: bool,
    /// Never drops (a host NIC queue under host backpressure: data is gated before it, see `nic_room`).
    lossless: bool,
}

impl Channel {
    /// Moves the packets whose serialisation ended at or before `until` from the queue to the wire;
    /// returns the end time of the last one moved (0 if none).
    #[inline]
    fn advance(&mut self, until: u64) -> u64 {
        let mut last = 0;
        while let Some(p) = self.pipe.get(self.on_wire) {
            if p.done > until {
                break;
            }
            let size = p.pkt.size as u64;
            last = p.done;
            self.bytes -= size;
            self.tx_bytes += size;
            self.on_wire += 1;
        }
        last
    }

    /// Moves to the wire the packets that have left the queue as seen by an event at `now` scheduled
    /// at `from`: those whose serialisation ended before `now`, and one ending exactly at `now` if it
    /// started before `from` (when the end of a serialisation was an event of its own, scheduled at
    /// its start, it ran first in that case).
    #[inline]
    fn advance_for(&mut self, now: u64, from: u64) {
        self.advance(now.saturating_sub(1));
        if let Some(p) = self.pipe.get(self.on_wire) {
            if p.done == now && p.done - self.tx_time(p.pkt.size as u64) < from {
                self.advance(now);
            }
        }
    }

    /// Removes the pipe's head packet, which reaches the far end at `now`; returns it and, if another
    /// packet follows, that packet's (serialisation end, arrival) times.
    #[inline]
    fn pop_head(&mut self, now: u64) -> Option<(Pkt, Option<(u64, u64)>)> {
        self.advance(now.saturating_sub(1));
        let InPipe { pkt, .. } = self.pipe.pop_front()?;
        if self.on_wire > 0 {
            self.on_wire -= 1;
        } else {
            // Zero propagation delay: its serialisation ends at this very instant.
            self.bytes -= pkt.size as u64;
            self.tx_bytes += pkt.size as u64;
        }
        let next = self.pipe.front().map(|n| (n.done, n.done + self.delay));
        Some((pkt, next))
    }

    /// Packets in the queue (the one being serialised included).
    #[inline]
    fn queued(&self) -> u64 {
        (self.pipe.len() - self.on_wire) as u64
    }

    /// Whether the queue's limits (packets and bytes) admit a packet of `size` bytes.
    #[inline]
    fn has_room(&self, size: u64) -> bool {
        self.queued() < self.limit_pkts && self.bytes + size <= self.limit_bytes
    }

    /// Serialisation time of `size` bytes.
    #[inline]
    fn tx_time(&self, size: u64) -> u64 {
        if size == self.tx_mtu.0 {
            self.tx_mtu.1
        } else if size == self.tx_ack.0 {
            self.tx_ack.1
        } else {
            crate::units::Bps(self.rate_bps).tx_time(Bytes(size)).0
        }
    }
}

/// Runtime state of one flow (sender and receiver).
#[derive(Debug)]
struct Flow {
    id: String,
    label: String,
    src: u32,
    dst: u32,
    vm: Option<u32>,
    size: Option<u64>,
    start: u64,
    nsegs: u64,
    last_payload: u32,
    route_data: Vec<u32>,
    route_ack: Vec<u32>,
    theta0: u64,
    omega0: f64,
    theta: f64,
    omega: f64,
    changes: Vec<ChangeCfg>,
    change_acked: Vec<u64>,
    started: bool,
    finished: Option<u64>,
    // Sender.
    win: Window,
    snd_una: u64,
    snd_nxt: u64,
    high_tx: u64,
    dupacks: u32,
    in_recovery: bool,
    recover: u64,
    inflate: u64,
    /// SACK scoreboard: segments the receiver reported holding above `snd_una`.
    sacked: Ranges,
    /// SACK recovery: one past the highest segment retransmitted in this recovery (RFC 6675 HighRxt + 1).
    rtx_ptr: u64,
    /// SACK recovery: retransmissions not yet delivered, in sending order, with `snd_nxt` when sent.
    rtx_marks: VecDeque<(u64, u64)>,
    /// SACK recovery: retransmissions found lost, to be sent again first.
    relost: VecDeque<u64>,
    blocked: bool,
    /// Host fair queuing: serialisation ends of the flow's last data packets at its NIC (oldest first).
    nic_done: VecDeque<u64>,
    /// Host fair queuing: an [`Ev::FqRoom`] event is scheduled.
    fq_wake: bool,
    srtt_ns: f64,
    rttvar_ns: f64,
    has_rtt: bool,
    rto: u64,
    rto_deadline: u64,
    rto_event_at: u64,
    retransmits: u64,
    timeouts: u64,
    // Receiver.
    rcv_nxt: u64,
    ooo: Ranges,
    /// SACK: recently received out-of-order segments, most recent first, one per reported block
    /// (`u64::MAX` = empty); the ACK's blocks are the blocks containing them (RFC 2018).
    recent: [u64; MAX_BLOCKS],
    /// Data segments that arrived when the receiver already had them.
    spurious: u64,
    delack_pending: u32,
    delack_gen: u32,
    delack_ts: u64,
}

impl Flow {
    fn bytes_acked(&self, mss: u64) -> u64 {
        match self.size {
            Some(s) if self.snd_una >= self.nsegs => s,
            _ => self.snd_una * mss,
        }
    }
}

/// Parameters of a new flow.
struct NewFlow {
    id: String,
    label: String,
    src: u32,
    dst: u32,
    size: Option<u64>,
    start: u64,
    theta: u64,
    omega: f64,
    vm: Option<u32>,
    changes: Vec<ChangeCfg>,
}

struct Vm {
    theta: u64,
    omega: f64,
    label: String,
    active: Vec<u32>,
}

struct ArrivalGen {
    cfg: ArrivalCfg,
    sources: Vec<u32>,
    count: u64,
    gap: Pcg64Mcg,
    size: Pcg64Mcg,
    src: Pcg64Mcg,
    dst: Pcg64Mcg,
    cos: Pcg64Mcg,
}

/// Progress callback: `(sim_ns_done, sim_ns_total)`; an `Err` aborts the run.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64) -> std::result::Result<(), String>;

/// One simulation: owns everything; [`Simulation::run`] consumes it and returns the output JSON value.
pub struct Simulation {
    duration: u64,
    mss: u64,
    header: u64,
    ack_bytes: u64,
    init_cwnd: f64,
    min_rto: u64,
    initial_rto: u64,
    max_rto: u64,
    delayed_ack: bool,
    delack_timeout: u64,
    dupthresh: u32,
    sack: bool,
    backpressure: bool,
    host_fq: u32,
    /// Host backpressure: the flow whose turn it is to put one segment into its NIC queue.
    nic_turn: Option<u32>,
    cc: Cc,
    net: Network,
    router: Router,
    ecmp: Pcg64Mcg,
    channels: Vec<Channel>,
    flows: Vec<Flow>,
    vms: Vec<Vm>,
    vm_of_host: HashMap<u32, u32>,
    vm_names: Vec<String>,
    gens: Vec<ArrivalGen>,
    hosts: Vec<u32>,
    heap: BinaryHeap<Entry>,
    seq: u64,
    now: u64,
    /// The instant the event being handled was scheduled at.
    cur_from: u64,
    sample_interval: u64,
    sample_mode: SampleFlows,
    sample_cwnd: bool,
    sample_flows: Vec<u32>,
    sample_cum: Vec<Vec<u64>>,
    sample_cwnd_v: Vec<Vec<f64>>,
    sample_wmin_v: Vec<Vec<f64>>,
    n_ticks: usize,
    ids: HashSet<String>,
    events: u64,
    packets_sent: u64,
    packets_dropped: u64,
    in_flight: u64,
    peak_in_flight: u64,
}

fn positive(field: String, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(EngineError::invalid(
            field,
            format!("must be a finite number > 0 (got {v})"),
        ))
    }
}

fn host_of(net: &Network, name: &str, field: String) -> Result<u32> {
    let n = net
        .node(name)
        .ok_or_else(|| EngineError::invalid(field.clone(), format!("unknown node '{name}'")))?;
    if !net.is_host(n) {
        return Err(EngineError::invalid(
            field,
            format!("node '{name}' is not a host"),
        ));
    }
    Ok(n)
}

fn check_cdf(field: &str, cdf: &[(f64, f64)]) -> Result<()> {
    if cdf.len() < 2 {
        return Err(EngineError::invalid(field, "needs at least two points"));
    }
    for (i, w) in cdf.windows(2).enumerate() {
        if !(w[1].0 >= w[0].0 && w[1].1 >= w[0].1) {
            return Err(EngineError::invalid(
                format!("{field}[{}]", i + 1),
                "points must be non-decreasing",
            ));
        }
    }
    let (first, last) = (cdf[0], cdf[cdf.len() - 1]);
    if first.0 < 0.0 || first.1 < 0.0 || (last.1 - 1.0).abs() > 1e-6 || !last.0.is_finite() {
        return Err(EngineError::invalid(
            field,
            "sizes must be >= 0, probabilities in [0, 1] ending at 1",
        ));
    }
    Ok(())
}

/// Piecewise-linear inverse CDF at `u` in [0, 1), at least 1 byte.
fn sample_cdf(cdf: &[(f64, f64)], u: f64) -> u64 {
    let mut v = cdf[cdf.len() - 1].0;
    if u < cdf[0].1 {
        v = cdf[0].0;
    } else {
        for w in cdf.windows(2) {
            let ((x0, p0), (x1, p1)) = (w[0], w[1]);
            if u < p1 {
                v = if p1 > p0 {
                    x0 + (x1 - x0) * (u - p0) / (p1 - p0)
                } else {
                    x0
                };
                break;
            }
        }
    }
    (v.round() as u64).max(1)
}

impl Simulation {
    /// Validates a scenario and builds the simulation.
    pub fn new(sc: Scenario) -> Result<Simulation> {
        if sc.duration_ns == 0 {
            return Err(EngineError::invalid("duration_ns", "must be > 0"));
        }
        let p = &sc.packet;
        if p.mtu_bytes <= p.header_bytes {
            return Err(EngineError::invalid(
                "packet.mtu_bytes",
                "must be larger than packet.header_bytes",
            ));
        }
        if p.ack_bytes == 0 {
            return Err(EngineError::invalid("packet.ack_bytes", "must be > 0"));
        }
        if p.mtu_bytes > u32::MAX as u64 || p.ack_bytes > u32::MAX as u64 {
            return Err(EngineError::invalid("packet.mtu_bytes", "is too large"));
        }
        let t = &sc.transport;
        positive("transport.init_cwnd_pkts".into(), t.init_cwnd_pkts)?;
        if t.min_rto_ns == 0 {
            return Err(EngineError::invalid("transport.min_rto_ns", "must be > 0"));
        }
        if t.initial_rto_ns == 0 {
            return Err(EngineError::invalid(
                "transport.initial_rto_ns",
                "must be > 0",
            ));
        }
        if t.max_rto_ns < t.min_rto_ns {
            return Err(EngineError::invalid(
                "transport.max_rto_ns",
                "must be >= transport.min_rto_ns",
            ));
        }
        if t.host_fq_pkts > 0 && !t.host_backpressure {
            return Err(EngineError::invalid(
                "transport.host_fq_pkts",
                "needs transport.host_backpressure = true",
            ));
        }
        if t.dupack_threshold == 0 {
            return Err(EngineError::invalid(
                "transport.dupack_threshold",
                "must be >= 1",
            ));
        }
        if t.delayed_ack && t.delayed_ack_timeout_ns == 0 {
            return Err(EngineError::invalid(
                "transport.delayed_ack_timeout_ns",
                "must be > 0",
            ));
        }
        let cc = match sc.cc {
            CcCfg::Paccp {
                rcos,
                min_cwnd_pkts,
            } => {
                if !(rcos.is_finite() && rcos > 1.0) {
                    return Err(EngineError::invalid(
                        "cc.rcos",
                        format!("must be > 1 (got {rcos})"),
                    ));
                }
                positive("cc.min_cwnd_pkts".into(), min_cwnd_pkts)?;
                Cc::Paccp {
                    rcos,
                    min_cwnd: min_cwnd_pkts,
                }
            }
            CcCfg::Reno { min_cwnd_pkts } => {
                positive("cc.min_cwnd_pkts".into(), min_cwnd_pkts)?;
                Cc::Reno {
                    min_cwnd: min_cwnd_pkts,
                }
            }
        };
        if sc.sampling.interval_ns == 0 {
            return Err(EngineError::invalid("sampling.interval_ns", "must be > 0"));
        }
        let net = Network::build(&sc.topology)?;
        let router = Router::new(sc.routing, &net)?;
        let channels = net
            .channels
            .iter()
            .map(|c| {
                let (lp, lb) = match c.buffer {
                    BufCfg::Packets(n) => (n, u64::MAX),
                    BufCfg::Bytes(b) => (u64::MAX, b),
                };
                let tx = |size: u64| (size, c.rate.tx_time(Bytes(size)).0);
                Channel {
                    pipe: VecDeque::new(),
                    on_wire: 0,
                    bytes: 0,
                    busy_until: 0,
                    rate_bps: c.rate.0,
                    tx_mtu: tx(p.mtu_bytes),
                    tx_ack: tx(p.ack_bytes),
                    delay: c.delay.0,
                    limit_pkts: lp,
                    limit_bytes: lb,
                    tx_bytes: 0,
                    drops: 0,
                    max_queue_bytes: 0,
                    waiters: VecDeque::new(),
                    wake_pending: false,
                    lossless: t.host_backpressure && net.kinds[c.from as usize] == NodeKind::Host,
                }
            })
            .collect();
        let hosts: Vec<u32> = (0..net.names.len() as u32)
            .filter(|&n| net.kinds[n as usize] == NodeKind::Host)
            .collect();
        let mut vms = Vec::new();
        let mut vm_ids: HashMap<String, u32> = HashMap::new();
        let mut vm_of_host = HashMap::new();
        for (i, v) in sc.vms.iter().enumerate() {
            let f = format!("vms[{i}]");
            if vm_ids.insert(v.id.clone(), i as u32).is_some() {
                return Err(EngineError::invalid(
                    format!("{f}.id"),
                    format!("duplicate vm id '{}'", v.id),
                ));
            }
            let h = host_of(&net, &v.host, format!("{f}.host"))?;
            positive(format!("{f}.omega"), v.omega)?;
            vm_of_host.entry(h).or_insert(i as u32);
            vms.push(Vm {
                theta: v.theta_bps,
                omega: v.omega,
                label: v.label.clone(),
                active: Vec::new(),
            });
        }
        let mut sim = Simulation {
            duration: Ps::from_ns(sc.duration_ns).0,
            mss: p.mtu_bytes - p.header_bytes,
            header: p.header_bytes,
            ack_bytes: p.ack_bytes,
            init_cwnd: t.init_cwnd_pkts,
            min_rto: Ps::from_ns(t.min_rto_ns).0,
            initial_rto: Ps::from_ns(t.initial_rto_ns).0,
            max_rto: Ps::from_ns(t.max_rto_ns).0,
            delayed_ack: t.delayed_ack,
            delack_timeout: Ps::from_ns(t.delayed_ack_timeout_ns).0,
            dupthresh: t.dupack_threshold,
            sack: t.sack,
            backpressure: t.host_backpressure,
            host_fq: t.host_fq_pkts,
            nic_turn: None,
            cc,
            net,
            router,
            ecmp: stream(sc.seed, "ecmp"),
            channels,
            flows: Vec::new(),
            vms,
            vm_of_host,
            vm_names: sc.vms.iter().map(|v| v.id.clone()).collect(),
            gens: Vec::new(),
            hosts,
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            cur_from: 0,
            sample_interval: Ps::from_ns(sc.sampling.interval_ns).0,
            sample_mode: sc.sampling.flows,
            sample_cwnd: sc.sampling.cwnd,
            sample_flows: Vec::new(),
            sample_cum: Vec::new(),
            sample_cwnd_v: Vec::new(),
            sample_wmin_v: Vec::new(),
            n_ticks: 0,
            ids: HashSet::new(),
            events: 0,
            packets_sent: 0,
            packets_dropped: 0,
            in_flight: 0,
            peak_in_flight: 0,
        };
        for (i, fc) in sc.flows.iter().enumerate() {
            let f = format!("flows[{i}]");
            let src = host_of(&sim.net, &fc.src, format!("{f}.src"))?;
            let dst = host_of(&sim.net, &fc.dst, format!("{f}.dst"))?;
            if src == dst {
                return Err(EngineError::invalid(
                    format!("{f}.dst"),
                    "must differ from src",
                ));
            }
            if fc.size_bytes == Some(0) {
                return Err(EngineError::invalid(
                    format!("{f}.size_bytes"),
                    "must be > 0 or null",
                ));
            }
            positive(format!("{f}.omega"), fc.omega)?;
            let vm = match &fc.vm {
                None => None,
                Some(v) => {
                    let id = *vm_ids.get(v).ok_or_else(|| {
                        EngineError::invalid(format!("{f}.vm"), format!("unknown vm '{v}'"))
                    })?;
                    if !fc.changes.is_empty() {
                        return Err(EngineError::invalid(
                            format!("{f}.changes"),
                            "a VBP flow (vm set) has no changes",
                        ));
                    }
                    Some(id)
                }
            };
            let mut last = 0;
            for (j, c) in fc.changes.iter().enumerate() {
                positive(format!("{f}.changes[{j}].omega"), c.omega)?;
                if c.at_ns < last {
                    return Err(EngineError::invalid(
                        format!("{f}.changes[{j}].at_ns"),
                        "changes must be in time order",
                    ));
                }
                last = c.at_ns;
            }
            let (theta, omega) = match vm {
                Some(v) => (sim.vms[v as usize].theta, sim.vms[v as usize].omega),
                None => (fc.theta_bps, fc.omega),
            };
            let nf = NewFlow {
                id: fc.id.clone(),
                label: fc.label.clone(),
                src,
                dst,
                size: fc.size_bytes,
                start: Ps::from_ns(fc.start_ns).0,
                theta,
                omega,
                vm,
                changes: fc.changes.clone(),
            };
            let idx = sim.add_flow(nf, &f)?;
            sim.schedule(Ps::from_ns(fc.start_ns).0, Ev::FlowStart { flow: idx });
            for (j, c) in fc.changes.iter().enumerate() {
                sim.schedule(
                    Ps::from_ns(c.at_ns).0,
                    Ev::Change {
                        flow: idx,
                        idx: j as u32,
                    },
                );
            }
        }
        for (i, a) in sc.arrivals.iter().enumerate() {
            let f = format!("arrivals[{i}]");
            positive(format!("{f}.rate_per_s"), a.rate_per_s)?;
            if a.stop_ns < a.start_ns {
                return Err(EngineError::invalid(
                    format!("{f}.stop_ns"),
                    "must be >= start_ns",
                ));
            }
            if a.sources.is_empty() {
                return Err(EngineError::invalid(format!("{f}.sources"), "is empty"));
            }
            let mut sources = Vec::new();
            for (j, s) in a.sources.iter().enumerate() {
                sources.push(host_of(&sim.net, s, format!("{f}.sources[{j}]"))?);
            }
            check_cdf(&format!("{f}.size_cdf"), &a.size_cdf)?;
            if sim.hosts.len() < 2 {
                return Err(EngineError::invalid(
                    format!("{f}.destination"),
                    "needs at least two hosts",
                ));
            }
            if a.destination == DestRule::OtherLeaf
                && sim.net.leaf_spine.is_some_and(|(l, _, _)| l < 2)
            {
                return Err(EngineError::invalid(
                    format!("{f}.destination"),
                    "other_leaf needs at least two leaves",
                ));
            }
            if a.destination == DestRule::OtherLeaf
                && !matches!(sc.topology, TopologyCfg::LeafSpine { .. })
            {
                return Err(EngineError::invalid(
                    format!("{f}.destination"),
                    "other_leaf needs a leaf_spine topology",
                ));
            }
            if let CosRule::Mix { classes } = &a.cos {
                if classes.is_empty() {
                    return Err(EngineError::invalid(format!("{f}.cos.classes"), "is empty"));
                }
                let mut sum = 0.0;
                for (j, c) in classes.iter().enumerate() {
                    positive(format!("{f}.cos.classes[{j}].omega"), c.omega)?;
                    if !(c.prob.is_finite() && c.prob >= 0.0) {
                        return Err(EngineError::invalid(
                            format!("{f}.cos.classes[{j}].prob"),
                            "must be >= 0",
                        ));
                    }
                    sum += c.prob;
                }
                if (sum - 1.0).abs() > 1e-6 {
                    return Err(EngineError::invalid(
                        format!("{f}.cos.classes"),
                        format!("probabilities sum to {sum}, not 1"),
                    ));
                }
            }
            let name = |s: &str| stream(sc.seed, &format!("arrivals/{i}/{s}"));
            let mut g = ArrivalGen {
                cfg: a.clone(),
                sources,
                count: 0,
                gap: name("gap"),
                size: name("size"),
                src: name("src"),
                dst: name("dst"),
                cos: name("cos"),
            };
            let first = Ps::from_ns(a.start_ns)
                .0
                .saturating_add(exp_gap_ps(&mut g.gap, a.rate_per_s));
            let ok = first < Ps::from_ns(a.stop_ns).0 && a.max_flows != Some(0);
            sim.gens.push(g);
            if ok {
                sim.schedule(first, Ev::Arrival { gen: i as u32 });
            }
        }
        if sim.sample_interval <= sim.duration {
            sim.schedule(sim.sample_interval, Ev::Sample);
        }
        Ok(sim)
    }

    fn schedule(&mut self, t: u64, ev: Ev) {
        self.schedule_from(self.now, t, ev);
    }

    /// Schedules `ev` at `t` as if it had been scheduled at instant `from` (<= t): events at the same
    /// instant run in the order of `from`, then in the order they were scheduled. A packet's arrival
    /// at the far end of a channel counts as scheduled when its serialisation ends, as when that end
    /// was an event of its own.
    fn schedule_from(&mut self, from: u64, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            t,
            from,
            seq: self.seq,
            ev,
        });
    }

    fn add_flow(&mut self, nf: NewFlow, field: &str) -> Result<u32> {
        if !self.ids.insert(nf.id.clone()) {
            return Err(EngineError::invalid(
                format!("{field}.id"),
                format!("duplicate flow id '{}'", nf.id),
            ));
        }
        let hash = self.ecmp.next_u64();
        let no_path = || {
            EngineError::invalid(
                field.to_string(),
                "no path between its src and dst".to_string(),
            )
        };
        let route_data = self
            .router
            .route(&self.net, nf.src, nf.dst, hash)
            .ok_or_else(no_path)?;
        let route_ack = self
            .router
            .route(&self.net, nf.dst, nf.src, hash)
            .ok_or_else(no_path)?;
        if route_data.len() > u16::MAX as usize {
            return Err(EngineError::invalid(field.to_string(), "route too long"));
        }
        let (nsegs, last_payload) = match nf.size {
            None => (u64::MAX, self.mss as u32),
            Some(s) => {
                let n = s.div_ceil(self.mss);
                (n, (s - (n - 1) * self.mss) as u32)
            }
        };
        let idx = self.flows.len() as u32;
        let sampled = match self.sample_mode {
            SampleFlows::None => false,
            SampleFlows::LongLived => nf.size.is_none(),
            SampleFlows::All => true,
        };
        if sampled {
            self.sample_flows.push(idx);
            self.sample_cum.push(vec![0; self.n_ticks]);
            if self.sample_cwnd {
                self.sample_cwnd_v.push(vec![0.0; self.n_ticks]);
                self.sample_wmin_v.push(vec![0.0; self.n_ticks]);
            }
        }
        let nchanges = nf.changes.len();
        self.flows.push(Flow {
            id: nf.id,
            label: nf.label,
            src: nf.src,
            dst: nf.dst,
            vm: nf.vm,
            size: nf.size,
            start: nf.start,
            nsegs,
            last_payload,
            route_data,
            route_ack,
            theta0: nf.theta,
            omega0: nf.omega,
            theta: nf.theta as f64,
            omega: nf.omega,
            changes: nf.changes,
            change_acked: vec![0; nchanges],
            started: false,
            finished: None,
            win: Window {
                cwnd: self.init_cwnd,
                ssthresh: f64::INFINITY,
            },
            snd_una: 0,
            snd_nxt: 0,
            high_tx: 0,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            inflate: 0,
            sacked: Ranges::default(),
            rtx_ptr: 0,
            rtx_marks: VecDeque::new(),
            relost: VecDeque::new(),
            blocked: false,
            nic_done: VecDeque::new(),
            fq_wake: false,
            srtt_ns: 0.0,
            rttvar_ns: 0.0,
            has_rtt: false,
            rto: self.initial_rto,
            rto_deadline: 0,
            rto_event_at: 0,
            retransmits: 0,
            timeouts: 0,
            rcv_nxt: 0,
            ooo: Ranges::default(),
            recent: [u64::MAX; MAX_BLOCKS],
            spurious: 0,
            delack_pending: 0,
            delack_gen: 0,
            delack_ts: 0,
        });
        Ok(idx)
    }

    /// Runs to the end and returns the output (docs/engine-contract.md).
    pub fn run(mut self, mut progress: Option<Progress<'_>>) -> Result<Value> {
        let total_ns = self.duration / Ps::PER_NS;
        let step = (self.duration / 100).max(1);
        let mut next_report = step;
        let mut last_t = 0;
        loop {
            let Some(mut top) = self.heap.peek_mut() else {
                break;
            };
            let e = *top;
            if e.t > self.duration {
                break;
            }
            if e.t >= next_report {
                if let Some(cb) = progress.as_mut() {
                    cb(e.t / Ps::PER_NS, total_ns).map_err(EngineError::Aborted)?;
                }
                next_report = (e.t / step + 1) * step;
            }
            self.now = e.t;
            self.cur_from = e.from;
            last_t = e.t;
            self.events += 1;
            // The hot path: a hop whose channel has another packet in its pipe reuses the heap's top
            // entry for that packet's arrival (one sift instead of a pop and a push). Same order and
            // sequence numbers as a pop and a push.
            if let Ev::Hop { ch } = e.ev {
                let Some((pkt, next)) = self.channels[ch as usize].pop_head(e.t) else {
                    PeekMut::pop(top);
                    continue;
                };
                match next {
                    Some((done, t)) => {
                        self.seq += 1;
                        *top = Entry {
                            t,
                            from: done,
                            seq: self.seq,
                            ev: e.ev,
                        };
                        drop(top);
                    }
                    None => {
                        PeekMut::pop(top);
                    }
                }
                self.arrive(pkt);
            } else {
                PeekMut::pop(top);
                self.handle(e.ev);
            }
        }
        // Serialisations that ended by the end of the run count as transmitted (and as processed
        // instants, as their end events did when each was an event).
        let end = self.duration;
        for c in &mut self.channels {
            last_t = last_t.max(c.advance(end));
        }
        if let Some(cb) = progress.as_mut() {
            cb(total_ns, total_ns).map_err(EngineError::Aborted)?;
        }
        Ok(self.output(last_t))
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            // `run` handles every hop in place on the heap's top entry; it never gets here.
            Ev::Hop { .. } => unreachable!("hop events are handled by Simulation::run"),
            Ev::NicRoom { ch } => self.nic_room_freed(ch),
            Ev::FqRoom { flow } => {
                let f = &mut self.flows[flow as usize];
                f.fq_wake = false;
                if f.finished.is_none() {
                    self.try_send(flow);
                }
            }
            Ev::FlowStart { flow } => self.start_flow(flow),
            Ev::Rto { flow } => self.rto_fire(flow),
            Ev::DelAck { flow, gen } => {
                let f = &self.flows[flow as usize];
                if f.delack_gen == gen && f.delack_pending > 0 {
                    let ts = f.delack_ts;
                    self.send_ack(flow, ts);
                }
            }
            Ev::Sample => self.sample(),
            Ev::Change { flow, idx } => self.change(flow, idx),
            Ev::Arrival { gen } => self.arrival(gen),
        }
    }

    // ----- network -----

    /// Drop-tail admission; an accepted packet's serialisation end and (if it is the pipe's head) its
    /// arrival at the far end are scheduled at once.
    fn enqueue(&mut self, ch: u32, pkt: Pkt) {
        let now = self.now;
        let c = &mut self.channels[ch as usize];
        c.advance_for(now, self.cur_from);
        let size = pkt.size as u64;
        if !c.lossless && !c.has_room(size) {
            c.drops += 1;
            self.packets_dropped += 1;
            self.in_flight -= 1;
            return;
        }
        let done = c.busy_until.max(now) + c.tx_time(size);
        c.busy_until = done;
        c.bytes += size;
        c.max_queue_bytes = c.max_queue_bytes.max(c.bytes);
        let head = c.pipe.is_empty();
        c.pipe.push_back(InPipe { done, pkt });
        if head {
            let t = done + c.delay;
            self.schedule_from(done, t, Ev::Hop { ch });
        }
    }

    /// Host backpressure: the NIC queue of `ch` has room again. Its waiters take turns, one segment
    /// each in the order they started waiting, until the queue is full or nobody waits; a flow that
    /// wants to send more waits again at the back. (Waking every waiter at once let the first one, a
    /// bulk flow blocked again at once, take every freed slot and starve a flow that started later.)
    fn nic_room_freed(&mut self, ch: u32) {
        let now = self.now;
        let c = &mut self.channels[ch as usize];
        c.wake_pending = false;
        c.advance(now);
        loop {
            let c = &mut self.channels[ch as usize];
            let Some(&fl) = c.waiters.front() else { break };
            if !c.has_room(self.mss + self.header) {
                break;
            }
            c.waiters.pop_front();
            self.flows[fl as usize].blocked = false;
            if self.flows[fl as usize].finished.is_none() {
                self.nic_turn = Some(fl);
                self.try_send(fl);
                self.nic_turn = None;
            }
        }
        self.schedule_nic_wake(ch);
    }

    /// Schedules a [`Ev::NicRoom`] for when the queue's head packet has been serialised, if flows wait
    /// and none is scheduled.
    fn schedule_nic_wake(&mut self, ch: u32) {
        let c = &mut self.channels[ch as usize];
        if c.wake_pending || c.waiters.is_empty() {
            return;
        }
        if let Some(head) = c.pipe.get(c.on_wire) {
            c.wake_pending = true;
            let t = head.done;
            self.schedule(t, Ev::NicRoom { ch });
        }
    }

    fn arrive(&mut self, mut pkt: Pkt) {
        let f = &self.flows[pkt.flow as usize];
        let route = if pkt.is_ack {
            &f.route_ack
        } else {
            &f.route_data
        };
        let next = pkt.hop as usize + 1;
        if next < route.len() {
            let ch = route[next];
            pkt.hop = next as u16;
            self.enqueue(ch, pkt);
        } else {
            self.in_flight -= 1;
            if pkt.is_ack {
                self.on_ack(pkt);
            } else {
                self.on_data(pkt);
            }
        }
    }

    fn inject(&mut self, pkt: Pkt, first_ch: u32) {
        self.packets_sent += 1;
        self.in_flight += 1;
        self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
        self.enqueue(first_ch, pkt);
    }

    // ----- sender -----

    fn wmin(&self, f: &Flow) -> f64 {
        if f.has_rtt {
            wmin_segments(f.theta, f.srtt_ns, self.mss)
        } else {
            0.0
        }
    }

    fn send_segment(&mut self, flow: u32, seg: u64) {
        let f = &mut self.flows[flow as usize];
        let payload = if seg + 1 == f.nsegs {
            f.last_payload
        } else {
            self.mss as u32
        };
        if seg < f.high_tx {
            f.retransmits += 1;
        } else {
            f.high_tx = seg + 1;
        }
        let pkt = Pkt {
            flow,
            hop: 0,
            is_ack: false,
            size: payload + self.header as u32,
            seq: seg,
            ts: self.now,
            sack: SackOpt::NONE,
        };
        let ch = f.route_data[0];
        self.inject(pkt, ch);
        if self.host_fq > 0 {
            // The host NIC is lossless under host fair queuing (validated), so the packet was accepted
            // and its serialisation ends at the channel's `busy_until`.
            let done = self.channels[ch as usize].busy_until;
            let f = &mut self.flows[flow as usize];
            f.nic_done.push_back(done);
            while f.nic_done.len() > self.host_fq as usize {
                f.nic_done.pop_front();
            }
        }
    }

    /// Host fair queuing: whether the flow holds fewer than `host_fq` packets in its NIC queue; if not,
    /// an [`Ev::FqRoom`] is scheduled for when its oldest one has been serialised.
    fn fq_room(&mut self, flow: u32) -> bool {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        while f.nic_done.front().is_some_and(|&d| d <= now) {
            f.nic_done.pop_front();
        }
        if f.nic_done.len() < self.host_fq as usize {
            return true;
        }
        if !f.fq_wake {
            f.fq_wake = true;
            let t = f.nic_done[0];
            self.schedule(t, Ev::FqRoom { flow });
        }
        false
    }

    /// Whether the flow may put a segment into its NIC queue now. With host fair queuing, not while it
    /// holds `host_fq` packets there. With host backpressure, only if the queue has room and no other
    /// flow waits ahead of it (or it is the flow whose turn it is, see [`Self::nic_room_freed`], which
    /// uses the turn up); otherwise the flow waits at the back of the NIC's waiters.
    fn nic_room(&mut self, flow: u32) -> bool {
        if self.host_fq > 0 && !self.fq_room(flow) {
            return false;
        }
        if !self.backpressure {
            return true;
        }
        let size = self.mss + self.header;
        let ch = self.flows[flow as usize].route_data[0];
        let c = &mut self.channels[ch as usize];
        c.advance_for(self.now, self.cur_from);
        if c.has_room(size) {
            if self.nic_turn == Some(flow) {
                self.nic_turn = None;
                return true;
            }
            if c.waiters.is_empty() {
                return true;
            }
        }
        let f = &mut self.flows[flow as usize];
        if !f.blocked {
            f.blocked = true;
            c.waiters.push_back(flow);
        }
        self.schedule_nic_wake(ch);
        false
    }

    /// RFC 6675 IsLost in segments: an unSACKed segment is lost iff at least `dupthresh` SACKed
    /// segments lie above it, i.e. iff it is below the `dupthresh`-th highest SACKed segment (returned;
    /// `snd_una` if fewer are SACKed).
    fn sack_lost_below(f: &Flow, dupthresh: u32) -> u64 {
        f.sacked
            .kth_largest(dupthresh as u64)
            .map_or(f.snd_una, |q| q.max(f.snd_una))
    }

    /// RFC 6675 SetPipe over `[snd_una, snd_nxt)`: every unSACKed segment not presumed lost counts
    /// once, and once more if it was retransmitted in this recovery (below `rtx_ptr`).
    /// A retransmission found lost (in `relost`) counts as not in the network.
    fn sack_pipe(f: &Flow, lost_below: u64) -> u64 {
        let (una, nxt) = (f.snd_una, f.snd_nxt);
        let unsacked = |x: u64| {
            let x = x.clamp(una, nxt);
            (x - una) - f.sacked.count_below(x)
        };
        (unsacked(nxt) - unsacked(lost_below) + unsacked(f.rtx_ptr))
            .saturating_sub(f.relost.len() as u64)
    }

    /// Lost-retransmission detection (like Linux's pre-RACK `tcp_mark_lost_retrans`): a retransmission
    /// sent when `snd_nxt` was N is lost once `dupack_threshold` segments at or above N (sent after it)
    /// are SACKed while it is still missing; it is then queued to be sent again.
    fn sack_detect_lost_rtx(f: &mut Flow, dupthresh: u32) {
        let all = f.sacked.count_below(u64::MAX);
        f.relost
            .retain(|&h| h >= f.snd_una && !f.sacked.contains(h));
        while let Some(&(h, n)) = f.rtx_marks.front() {
            if h < f.snd_una || f.sacked.contains(h) {
                f.rtx_marks.pop_front();
            } else if all - f.sacked.count_below(n) >= dupthresh as u64 {
                f.rtx_marks.pop_front();
                f.relost.push_back(h);
            } else {
                break;
            }
        }
    }

    /// SACK recovery (RFC 6675 NextSeg): while the pipe is below cwnd, send (1) the lowest lost hole not
    /// yet retransmitted, else (2) new data, else (3) the lowest unSACKed hole not yet retransmitted
    /// below the highest SACKed segment. No rescue retransmission (rule 4).
    fn try_send_sack_recovery(&mut self, flow: u32) {
        let dupthresh = self.dupthresh;
        loop {
            let f = &self.flows[flow as usize];
            let wnd = f.win.cwnd.floor().max(1.0) as u64;
            let lost_below = Self::sack_lost_below(f, dupthresh);
            if Self::sack_pipe(f, lost_below) >= wnd {
                break;
            }
            let high = f.sacked.end().unwrap_or(0).min(f.snd_nxt);
            let h = f.sacked.next_gap(f.rtx_ptr.max(f.snd_una));
            let again = f.relost.front().copied();
            let rtx = if again.is_some() {
                again
            } else if h < lost_below || (f.snd_nxt >= f.nsegs && h < high) {
                Some(h)
            } else if f.snd_nxt < f.nsegs {
                None
            } else {
                break;
            };
            if !self.nic_room(flow) {
                break;
            }
            let f = &mut self.flows[flow as usize];
            match rtx {
                Some(h) => {
                    if again.is_some() {
                        f.relost.pop_front();
                    } else {
                        f.rtx_ptr = h + 1;
                    }
                    f.rtx_marks.push_back((h, f.snd_nxt));
                    self.send_segment(flow, h);
                }
                None => {
                    let seg = f.snd_nxt;
                    f.snd_nxt += 1;
                    self.send_segment(flow, seg);
                }
            }
        }
    }

    /// RFC 6675 section 5: start a recovery on `dupack_threshold` duplicate ACKs or when the scoreboard
    /// shows the first unacknowledged segment lost, unless still within the last recovery (or RTO) window.
    fn sack_should_recover(&self, flow: u32) -> bool {
        let f = &self.flows[flow as usize];
        !f.in_recovery
            && f.snd_una >= f.recover
            && f.snd_nxt > f.snd_una
            && (f.dupacks >= self.dupthresh || Self::sack_lost_below(f, self.dupthresh) > f.snd_una)
    }

    /// Enters SACK recovery (RFC 6675 section 5): window decrease, retransmit `snd_una` at once.
    fn enter_sack_recovery(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        let omega = f.omega;
        self.cc.on_fast_retransmit(&mut f.win, omega);
        f.recover = f.high_tx;
        f.in_recovery = true;
        let s = f.snd_una;
        f.rtx_ptr = s + 1;
        f.rtx_marks.clear();
        f.relost.clear();
        f.rtx_marks.push_back((s, f.snd_nxt));
        self.send_segment(flow, s);
        self.arm_rto(flow);
        self.try_send(flow);
    }

    fn try_send(&mut self, flow: u32) {
        if self.sack && self.flows[flow as usize].in_recovery {
            self.try_send_sack_recovery(flow);
            let f = &self.flows[flow as usize];
            if f.snd_nxt > f.snd_una && f.rto_deadline == 0 {
                self.arm_rto(flow);
            }
            return;
        }
        loop {
            if self.sack {
                // After a timeout, go-back-N skips what the scoreboard says the receiver holds.
                let f = &mut self.flows[flow as usize];
                f.snd_nxt = f.sacked.next_gap(f.snd_nxt);
            }
            let f = &self.flows[flow as usize];
            let wnd = (f.win.cwnd.floor().max(1.0) as u64).saturating_add(if f.in_recovery {
                f.inflate
            } else {
                0
            });
            if f.snd_nxt >= f.nsegs || f.snd_nxt - f.snd_una >= wnd || !self.nic_room(flow) {
                break;
            }
            let seg = self.flows[flow as usize].snd_nxt;
            self.flows[flow as usize].snd_nxt += 1;
            self.send_segment(flow, seg);
        }
        let f = &self.flows[flow as usize];
        if f.snd_nxt > f.snd_una && f.rto_deadline == 0 {
            self.arm_rto(flow);
        }
    }

    fn arm_rto(&mut self, flow: u32) {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        let d = now + f.rto;
        f.rto_deadline = d;
        if f.rto_event_at == 0 || f.rto_event_at > d {
            f.rto_event_at = d;
            self.schedule(d, Ev::Rto { flow });
        }
    }

    fn rto_fire(&mut self, flow: u32) {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        if f.rto_event_at != now {
            return; // stale timer event
        }
        f.rto_event_at = 0;
        if f.rto_deadline == 0 || f.finished.is_some() {
            return;
        }
        if f.rto_deadline > now {
            let d = f.rto_deadline;
            f.rto_event_at = d;
            self.schedule(d, Ev::Rto { flow });
            return;
        }
        // Timeout.
        f.timeouts += 1;
        let omega = f.omega;
        self.cc.on_rto(&mut f.win, omega);
        f.in_recovery = false;
        f.inflate = 0;
        f.dupacks = 0;
        f.recover = f.high_tx;
        f.snd_nxt = f.snd_una;
        // The scoreboard is kept (the receiver never discards SACKed data), like Linux.
        f.rtx_ptr = 0;
        f.rtx_marks.clear();
        f.relost.clear();
        f.rto = (f.rto.saturating_mul(2)).min(self.max_rto);
        f.rto_deadline = 0;
        self.try_send(flow);
    }

    fn on_ack(&mut self, pkt: Pkt) {
        let flow = pkt.flow;
        let now = self.now;
        let mss = self.mss;
        let (min_rto, max_rto) = (self.min_rto, self.max_rto);
        let cc = self.cc;
        let dupthresh = self.dupthresh;
        let f = &mut self.flows[flow as usize];
        if f.finished.is_some() {
            return;
        }
        let ack = pkt.seq;
        let sack = self.sack;
        if sack {
            for (s, e) in pkt.sack.blocks(ack) {
                f.sacked.insert(s.max(f.snd_una), e.min(f.high_tx));
            }
        }
        if ack > f.snd_una {
            let newly = ack - f.snd_una;
            f.snd_una = ack;
            if sack {
                f.sacked.trim_below(ack);
            }
            if f.snd_nxt < ack {
                f.snd_nxt = ack;
            }
            // RTT sample (RFC 6298) from the echoed send time.
            let r = (now - pkt.ts) as f64 / 1000.0;
            if f.has_rtt {
                f.rttvar_ns = 0.75 * f.rttvar_ns + 0.25 * (f.srtt_ns - r).abs();
                f.srtt_ns = 0.875 * f.srtt_ns + 0.125 * r;
            } else {
                f.srtt_ns = r;
                f.rttvar_ns = r / 2.0;
                f.has_rtt = true;
            }
            let rto_ps = ((f.srtt_ns + 4.0 * f.rttvar_ns) * 1000.0) as u64;
            f.rto = rto_ps.clamp(min_rto, max_rto);
            let mut retransmit = false;
            if f.in_recovery {
                if ack >= f.recover {
                    f.in_recovery = false;
                    f.inflate = 0;
                    f.win.cwnd = f.win.ssthresh;
                } else if !sack {
                    f.inflate = f.inflate.saturating_sub(newly) + 1;
                    retransmit = true;
                }
            } else {
                let wmin = if f.has_rtt {
                    wmin_segments(f.theta, f.srtt_ns, mss)
                } else {
                    0.0
                };
                cc.on_ack(&mut f.win, newly, wmin, f.omega);
            }
            f.dupacks = 0;
            if f.snd_una >= f.nsegs {
                f.finished = Some(now);
                f.rto_deadline = 0;
                self.finish_flow(flow);
                return;
            }
            if f.snd_nxt > f.snd_una {
                self.arm_rto(flow);
            } else {
                f.rto_deadline = 0;
            }
            if retransmit {
                let s = self.flows[flow as usize].snd_una;
                self.send_segment(flow, s);
            }
            if sack && self.sack_should_recover(flow) {
                self.enter_sack_recovery(flow);
                return;
            }
            let f = &mut self.flows[flow as usize];
            if sack && f.in_recovery {
                Self::sack_detect_lost_rtx(f, dupthresh);
            }
            self.try_send(flow);
        } else if ack == f.snd_una && f.snd_nxt > f.snd_una {
            f.dupacks += 1;
            if sack {
                if f.in_recovery {
                    Self::sack_detect_lost_rtx(f, dupthresh);
                    self.try_send(flow);
                } else if self.sack_should_recover(flow) {
                    self.enter_sack_recovery(flow);
                }
            } else if f.in_recovery {
                f.inflate += 1;
                self.try_send(flow);
            } else if f.dupacks == dupthresh && f.snd_una >= f.recover {
                let omega = f.omega;
                cc.on_fast_retransmit(&mut f.win, omega);
                f.recover = f.high_tx;
                f.in_recovery = true;
                f.inflate = dupthresh as u64;
                let s = f.snd_una;
                f.rtx_ptr = s + 1;
                self.send_segment(flow, s);
                self.arm_rto(flow);
                self.try_send(flow);
            }
        }
    }

    // ----- receiver -----

    fn on_data(&mut self, pkt: Pkt) {
        let flow = pkt.flow;
        let f = &mut self.flows[flow as usize];
        let seg = pkt.seq;
        let mut immediate = true;
        if seg == f.rcv_nxt {
            let had_hole = !f.ooo.is_empty();
            f.rcv_nxt += 1;
            if let Some(end) = f.ooo.pop_if_starts_at(f.rcv_nxt) {
                f.rcv_nxt = end;
            }
            if self.delayed_ack && !had_hole {
                f.delack_pending += 1;
                if f.delack_pending < 2 {
                    immediate = false;
                    f.delack_ts = pkt.ts;
                    f.delack_gen = f.delack_gen.wrapping_add(1);
                    let gen = f.delack_gen;
                    let t = self.now + self.delack_timeout;
                    self.schedule(t, Ev::DelAck { flow, gen });
                }
            }
        } else if seg > f.rcv_nxt {
            if f.ooo.contains(seg) {
                f.spurious += 1;
            } else {
                f.ooo.insert(seg, seg + 1);
            }
            if self.sack {
                // The block of this segment goes first, then the most recently reported other blocks.
                let mut recent = [u64::MAX; MAX_BLOCKS];
                recent[0] = seg;
                let mut n = 1;
                let this = f.ooo.find(seg);
                for &r in &f.recent {
                    if n == MAX_BLOCKS {
                        break;
                    }
                    if r == u64::MAX || r < f.rcv_nxt {
                        continue;
                    }
                    let b = f.ooo.find(r);
                    if b != this && !recent[1..n].iter().any(|&q| f.ooo.find(q) == b) {
                        recent[n] = r;
                        n += 1;
                    }
                }
                f.recent = recent;
            }
        } else {
            f.spurious += 1;
        }
        if immediate {
            self.send_ack(flow, pkt.ts);
        }
    }

    fn send_ack(&mut self, flow: u32, ts: u64) {
        let f = &mut self.flows[flow as usize];
        f.delack_pending = 0;
        f.delack_gen = f.delack_gen.wrapping_add(1);
        let mut sack = SackOpt::NONE;
        if self.sack && !f.ooo.is_empty() {
            for &r in &f.recent {
                if r != u64::MAX && r >= f.rcv_nxt {
                    if let Some((s, e)) = f.ooo.find(r) {
                        sack.push(f.rcv_nxt, s, e);
                    }
                }
            }
        }
        let pkt = Pkt {
            flow,
            hop: 0,
            is_ack: true,
            size: self.ack_bytes as u32,
            seq: f.rcv_nxt,
            ts,
            sack,
        };
        let ch = f.route_ack[0];
        self.inject(pkt, ch);
    }

    // ----- flow life, VBP, FBP -----

    fn start_flow(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        f.started = true;
        if let Some(vm) = f.vm {
            self.vms[vm as usize].active.push(flow);
            self.resplit(vm);
        }
        self.try_send(flow);
    }

    fn finish_flow(&mut self, flow: u32) {
        if let Some(vm) = self.flows[flow as usize].vm {
            self.vms[vm as usize].active.retain(|&x| x != flow);
            self.resplit(vm);
        }
    }

    /// VBP: each active flow of the VM gets (theta / n, omega / n).
    fn resplit(&mut self, vm: u32) {
        let v = &self.vms[vm as usize];
        let n = v.active.len().max(1) as f64;
        let (theta, omega) = (v.theta as f64 / n, v.omega / n);
        for &fl in &v.active {
            let f = &mut self.flows[fl as usize];
            f.theta = theta;
            f.omega = omega;
        }
    }

    fn change(&mut self, flow: u32, idx: u32) {
        let mss = self.mss;
        let f = &mut self.flows[flow as usize];
        let c = &f.changes[idx as usize];
        f.theta = c.theta_bps as f64;
        f.omega = c.omega;
        f.change_acked[idx as usize] = f.bytes_acked(mss);
    }

    fn arrival(&mut self, gi: u32) {
        let now = self.now;
        let g = &mut self.gens[gi as usize];
        g.count += 1;
        let n = g.count;
        let src = g.sources[g.src.gen_range(0..g.sources.len())];
        let dst = match g.cfg.destination {
            DestRule::AnyOtherHost => {
                let k = g.dst.gen_range(0..self.hosts.len() - 1);
                let h = self.hosts[k];
                if h >= src {
                    self.hosts[k + 1]
                } else {
                    h
                }
            }
            DestRule::OtherLeaf => {
                let (_, _, hpl) = self.net.leaf_spine.unwrap_or((1, 1, 1));
                let sl = self.net.host_group[src as usize].unwrap_or(0);
                let nh = self.hosts.len() as u32;
                let k = g.dst.gen_range(0..nh - hpl);
                let first = sl * hpl;
                if k >= first {
                    k + hpl
                } else {
                    k
                }
            }
        };
        let size = sample_cdf(&g.cfg.size_cdf, g.size.gen::<f64>());
        let (label, theta, omega, vm) = match &g.cfg.cos {
            CosRule::ByVm => match self.vm_of_host.get(&src) {
                Some(&v) => {
                    let vmr = &self.vms[v as usize];
                    (vmr.label.clone(), vmr.theta, vmr.omega, Some(v))
                }
                None => ("BE".to_string(), 0, 1.0, None),
            },
            CosRule::Mix { classes } => {
                let u: f64 = g.cos.gen();
                let mut acc = 0.0;
                let mut pick = &classes[classes.len() - 1];
                for c in classes {
                    acc += c.prob;
                    if u < acc {
                        pick = c;
                        break;
                    }
                }
                (pick.label.clone(), pick.theta_bps, pick.omega, None)
            }
        };
        let id = format!("{}{}", g.cfg.id_prefix, n - 1);
        let gap = exp_gap_ps(&mut g.gap, g.cfg.rate_per_s);
        let stop = Ps::from_ns(g.cfg.stop_ns).0;
        let more = g.cfg.max_flows.is_none_or(|m| n < m);
        let nf = NewFlow {
            id,
            label,
            src,
            dst,
            size: Some(size),
            start: now,
            theta,
            omega,
            vm,
            changes: Vec::new(),
        };
        // Routes exist for every host pair of a connected topology; a failure here is skipped silently
        // only if the topology is disconnected, which the fixed flows would already have revealed.
        if let Ok(idx) = self.add_flow(nf, "arrivals") {
            self.start_flow(idx);
        }
        let t = now.saturating_add(gap);
        if more && t < stop {
            self.schedule(t, Ev::Arrival { gen: gi });
        }
    }

    // ----- sampling and output -----

    fn sample(&mut self) {
        let mss = self.mss;
        for (row, &fl) in self.sample_flows.iter().enumerate() {
            let f = &self.flows[fl as usize];
            self.sample_cum[row].push(f.bytes_acked(mss));
            if self.sample_cwnd {
                self.sample_cwnd_v[row].push(f.win.cwnd);
                let w = self.wmin(f);
                self.sample_wmin_v[row].push(w);
            }
        }
        self.n_ticks += 1;
        let t = self.now + self.sample_interval;
        if t <= self.duration {
            self.schedule(t, Ev::Sample);
        }
    }

    fn output(&self, last_t: u64) -> Value {
        let mss = self.mss;
        let fl = &self.flows;
        let name = |n: u32| self.net.names[n as usize].clone();
        let chname = |c: &u32| self.net.channels[*c as usize].name.clone();
        let flows = json!({
            "id": fl.iter().map(|f| f.id.clone()).collect::<Vec<_>>(),
            "label": fl.iter().map(|f| f.label.clone()).collect::<Vec<_>>(),
            "src": fl.iter().map(|f| name(f.src)).collect::<Vec<_>>(),
            "dst": fl.iter().map(|f| name(f.dst)).collect::<Vec<_>>(),
            "vm": fl.iter().map(|f| f.vm.map(|v| self.vm_names[v as usize].clone())).collect::<Vec<_>>(),
            "size_bytes": fl.iter().map(|f| f.size).collect::<Vec<_>>(),
            "start_ns": fl.iter().map(|f| f.start / Ps::PER_NS).collect::<Vec<_>>(),
            "finish_ns": fl.iter().map(|f| f.finished.map(|t| t / Ps::PER_NS)).collect::<Vec<_>>(),
            "bytes_acked": fl.iter().map(|f| f.bytes_acked(mss)).collect::<Vec<_>>(),
            "theta_bps": fl.iter().map(|f| f.theta0).collect::<Vec<_>>(),
            "omega": fl.iter().map(|f| f.omega0).collect::<Vec<_>>(),
            "retransmits": fl.iter().map(|f| f.retransmits).collect::<Vec<_>>(),
            "timeouts": fl.iter().map(|f| f.timeouts).collect::<Vec<_>>(),
            "spurious_retransmits": fl.iter().map(|f| f.spurious).collect::<Vec<_>>(),
            "route": fl.iter().map(|f| f.route_data.iter().map(chname).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "change_acked_bytes": fl.iter().map(|f| f.change_acked.clone()).collect::<Vec<_>>(),
        });
        let cs = &self.net.channels;
        let rt = &self.channels;
        let channels = json!({
            "name": cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "from": cs.iter().map(|c| name(c.from)).collect::<Vec<_>>(),
            "to": cs.iter().map(|c| name(c.to)).collect::<Vec<_>>(),
            "rate_bps": cs.iter().map(|c| c.rate.0).collect::<Vec<_>>(),
            "tx_bytes": rt.iter().map(|c| c.tx_bytes).collect::<Vec<_>>(),
            "drops": rt.iter().map(|c| c.drops).collect::<Vec<_>>(),
            "max_queue_bytes": rt.iter().map(|c| c.max_queue_bytes).collect::<Vec<_>>(),
        });
        let acked: Vec<Vec<u64>> = self
            .sample_cum
            .iter()
            .map(|cum| {
                let mut prev = 0;
                cum.iter()
                    .map(|&c| {
                        let d = c - prev;
                        prev = c;
                        d
                    })
                    .collect()
            })
            .collect();
        let mut samples = json!({
            "interval_ns": self.sample_interval / Ps::PER_NS,
            "flow_ids": self.sample_flows.iter().map(|&i| fl[i as usize].id.clone()).collect::<Vec<_>>(),
            "acked_bytes": acked,
        });
        if self.sample_cwnd {
            samples["cwnd_pkts"] = json!(self.sample_cwnd_v);
            samples["wmin_pkts"] = json!(self.sample_wmin_v);
        } else {
            samples["cwnd_pkts"] = Value::Null;
            samples["wmin_pkts"] = Value::Null;
        }
        json!({
            "flows": flows,
            "channels": channels,
            "samples": samples,
            "stats": {
                "events": self.events,
                "sim_end_ns": last_t.min(self.duration) / Ps::PER_NS,
                "packets_sent": self.packets_sent,
                "packets_dropped": self.packets_dropped,
                "peak_packets_in_flight": self.peak_in_flight,
            }
        })
    }
}

/// An exponential gap with mean 1 / rate seconds, in picoseconds (at least 1).
fn exp_gap_ps(rng: &mut Pcg64Mcg, rate_per_s: f64) -> u64 {
    let u: f64 = rng.gen();
    let secs = -(1.0 - u).ln() / rate_per_s;
    ((secs * 1e12) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        let link = r#"{"rate_bps": 1000000000, "delay_ns": 1000, "buffer": {"packets": 10}}"#;
        let flow = |id: &str, size: &str| {
            format!(
                r#"{{"id": "{id}", "src": "l0", "dst": "r0", "size_bytes": {size}, "start_ns": 0,
                    "theta_bps": 0, "omega": 1.0, "vm": "vm", "label": "", "changes": []}}"#
            )
        };
        let doc = format!(
            r#"{{"seed": 1, "duration_ns": 1000000,
              "packet": {{"mtu_bytes": 1500, "header_bytes": 40, "ack_bytes": 40}},
              "transport": {{"init_cwnd_pkts": 10.0, "min_rto_ns": 1000000, "initial_rto_ns": 3000000,
                "max_rto_ns": 1000000000, "delayed_ack": false, "delayed_ack_timeout_ns": 1,
                "dupack_threshold": 3}},
              "cc": {{"kind": "paccp", "rcos": 3.0}},
              "topology": {{"kind": "dumbbell", "left_hosts": 1, "right_hosts": 1, "access_link": {link},
                "bottleneck_link": {link}, "nic_buffer": {{"packets": 10}}}},
              "routing": {{"kind": "ecmp"}},
              "vms": [{{"id": "vm", "host": "l0", "label": "MRG", "theta_bps": 900, "omega": 3.0}}],
              "flows": [{}, {}, {}],
              "arrivals": [],
              "sampling": {{"interval_ns": 1000, "flows": "none"}}}}"#,
            flow("a", "null"),
            flow("b", "1000"),
            flow("c", "1000")
        );
        crate::parse(&doc).expect("scenario")
    }

    #[test]
    fn vbp_resplits_on_start_and_finish() {
        let mut sim = Simulation::new(scenario()).expect("valid");
        let pair = |s: &Simulation, i: usize| (s.flows[i].theta, s.flows[i].omega);
        sim.start_flow(0);
        assert_eq!(pair(&sim, 0), (900.0, 3.0));
        sim.start_flow(1);
        sim.start_flow(2);
        for i in 0..3 {
            assert_eq!(pair(&sim, i), (300.0, 1.0));
        }
        sim.finish_flow(1);
        assert_eq!(pair(&sim, 0), (450.0, 1.5));
        assert_eq!(pair(&sim, 2), (450.0, 1.5));
        sim.finish_flow(2);
        assert_eq!(pair(&sim, 0), (900.0, 3.0));
    }

    #[test]
    fn cdf_sampling_interpolates() {
        let cdf = [(100.0, 0.0), (200.0, 0.5), (1000.0, 1.0)];
        assert_eq!(sample_cdf(&cdf, 0.0), 100);
        assert_eq!(sample_cdf(&cdf, 0.25), 150);
        assert_eq!(sample_cdf(&cdf, 0.75), 600);
        assert_eq!(sample_cdf(&[(0.0, 0.0), (10.0, 1.0)], 0.01), 1);
    }
}
