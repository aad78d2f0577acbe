//! Scripted NewReno (no SACK) recoveries with PRR, ACK by ACK, against Linux's own arithmetic.
//!
//! One flow, a loss-free path but for the first transmissions of a chosen set of segments, every
//! segment delivered in sending order and acknowledged at once (no delayed ACK), each ACK handed to
//! the sender before the next segment arrives. Beside the engine runs a transcription of what Linux
//! does with the same ACK without SACK (`net/ipv4/tcp_input.c`, `tcp_output.c`, `tcp_recovery.c`):
//! `tcp_add_reno_sack` / `tcp_remove_reno_sacks` / `tcp_limit_reno_sacked` (sacked_out),
//! `tcp_newreno_mark_lost` (lost_out: the head at the third duplicate ACK and at every partial ACK),
//! `tcp_cwnd_reduction` (cwnd = packets_in_flight + sndcnt, after the marking), then
//! `tcp_xmit_retransmit_queue` (the lost head, if in_flight < cwnd; prr_out += 1) and
//! `tcp_write_xmit` (new data while in_flight < cwnd; prr_out += each), with
//! in_flight = packets_out - sacked_out - lost_out + retrans_out. The engine must send, after every ACK
//! of the recovery, what Linux sends.
//!
//! Then scripted SACK flows (`scripted_sack_flow`): which losses a SACK recovery repairs without the
//! retransmission timer, and at which ACK, against what Linux's RACK decides in a recovery.
use super::super::prr::Prr;
use super::super::{Ctx, Flow, FlowInfo, Params};
use crate::cc::reno::Reno;
use crate::cc::{AnyController, Policy};
use crate::event::EventQueue;
use crate::net::channel::Channel;
use crate::net::slab::Slab;
use crate::net::{NetStats, Pkt};
use crate::sack::SackOpt;
use crate::units::Bps;
use std::collections::{BTreeSet, VecDeque};

/// A cumulative ACK of flow 0 up to segment `seq`, echoing the send time `ts` (no SACK blocks).
fn pure_ack(seq: u64, ts: u64) -> Pkt {
    Pkt {
        flow: 0,
        pos: 0,
        is_ack: true,
        class: 0,
        size: 40,
        seq,
        ts,
        sack: SackOpt::NONE,
        ce: false,
    }
}

/// The engine's side: one flow and the little of the network it touches (its NIC channel).
struct Bench {
    flow: Flow,
    q: EventQueue,
    channels: Vec<Channel>,
    slab: Slab,
    stats: NetStats,
    p: Params,
    routes: Vec<u32>,
    nic_turn: Option<u32>,
    finished: Vec<u32>,
}

impl Bench {
    fn new(init_cwnd: f64) -> Bench {
        Bench::flow(init_cwnd, None, false, false)
    }

    /// A flow of `size` bytes (None: long-lived), with SACK or without, with RACK in the SACK recovery
    /// or without.
    fn flow(init_cwnd: f64, size: Option<u64>, sack: bool, rack: bool) -> Bench {
        let p = Params {
            mss: 1460,
            header: 40,
            ack_bytes: 40,
            init_cwnd,
            min_rto: 200_000_000_000,
            initial_rto: 1_000_000_000_000,
            max_rto: 1_000_000_000_000,
            delayed_ack: false,
            delack_timeout: 1,
            dupthresh: 3,
            sack,
            backpressure: false,
            host_fq: 0,
            prr: true,
            rack,
            ack_delay_mean: 0,
            seed: 1,
            hs: None,
        };
        let info = FlowInfo {
            id: "a".into(),
            label: String::new(),
            src: 0,
            dst: 1,
            vm: None,
            size,
            start: 0,
            route_data: 0,
            route_ack: 0,
            theta0: 0,
            omega0: 1.0,
            changes: Vec::new(),
            change_acked: Vec::new(),
            started: true,
            finished: None,
            cbr_bps: None,
        };
        let policy = Policy {
            theta_bps: 0.0,
            omega: 1.0,
        };
        let cc = AnyController::Reno(Reno { min_cwnd: 1.0 });
        let flow = Flow::new(info, policy, cc, &p);
        let nic = Channel::new(Bps(100_000_000_000), 1_000, (1 << 20, u64::MAX), (1500, 40));
        Bench {
            flow,
            q: EventQueue::default(),
            channels: vec![nic],
            slab: Slab::default(),
            stats: NetStats::default(),
            p,
            routes: vec![0],
            nic_turn: None,
            finished: Vec::new(),
        }
    }

    /// Runs `f` on the flow with its context at time `now` (ps).
    fn with<R>(&mut self, now: u64, f: impl FnOnce(&mut Flow, &mut Ctx<'_>) -> R) -> R {
        self.q.now = now;
        let mut cx = Ctx {
            q: &mut self.q,
            channels: &mut self.channels,
            slab: &mut self.slab,
            stats: &mut self.stats,
            p: &self.p,
            routes: &self.routes,
            nic_turn: &mut self.nic_turn,
            finished: &mut self.finished,
            peers: &[],
        };
        f(&mut self.flow, &mut cx)
    }
}

/// Linux's NewReno sender state (segments), as `tcp_sock` keeps it.
#[derive(Debug, Default)]
struct Linux {
    snd_una: u64,
    snd_nxt: u64,
    cwnd: u64,
    ssthresh: u64,
    prior_cwnd: u64,
    high_seq: u64,
    sacked_out: u64,
    lost_out: u64,
    retrans_out: u64,
    prr_delivered: u64,
    prr_out: u64,
    recovery: bool,
}

/// Which term of `tcp_cwnd_reduction` set an ACK's sndcnt.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Term {
    Proportional,
    /// PRR-SSRB, `max(prr_delivered - prr_out, newly_acked_sacked)` below `ssthresh - in_flight`.
    Delivered,
    /// PRR-SSRB, `ssthresh - in_flight`.
    Delta,
}

impl Linux {
    fn packets_out(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    fn in_flight(&self) -> u64 {
        self.packets_out() - self.sacked_out - self.lost_out + self.retrans_out
    }

    /// `tcp_limit_reno_sacked`.
    fn limit_reno_sacked(&mut self) {
        let holes = self.lost_out.max(1).min(self.packets_out());
        if self.sacked_out + holes > self.packets_out() {
            self.sacked_out = self.packets_out() - holes;
        }
    }

    /// `tcp_cwnd_reduction(sk, newly_acked_sacked, newly_lost, flag)`: sets cwnd, returns sndcnt's term.
    fn cwnd_reduction(
        &mut self,
        delivered: u64,
        newly_lost: u64,
        una_advanced: bool,
    ) -> Option<Term> {
        if delivered == 0 {
            return None;
        }
        let in_flight = self.in_flight() as i64;
        let delta = self.ssthresh as i64 - in_flight;
        self.prr_delivered += delivered;
        let out = self.prr_out as i64;
        let (mut sndcnt, term) = if delta < 0 {
            let dividend = self.ssthresh * self.prr_delivered + self.prior_cwnd - 1;
            (
                (dividend / self.prior_cwnd) as i64 - out,
                Term::Proportional,
            )
        } else {
            let mut s = (self.prr_delivered as i64 - out).max(delivered as i64);
            if una_advanced && newly_lost == 0 {
                s += 1;
            }
            if s < delta {
                (s, Term::Delivered)
            } else {
                (delta, Term::Delta)
            }
        };
        sndcnt = sndcnt.max(i64::from(self.prr_out == 0));
        self.cwnd = (in_flight + sndcnt) as u64;
        Some(term)
    }

    /// One ACK up to `ack`: returns (head retransmitted, new segments sent, the partial ACK's term).
    fn on_ack(&mut self, ack: u64) -> (u64, u64, Option<Term>) {
        let mut term = None;
        if ack > self.snd_una {
            // tcp_clean_rtx_queue: the acknowledged head was lost and retransmitted.
            let acked = ack - self.snd_una;
            self.lost_out = 0;
            self.retrans_out = 0;
            self.snd_una = ack;
            // tcp_remove_reno_sacks
            let delivered = acked.saturating_sub(self.sacked_out).max(1);
            self.sacked_out = self.sacked_out.saturating_sub(acked - 1);
            self.limit_reno_sacked();
            if self.recovery {
                assert!(
                    ack < self.high_seq,
                    "the script ends at the end of the recovery"
                );
                // tcp_newreno_mark_lost: a partial ACK marks the new head lost.
                self.lost_out = 1;
                term = self.cwnd_reduction(delivered, 1, true);
            } else {
                self.cwnd += acked; // slow start (not reached by the scripts below)
            }
        } else {
            // tcp_add_reno_sack
            let before = self.sacked_out;
            self.sacked_out += 1;
            self.limit_reno_sacked();
            let delivered = self.sacked_out - before;
            if !self.recovery && self.sacked_out >= 3 {
                // tcp_newreno_mark_lost, tcp_enter_recovery, tcp_init_cwnd_reduction (Reno ssthresh)
                self.lost_out = 1;
                self.recovery = true;
                self.prior_cwnd = self.cwnd;
                self.ssthresh = (self.cwnd / 2).max(2);
                self.high_seq = self.snd_nxt;
                self.prr_delivered = 0;
                self.prr_out = 0;
                self.cwnd_reduction(delivered.max(1), 1, false);
            } else if self.recovery {
                self.cwnd_reduction(delivered, 0, false);
            }
        }
        // tcp_xmit_retransmit_queue, then tcp_write_xmit (limited transmit before the recovery).
        let (mut rtx, mut new) = (0, 0);
        if self.recovery && self.lost_out > self.retrans_out && self.in_flight() < self.cwnd {
            self.retrans_out += 1;
            self.prr_out += 1;
            rtx = 1;
        }
        while self.in_flight() < self.cwnd {
            self.snd_nxt += 1;
            self.prr_out += u64::from(self.recovery);
            new += 1;
        }
        (rtx, new, term)
    }
}

/// The scripted path: the segments in flight in sending order, as (segment, a first transmission, send
/// time), and the receiver behind it, whose ACK echoes the send time of the segment that triggered it
/// (as the engine's receiver does). Every delivered segment is acknowledged at once, one step later.
struct Path {
    inflight: VecDeque<(u64, bool, u64)>,
    rcvd: BTreeSet<u64>,
    rcv_nxt: u64,
    now: u64,
}

impl Path {
    /// The flow sends its initial window onto an empty path.
    fn start(b: &mut Bench) -> Path {
        let now = 1_000_000;
        b.with(now, |f, cx| f.try_send(0, cx));
        Path {
            inflight: (0..b.flow.snd.snd_nxt).map(|s| (s, true, now)).collect(),
            rcvd: BTreeSet::new(),
            rcv_nxt: 0,
            now,
        }
    }

    /// The next segment to arrive (or to be dropped by the script).
    fn next(&mut self) -> Option<(u64, bool, u64)> {
        self.inflight.pop_front()
    }

    /// `seg` arrives; returns the receiver's next expected segment.
    fn deliver(&mut self, seg: u64) -> u64 {
        self.rcvd.insert(seg);
        while self.rcvd.contains(&self.rcv_nxt) {
            self.rcv_nxt += 1;
        }
        self.rcv_nxt
    }

    /// The receiver's ACK, echoing `sent_at`, reaches the flow one step later; what the flow sends
    /// goes on the path (its retransmissions are of its first unacknowledged segment). Returns the
    /// sender's (snd_una, snd_nxt, retransmits) before the ACK.
    fn ack(&mut self, b: &mut Bench, sent_at: u64) -> (u64, u64, u64) {
        self.now += 1_000_000;
        let now = self.now;
        let s = &b.flow.snd;
        let before = (s.snd_una, s.snd_nxt, s.retransmits);
        let ack = pure_ack(self.rcv_nxt, sent_at);
        b.with(now, |f, cx| f.on_ack(0, ack, cx));
        let s = &b.flow.snd;
        let head = s.snd_una;
        self.inflight
            .extend((0..s.retransmits - before.2).map(|_| (head, false, now)));
        self.inflight
            .extend((before.1..s.snd_nxt).map(|x| (x, true, now)));
        before
    }
}

/// Runs the script (window `w`, first transmissions of `lost` dropped) to the end of the recovery;
/// asserts that the engine sends what Linux sends after every ACK and returns the terms that set the
/// partial ACKs' windows.
fn scripted_recovery(w: u64, lost: &[u64]) -> Vec<(u64, Term, u64)> {
    let mut b = Bench::new(w as f64);
    let mut linux = Linux {
        cwnd: w,
        ..Linux::default()
    };
    let mut path = Path::start(&mut b);
    linux.snd_nxt = b.flow.snd.snd_nxt;
    assert_eq!(linux.snd_nxt, w, "the initial window");
    let mut partial = Vec::new();
    let mut k = 0;
    while let Some((seg, first, sent_at)) = path.next() {
        if first && lost.contains(&seg) {
            continue;
        }
        let rcv_nxt = path.deliver(seg);
        if linux.recovery && rcv_nxt >= linux.high_seq {
            break; // the recovery ends; the rest is not what this test is about
        }
        k += 1;
        let (una0, nxt0, rtx0) = path.ack(&mut b, sent_at);
        let s = &b.flow.snd;
        let (rtx, new) = (s.retransmits - rtx0, s.snd_nxt - nxt0);
        let (want_rtx, want_new, term) = linux.on_ack(rcv_nxt);
        let what = if rcv_nxt > una0 {
            "partial"
        } else {
            "duplicate"
        };
        assert_eq!(
            (rtx, new),
            (want_rtx, want_new),
            "ACK {k} ({what}, ack {rcv_nxt}): engine sent (retransmissions, new), Linux sends \
             these; Linux {linux:?}, engine prr {:?}",
            s.prr
        );
        if let Some(t) = term {
            partial.push((rcv_nxt, t, want_rtx + want_new));
        }
    }
    assert!(linux.recovery, "the script must start a recovery");
    partial
}

#[test]
fn partial_acks_send_what_linux_sends_where_the_delivered_term_binds() {
    // Window 10, six of its segments lost: ssthresh 5, RecoverFS 10. The partial ACK of segment 0
    // finds in_flight = ssthresh (delta 0): Linux sends nothing, its retransmission of segment 1 waits
    // for the next duplicate ACK; the one of segment 6 finds in_flight 3 with prr_delivered =
    // prr_out, so max(prr_delivered - prr_out, 1) = 1 < delta 2: only the retransmission goes out.
    // Before the fix the engine counted the new head in the pipe and sent its retransmission on top
    // of sndcnt (a retransmission and a new segment at the first of these ACKs); with the head out of
    // the pipe but still retransmitted at once (ns-3's rule) it sent the retransmission there.
    let partial = scripted_recovery(10, &[0, 1, 2, 3, 6, 9]);
    assert!(
        partial.iter().any(|&(_, t, n)| t == Term::Delta && n == 0),
        "a partial ACK with nothing to send: {partial:?}"
    );
    assert!(
        partial
            .iter()
            .any(|&(_, t, n)| t == Term::Delivered && n == 1),
        "a partial ACK where the delivered term binds: {partial:?}"
    );
}

#[test]
fn partial_acks_send_what_linux_sends_in_the_proportional_phase() {
    // Window 20, its first seven segments lost: ssthresh 10, RecoverFS 20. The first partial ACK
    // finds in_flight 11 > ssthresh with ceil(14 * 10 / 20) = 7 = prr_out: sndcnt 0, so Linux holds
    // the retransmission of segment 1 back (the old engine sent it and a new segment); the later
    // partial ACKs' windows are set by ssthresh - in_flight.
    let partial = scripted_recovery(20, &[0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(partial.len(), 6, "{partial:?}");
    assert_eq!(partial[0].1, Term::Proportional, "{partial:?}");
    assert_eq!(partial[0].2, 0, "{partial:?}");
    assert!(
        partial[1..]
            .iter()
            .all(|&(_, t, n)| t == Term::Delta && n == 2),
        "{partial:?}"
    );
}

#[test]
fn a_partial_ack_where_the_delivered_term_binds_sends_only_the_retransmission() {
    // Mid-recovery (ssthresh 10, RecoverFS 20, prr_delivered = prr_out = 20): segments 10..20
    // outstanding, 4 of them duplicate-ACKed, the head 10 retransmitted. The ACK of 10 alone delivers
    // one segment and marks 11 lost: in_flight = 9 - 4 - 1 = 4, delta 6, and
    // max(prr_delivered - prr_out, 1) = 1 binds: sndcnt 1, the retransmission of 11 and nothing new.
    // The engine before the fix computed the pipe as 5 (11 counted) for a window of 6, then sent the
    // retransmission on top: two segments.
    let mut b = Bench::new(20.0);
    let s = &mut b.flow.snd;
    (s.snd_una, s.snd_nxt, s.high_tx, s.recover) = (10, 20, 20, 20);
    s.in_recovery = true;
    s.win.cwnd = 10.0;
    s.win.ssthresh = 10.0;
    s.reno.dup = 4;
    s.prr = Prr {
        delivered: 20,
        out: 20,
        recover_fs: 20.0,
        cwnd: 5,
    };
    let mut linux = Linux {
        snd_una: 10,
        snd_nxt: 20,
        cwnd: 5,
        ssthresh: 10,
        prior_cwnd: 20,
        high_seq: 20,
        sacked_out: 4,
        lost_out: 1,
        retrans_out: 1,
        prr_delivered: 20,
        prr_out: 20,
        recovery: true,
    };
    let ack = pure_ack(11, 1_000);
    b.with(2_000_000, |f, cx| f.on_ack(0, ack, cx));
    let s = &b.flow.snd;
    assert_eq!(linux.on_ack(11), (1, 0, Some(Term::Delivered)));
    assert_eq!(
        (s.retransmits, s.snd_nxt),
        (1, 20),
        "the retransmission of 11 only"
    );
    assert_eq!((s.prr.delivered, s.prr.out), (21, 21));
}

/// A NewReno flow of `n` segments (window `w`) on the scripted path without the timer: the first
/// transmissions of `lost` and the first retransmissions of `lost_rtx` are dropped, every other
/// segment is delivered in sending order and acknowledged at once, echoing its send time. Runs until
/// nothing is left on the path; returns the flow's first unacknowledged segment then.
fn scripted_newreno_without_timer(n: u64, w: u64, lost: &[u64], lost_rtx: &[u64]) -> u64 {
    let mut b = Bench::flow(w as f64, Some(n * 1460), false, false);
    let mut path = Path::start(&mut b);
    let mut rtx_dropped = BTreeSet::new();
    while let Some((seg, first, sent_at)) = path.next() {
        if first && lost.contains(&seg)
            || !first && lost_rtx.contains(&seg) && rtx_dropped.insert(seg)
        {
            continue;
        }
        path.deliver(seg);
        path.ack(&mut b, sent_at);
    }
    assert_eq!(b.flow.snd.timeouts, 0);
    b.flow.snd.snd_una
}

#[test]
fn a_long_newreno_recovery_does_not_freeze_when_prr_holds_the_last_retransmission() {
    // Window 20, segments 0..16 lost: 4 duplicate ACKs, then one partial ACK per RTT. PRR stays in its
    // proportional phase (the pipe counts the lost segments) and sends about one segment per two
    // delivered, so the ACK clock thins to the retransmissions alone; the partial ACK of segment 1's
    // retransmission finds sndcnt 0 (Linux holds the retransmission of 2 back for a later ACK). No
    // later ACK can come: the engine used to wait for the timer here (segment 2 first unacknowledged
    // when the path ran dry); it now retransmits, as RFC 6582 does at every partial ACK.
    let lost: Vec<u64> = (0..16).collect();
    assert_eq!(scripted_newreno_without_timer(40, 20, &lost, &[]), 40);
}

#[test]
fn a_lost_fast_retransmission_is_repaired_without_the_timer() {
    // Window 20, segment 5 lost and so is its fast retransmission. The duplicate ACKs of the segments
    // sent after the retransmission echo later send times: on an in-order path it is lost, and the
    // head goes again (the engine used to keep sending new data on the duplicate ACKs until its timer).
    assert_eq!(scripted_newreno_without_timer(60, 20, &[5], &[5]), 60);
}

/// An ACK of flow 0 up to `rcv_nxt` echoing `ts`, with the SACK blocks of `rcvd` above it (at most
/// three: the block holding the segment `seg` that triggered it first, then the highest, as the
/// receiver reports the most recent ones on an in-order path).
fn sack_ack(rcv_nxt: u64, rcvd: &BTreeSet<u64>, seg: u64, ts: u64) -> Pkt {
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    for &x in rcvd.range(rcv_nxt + 1..) {
        match blocks.last_mut() {
            Some(b) if b.1 == x => b.1 += 1,
            _ => blocks.push((x, x + 1)),
        }
    }
    blocks.reverse();
    if let Some(i) = blocks.iter().position(|&(a, e)| a <= seg && seg < e) {
        let b = blocks.remove(i);
        blocks.insert(0, b);
    }
    let mut sack = SackOpt::NONE;
    for &(a, e) in blocks.iter().take(3) {
        sack.push(rcv_nxt, a, e);
    }
    Pkt {
        sack,
        ..pure_ack(rcv_nxt, ts)
    }
}

/// What a scripted SACK flow did: per ACK (its cumulative number, the send time it echoes) the
/// segments the sender retransmitted in response.
struct SackRun {
    rtx_at: Vec<(u64, u64, Vec<u64>)>,
    finished: bool,
    timeouts: u64,
    retransmits: u64,
}

/// A SACK flow of `n` segments, window `w`, on a path that drops the first transmissions of `lost`
/// and delivers everything else in sending order, every segment acknowledged at once (cumulative ACK,
/// SACK blocks, the segment's send time echoed), each ACK handed to the sender before the next segment
/// arrives. Runs until the path is empty: then the flow has finished or waits for its timer.
fn scripted_sack_flow(n: u64, w: u64, lost: &[u64], rack: bool) -> SackRun {
    let mut b = Bench::flow(w as f64, Some(n * 1460), true, rack);
    let mut sent = BTreeSet::new();
    // The path: (segment, a first transmission, send time) in sending order.
    let mut path: VecDeque<(u64, bool, u64)> = VecDeque::new();
    let drain = |b: &mut Bench, sent: &mut BTreeSet<u64>, path: &mut VecDeque<(u64, bool, u64)>| {
        let mut rtx = Vec::new();
        while let Some((pkt, _)) = b.channels[0].pop_head(&mut b.slab) {
            let first = sent.insert(pkt.seq);
            path.push_back((pkt.seq, first, pkt.ts));
            if !first {
                rtx.push(pkt.seq);
            }
        }
        rtx
    };
    let mut now = 1_000_000;
    b.with(now, |f, cx| f.try_send(0, cx));
    drain(&mut b, &mut sent, &mut path);
    assert_eq!(path.len() as u64, w, "the initial window");
    let (mut rcvd, mut rcv_nxt) = (BTreeSet::new(), 0);
    let mut rtx_at = Vec::new();
    while let Some((seg, first, ts)) = path.pop_front() {
        if first && lost.contains(&seg) {
            continue;
        }
        rcvd.insert(seg);
        while rcvd.contains(&rcv_nxt) {
            rcv_nxt += 1;
        }
        now += 1_000_000;
        let ack = sack_ack(rcv_nxt, &rcvd, seg, ts);
        b.with(now, |f, cx| f.on_ack(0, ack, cx));
        let rtx = drain(&mut b, &mut sent, &mut path);
        rtx_at.push((rcv_nxt, ts, rtx));
    }
    let s = &b.flow.snd;
    SackRun {
        rtx_at,
        finished: b.flow.info.finished.is_some(),
        timeouts: s.timeouts,
        retransmits: s.retransmits,
    }
}

#[test]
fn a_sack_recovery_repairs_the_flows_lost_last_segment_without_the_timer() {
    // 20 segments in one window, every second one's first transmission lost, the last one (19)
    // included: the pattern of a slow start that overshoots a full queue (each ACK releases two
    // segments, the second finds no room). RFC 6675's IsLost never marks 19 (no SACKed segment above
    // it) and NextSeg's rule 3 stops at the highest SACKed segment, so the old engine retransmitted
    // 1..17, was left with the partial ACK of 19 and waited for the 200 ms timer. Linux's RACK marks
    // 19 lost at the first ACK that delivers a retransmission (sent after 19's first transmission);
    // ns-3 3.44 resends it at the partial ACK. Every loss is repaired once, nothing spuriously.
    let lost: Vec<u64> = (1..20).step_by(2).collect();
    let run = scripted_sack_flow(20, 20, &lost, true);
    assert!(
        run.finished && run.timeouts == 0,
        "the flow waits for its timer: {:?}",
        run.rtx_at
    );
    assert_eq!(run.retransmits, lost.len() as u64, "{:?}", run.rtx_at);
}

#[test]
fn the_last_segment_is_marked_lost_by_the_ack_that_delivers_a_later_retransmission() {
    // Segments 5 and 19 lost: 6, 7, 8 SACKed start the recovery and 5 is retransmitted while 9..19
    // are still on the way. The ACKs of 9..18 arrive after that retransmission was sent but echo
    // earlier send times: they prove nothing about 19 (it could be behind them), so 19 must not be
    // resent there. The ACK of the retransmission of 5 (cumulative up to 19, echoing the
    // retransmission's own send time) proves 19 gone: Linux's RACK marks it lost there (its
    // retransmission was delivered, and 19 was sent before it) and it goes out at once.
    let run = scripted_sack_flow(20, 20, &[5, 19], true);
    let when: Vec<_> = run
        .rtx_at
        .iter()
        .filter(|r| r.2.contains(&19))
        .map(|r| r.0)
        .collect();
    assert_eq!(
        when,
        vec![19],
        "ACKs after which 19 was resent: {:?}",
        run.rtx_at
    );
    assert!(run.finished && run.timeouts == 0, "{:?}", run.rtx_at);
    assert_eq!(run.retransmits, 2, "{:?}", run.rtx_at);
}

#[test]
fn without_rack_the_sack_recovery_leaves_the_last_segment_to_the_timer() {
    // `transport.rack` off (the default): RFC 6675 alone, as before the option; the alternating-loss
    // pattern of the test above repairs 1..17 and leaves 19 to the retransmission timer.
    let lost: Vec<u64> = (1..20).step_by(2).collect();
    let run = scripted_sack_flow(20, 20, &lost, false);
    assert!(!run.finished, "{:?}", run.rtx_at);
    let resent: Vec<u64> = run.rtx_at.iter().flat_map(|r| r.2.clone()).collect();
    assert!(
        !resent.contains(&19),
        "19 resent without RACK: {:?}",
        run.rtx_at
    );
    assert_eq!(resent.len(), lost.len() - 1, "{:?}", run.rtx_at);
}
