//! The transport: a window-based TCP sender and receiver per flow (segment-numbered sequence space).
//!
//! - MSS = mtu - header; a finite flow of `size` bytes sends `ceil(size / MSS)` segments, the last one
//!   shorter. The usable window is `max(1, floor(cwnd))` segments (plus the NewReno inflation in
//!   recovery).
//! - The receiver ([`receiver`]) sends cumulative ACKs (next expected segment) echoing the send time of
//!   the segment that triggered them (like TCP timestamps), keeps out-of-order segments, and
//!   acknowledges out-of-order or duplicate segments at once; with `delayed_ack` it acknowledges every
//!   second in-order segment or on the timeout.
//! - The sender ([`sender`]): fast retransmit after `dupack_threshold` duplicate ACKs, then NewReno
//!   recovery (RFC 6582), or SACK recovery ([`sack_recovery`], RFC 6675; with `rack`, in it loss
//!   marking as Linux's RACK: a segment sent before one that has arrived is lost); with `prr` (the
//!   default, as Linux and ns-3) what a NewReno recovery sends is bounded by Proportional Rate
//!   Reduction ([`prr`], RFC 6937) instead of RFC 6582's window inflation (the SACK recovery keeps RFC
//!   6675's pipe < cwnd), and its duplicate-ACK marks outlive the recovery as ns-3's do
//!   ([`prr::RenoSacks`]); RTO per RFC 6298 with exponential backoff, go-back-N after a timeout. The
//!   window itself is the congestion controller's ([`crate::cc`]).
//! - Optionally ([`handshake`]) a flow opens with a three-way handshake (SYN, SYN-ACK, third ACK)
//!   before its data.
//!
//! Handlers reach the rest of the engine only through a [`Ctx`]: the clock and the event queue, the
//! channels (to inject a packet or wait for room in the NIC queue), the packet counters, and the list
//! of flows that finished (the simulation then updates VBP splits).
//!
//! Multipath ([`conn`], docs/adding-a-scheme.md): a connection composes several [`Flow`]s as subflows
//! (each its own route, mark and controller); it maps its byte stream onto the subflows' segments
//! through a subflow scheduler ([`conn::sched`]) and reorders at a connection-level receive buffer. A
//! subflow's sender sends what its connection granted it ([`Flow::sub`]) and does not finish on its
//! own; otherwise it is the single-path sender. [`crate::cc::CcCtx::peers`] carries its siblings'
//! windows to a coupled controller.
pub(crate) mod cbr;
pub(crate) mod conn;
pub(crate) mod handshake;
pub(crate) mod prr;
pub(crate) mod receiver;
pub(crate) mod sack_recovery;
pub(crate) mod sender;

use self::prr::{Prr, RenoSacks};
use crate::cc::{AnyController, PeerWindow, Policy, Window};
use crate::config::ChangeCfg;
use crate::event::{Ev, EventQueue};
use crate::net::channel::Channel;
use crate::net::slab::Slab;
use crate::net::{NetStats, Pkt, QKey};
use crate::rng::stream;
use crate::sack::{Ranges, MAX_BLOCKS};
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;

/// Transport parameters shared by every flow (times in ps).
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub(crate) mss: u64,
    pub(crate) header: u64,
    pub(crate) ack_bytes: u64,
    pub(crate) init_cwnd: f64,
    pub(crate) min_rto: u64,
    pub(crate) initial_rto: u64,
    pub(crate) max_rto: u64,
    pub(crate) delayed_ack: bool,
    pub(crate) delack_timeout: u64,
    pub(crate) dupthresh: u32,
    pub(crate) sack: bool,
    pub(crate) backpressure: bool,
    pub(crate) host_fq: u32,
    /// NewReno: Proportional Rate Reduction in recovery, limited transmit before it ([`prr`]).
    pub(crate) prr: bool,
    /// SACK: in a recovery, losses marked as Linux's RACK does ([`sack_recovery`]).
    pub(crate) rack: bool,
    /// Mean receiver processing delay of an ACK (ps; 0 = none), see [`receiver`].
    pub(crate) ack_delay_mean: u64,
    /// The scenario's seed (the receivers' `ack_delay/<flow id>` streams).
    pub(crate) seed: u64,
    /// The three-way handshake ([`handshake`]); None = none.
    pub(crate) hs: Option<handshake::Params>,
}

/// What a transport handler may do besides changing its own flow.
pub(crate) struct Ctx<'a> {
    pub(crate) q: &'a mut EventQueue,
    pub(crate) channels: &'a mut [Channel],
    /// Where the packets in the channels live.
    pub(crate) slab: &'a mut Slab,
    pub(crate) stats: &'a mut NetStats,
    pub(crate) p: &'a Params,
    /// The flat route table (see [`Pkt::pos`]).
    pub(crate) routes: &'a [u32],
    /// Host backpressure: the flow whose turn it is to put one segment into its NIC queue.
    pub(crate) nic_turn: &'a mut Option<u32>,
    /// Flows that finished during this handler (the simulation updates their VMs afterwards).
    pub(crate) finished: &'a mut Vec<u32>,
    /// At an ACK of a subflow: the windows of its connection's other subflows ([`conn`]), else empty.
    pub(crate) peers: &'a [PeerWindow],
}

impl Ctx<'_> {
    /// The current time (ps).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.q.now
    }

    /// Schedules an event at `t`.
    #[inline]
    pub(crate) fn schedule(&mut self, t: u64, ev: Ev) {
        self.q.schedule(t, ev);
    }

    /// Hands a packet to its first channel (the host NIC); it may be dropped there.
    #[inline]
    pub(crate) fn inject(&mut self, pkt: Pkt, ch: u32, key: QKey) {
        self.stats.packets_sent += 1;
        self.stats.in_flight += 1;
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(self.stats.in_flight);
        self.channels[ch as usize].enqueue(ch, pkt, key, self.q, self.stats, self.slab);
    }

    /// Records that a flow finished.
    #[inline]
    pub(crate) fn finish(&mut self, flow: u32) {
        self.finished.push(flow);
    }
}

/// What a flow is (fixed at its creation, apart from `started` / `finished`).
#[derive(Debug)]
pub(crate) struct FlowInfo {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) src: u32,
    pub(crate) dst: u32,
    pub(crate) vm: Option<u32>,
    pub(crate) size: Option<u64>,
    pub(crate) start: u64,
    /// Offsets of the data and ACK routes in the flat route table.
    pub(crate) route_data: u32,
    pub(crate) route_ack: u32,
    /// Initial pair (before a VBP split), reported in the output.
    pub(crate) theta0: u64,
    pub(crate) omega0: f64,
    pub(crate) changes: Vec<ChangeCfg>,
    pub(crate) change_acked: Vec<u64>,
    pub(crate) started: bool,
    pub(crate) finished: Option<u64>,
    /// A constant-bit-rate flow's rate ([`cbr`]), else None (TCP).
    pub(crate) cbr_bps: Option<u64>,
}

/// RTT estimation (RFC 6298) and the retransmission timer.
#[derive(Debug, Clone)]
pub(crate) struct Rtt {
    pub(crate) srtt_ns: f64,
    pub(crate) rttvar_ns: f64,
    pub(crate) has_rtt: bool,
    pub(crate) rto: u64,
    /// When the timer expires (0 = not armed).
    pub(crate) rto_deadline: u64,
    /// The time of the scheduled [`Ev::Rto`] (0 = none).
    pub(crate) rto_event_at: u64,
}

impl Rtt {
    /// RTT sample `r` (ns, RFC 6298) from an echoed send time; updates srtt, rttvar and the RTO.
    pub(crate) fn sample(&mut self, r: f64, min_rto: u64, max_rto: u64) {
        let t = self;
        if t.has_rtt {
            t.rttvar_ns = 0.75 * t.rttvar_ns + 0.25 * (t.srtt_ns - r).abs();
            t.srtt_ns = 0.875 * t.srtt_ns + 0.125 * r;
        } else {
            t.srtt_ns = r;
            t.rttvar_ns = r / 2.0;
            t.has_rtt = true;
        }
        let rto_ps = ((t.srtt_ns + 4.0 * t.rttvar_ns) * 1000.0) as u64;
        t.rto = rto_ps.clamp(min_rto, max_rto);
    }

    /// The smoothed RTT (ns), if sampled.
    #[inline]
    pub(crate) fn srtt(&self) -> Option<f64> {
        self.has_rtt.then_some(self.srtt_ns)
    }
}

/// The sending side of a flow.
#[derive(Debug)]
pub(crate) struct Sender {
    pub(crate) cc: AnyController,
    pub(crate) win: Window,
    /// Class / mark of its packets.
    pub(crate) class: u8,
    pub(crate) nsegs: u64,
    pub(crate) last_payload: u32,
    pub(crate) snd_una: u64,
    pub(crate) snd_nxt: u64,
    pub(crate) high_tx: u64,
    pub(crate) dupacks: u32,
    pub(crate) in_recovery: bool,
    pub(crate) recover: u64,
    pub(crate) inflate: u64,
    /// SACK scoreboard: segments the receiver reported holding above `snd_una`.
    pub(crate) sacked: Ranges,
    /// SACK recovery: one past the highest segment retransmitted in this recovery (RFC 6675 HighRxt + 1).
    pub(crate) rtx_ptr: u64,
    /// SACK recovery: retransmissions not yet delivered, in sending order, with `snd_nxt` and the
    /// time (ps) when sent.
    pub(crate) rtx_marks: VecDeque<(u64, u64, u64)>,
    /// SACK recovery: the unSACKed segments below this one were first sent before a segment that has
    /// since arrived, so they are lost (RACK, see [`sack_recovery`]); 0 outside a recovery.
    pub(crate) rack_lost: u64,
    /// SACK recovery: retransmissions found lost, to be sent again first.
    pub(crate) relost: VecDeque<u64>,
    /// The current recovery's PRR state (with `prr`).
    pub(crate) prr: Prr,
    /// NewReno: duplicate ACKs counted as delivered, lost head (with `prr`).
    pub(crate) reno: RenoSacks,
    /// Waiting for room in its NIC queue (host backpressure).
    pub(crate) blocked: bool,
    /// Host fair queuing: serialisation ends of the flow's last data packets at its NIC (oldest first).
    pub(crate) nic_done: VecDeque<u64>,
    /// Host fair queuing: an [`Ev::FqRoom`] event is scheduled.
    pub(crate) fq_wake: bool,
    /// The receive window its host imposes on it (segments; `u64::MAX`: none), as a virtual switch
    /// that rewrites the window of the ACKs it passes to the guest ([`crate::host::Selector::on_ack_in`]).
    pub(crate) host_wnd: u64,
    pub(crate) rtt: Rtt,
    pub(crate) retransmits: u64,
    pub(crate) timeouts: u64,
    /// The handshake ([`handshake`]): open at once without one.
    pub(crate) hs: handshake::Hs,
}

/// The receiving side of a flow.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub(crate) rcv_nxt: u64,
    pub(crate) ooo: Ranges,
    /// SACK: recently received out-of-order segments, most recent first, one per reported block
    /// (`u64::MAX` = empty); the ACK's blocks are the blocks containing them (RFC 2018).
    pub(crate) recent: [u64; MAX_BLOCKS],
    /// Data segments that arrived when the receiver already had them.
    pub(crate) spurious: u64,
    pub(crate) delack_pending: u32,
    pub(crate) delack_gen: u16,
    pub(crate) delack_ts: u64,
    /// With a receiver processing delay: an ACK is scheduled (the `DelAck` event of `delack_gen`).
    pub(crate) ack_due: bool,
    /// A data segment the next ACK covers arrived with CE set (the ACK echoes it).
    pub(crate) ce: bool,
    /// The stream of processing delays (only with `ack_delay_mean` > 0).
    pub(crate) ack_rng: Option<Box<Pcg64Mcg>>,
}

/// One flow: what it is, its current policy, its sender and its receiver.
#[derive(Debug)]
pub(crate) struct Flow {
    pub(crate) info: FlowInfo,
    pub(crate) policy: Policy,
    pub(crate) snd: Sender,
    pub(crate) rcv: Receiver,
    /// A connection's subflow: its data-sequence mapping ([`conn::SubMap`]); `None` for a single-path
    /// flow.
    pub(crate) sub: Option<Box<conn::SubMap>>,
}

impl Flow {
    /// A flow that has not started, with its controller.
    pub(crate) fn new(info: FlowInfo, policy: Policy, cc: AnyController, p: &Params) -> Flow {
        let (nsegs, last_payload) = match info.size {
            None => (u64::MAX, p.mss as u32),
            Some(s) => {
                let n = s.div_ceil(p.mss);
                (n, (s - (n - 1) * p.mss) as u32)
            }
        };
        let info_is_tcp = info.cbr_bps.is_none();
        let ack_rng = (p.ack_delay_mean > 0)
            .then(|| Box::new(stream(p.seed, &format!("ack_delay/{}", info.id))));
        Flow {
            info,
            policy,
            snd: Sender {
                cc,
                win: Window {
                    cwnd: p.init_cwnd,
                    ssthresh: f64::INFINITY,
                },
                class: 0,
                nsegs,
                last_payload,
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
                rack_lost: 0,
                relost: VecDeque::new(),
                prr: Prr::default(),
                reno: RenoSacks::default(),
                blocked: false,
                nic_done: VecDeque::new(),
                fq_wake: false,
                host_wnd: u64::MAX,
                rtt: Rtt {
                    srtt_ns: 0.0,
                    rttvar_ns: 0.0,
                    has_rtt: false,
                    rto: p.initial_rto,
                    rto_deadline: 0,
                    rto_event_at: 0,
                },
                retransmits: 0,
                timeouts: 0,
                hs: handshake::Hs::new(p.hs.is_some() && info_is_tcp),
            },
            rcv: Receiver {
                rcv_nxt: 0,
                ooo: Ranges::default(),
                recent: [u64::MAX; MAX_BLOCKS],
                spurious: 0,
                delack_pending: 0,
                delack_gen: 0,
                delack_ts: 0,
                ack_due: false,
                ce: false,
                ack_rng,
            },
            sub: None,
        }
    }

    /// Payload bytes of segment `seg` (the last segment of a finite stream is shorter).
    #[inline]
    pub(crate) fn seg_payload(&self, seg: u64, mss: u64) -> u32 {
        match &self.sub {
            Some(m) => m.payload(seg, mss),
            None if seg + 1 == self.snd.nsegs => self.snd.last_payload,
            None => mss as u32,
        }
    }

    /// Bytes cumulatively acknowledged.
    pub(crate) fn bytes_acked(&self, mss: u64) -> u64 {
        match self.info.size {
            Some(s) if self.snd.snd_una >= self.snd.nsegs => s,
            _ => self.snd.snd_una * mss,
        }
    }

    /// The queue key of the flow's packets.
    #[inline]
    pub(crate) fn qkey(&self) -> QKey {
        QKey {
            class: self.snd.class,
            vm: self.info.vm.unwrap_or(QKey::NO_VM),
        }
    }

    /// The flow's Wmin in segments (0 before the first RTT sample).
    pub(crate) fn wmin(&self, mss: u64) -> f64 {
        self.policy.wmin(self.snd.rtt.srtt(), mss)
    }
}
