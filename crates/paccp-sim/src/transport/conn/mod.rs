//! Connections: one byte stream carried over N subflows (MPTCP, RFC 8684, as Linux MPTCP v0.9x does it).
//!
//! - Each subflow is an ordinary [`Flow`] (its own route, mark, controller, loss recovery) whose
//!   segments are *granted* by its connection: the connection maps its data segments (DSNs, numbered
//!   0.. over the stream; the last one shorter) onto subflow segments ([`SubMap`]). A subflow's sender
//!   sends what was granted to it (`Sender::nsegs` is the end of its granted data) and never finishes
//!   on its own; its retransmissions resend the same DSN.
//! - [`Connection::push`] hands out data one segment at a time: the subflow scheduler ([`sched`])
//!   picks an available subflow; the segment is granted and the subflow's sender tries to send it; if
//!   it cannot (NIC queue full, recovery), the grant is taken back and that subflow is unavailable until
//!   the next push. The simulation calls `push` after every event of a subflow (an ACK, its start, a
//!   timeout, room in its NIC queue).
//! - **Connection-level receive window**: a DSN may be sent only below `data_una + W`, `data_una` being
//!   the oldest DSN not acknowledged on any subflow (the sender's view of the DATA_ACK: a DSN counts as
//!   acknowledged once a subflow's cumulative ACK covers a segment carrying it) and `W` the receive
//!   buffer in segments (the application reads in-order data at once, so the buffer holds only
//!   out-of-order data). With `dynamic_beta`, W = max(buffer, beta * max_i srtt_i * sum_i cwnd_i / srtt_i)
//!   (the paper's Eq. 1 with each subflow's window rate as its bandwidth).
//! - When the window blocks the scheduler's pick, Linux's `mptcp_rcv_buf_optimization`: every other
//!   subflow that carries the oldest unacknowledged DSN and is slower (larger srtt) and not in
//!   recovery has its window halved (ssthresh too unless in slow start), at most once per srtt of the
//!   picked subflow (**penalisation**); and if the picked subflow does not carry that DSN and a holder
//!   has cwnd <= 4 or an srtt above 4x the picked one's, the DSN is sent again on the picked subflow
//!   (**opportunistic reinjection**).
//! - **Reinjection on a subflow's retransmission timeout** (Linux MPTCP's `mptcp_reinject_data`):
//!   the DSNs the timed-out subflow carries and that no subflow has had acknowledged are queued for
//!   the other subflows; a push hands a queued DSN to the scheduler's pick before new data if the pick
//!   does not carry it already (the timed-out subflow still retransmits its own copies).
//! - **Stop** (`stop_ns`): the stream ends at the data handed out so far; the connection completes
//!   once that is delivered.
//! - A coupled controller (LIA, OLIA) of a subflow sees the other subflows' windows at each ACK
//!   ([`peer_window`], [`crate::cc::CcCtx::peers`]).
//! - The receiver side reorders: a DSN reaching its subflow's receiver for the first time is delivered
//!   to the connection's reorder buffer (the DSN is read from the sender's mapping, standing in for the
//!   DSS option a real segment carries); the connection completes when every byte has been delivered
//!   in order, and its subflows finish with it.
pub mod sched;

use self::sched::{SubflowScheduler, SubflowView};
use super::{Ctx, Flow};
use crate::cc::{Controller, PeerWindow};
use crate::sack::Ranges;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// At most this many subflows per connection (path masks are `u32`).
pub(crate) const MAX_SUBFLOWS: usize = 32;

/// A subflow's data-sequence mapping: its granted segments' DSNs from `base` (its oldest not yet
/// cumulatively acknowledged) on.
#[derive(Debug)]
pub(crate) struct SubMap {
    /// The connection (index).
    pub(crate) conn: u32,
    base: u64,
    dsns: VecDeque<u64>,
    /// The stream's last DSN and its payload (bytes).
    last_dsn: u64,
    last_payload: u32,
}

impl SubMap {
    /// The DSN carried by subflow segment `seg`, if still mapped.
    #[inline]
    pub(crate) fn dsn(&self, seg: u64) -> Option<u64> {
        seg.checked_sub(self.base)
            .and_then(|i| self.dsns.get(i as usize).copied())
    }

    /// Payload of subflow segment `seg` (its DSN's; a full MSS if unmapped).
    pub(crate) fn payload(&self, seg: u64, mss: u64) -> u32 {
        match self.dsn(seg) {
            Some(d) if d == self.last_dsn => self.last_payload,
            _ => mss as u32,
        }
    }

    /// Forgets the segments below `una` (cumulatively acknowledged on the subflow).
    fn trim(&mut self, una: u64) {
        while self.base < una && !self.dsns.is_empty() {
            self.dsns.pop_front();
            self.base += 1;
        }
    }
}

/// The receive buffer rule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RcvBuf {
    /// Fixed size (bytes); with `beta`, the floor of the dynamic size.
    pub(crate) bytes: u64,
    /// Dynamic size (the paper's Eq. 1) with this safety factor.
    pub(crate) beta: Option<f64>,
}

/// What a connection is made of.
pub(crate) struct ConnSpec {
    pub(crate) id: String,
    /// Subflow flow indices, in order.
    pub(crate) subs: Vec<u32>,
    /// Bytes of the stream (`None`: unbounded).
    pub(crate) size: Option<u64>,
    pub(crate) sched: Box<dyn SubflowScheduler>,
    pub(crate) rcvbuf: RcvBuf,
    pub(crate) penalize: bool,
}

/// Counters of a connection (reported in the output).
#[derive(Debug, Default, Clone, Copy)]
struct ConnStats {
    /// Pushes stopped by the receive window.
    window_blocked: u64,
    penalisations: u64,
    reinjections: u64,
    /// DSNs queued again after a subflow's retransmission timeout, and those sent on another subflow.
    rto_queued: u64,
    rto_reinjections: u64,
    /// Largest out-of-order data held at the receiver (segments).
    max_ooo_segs: u64,
    /// Largest receive window used (segments).
    max_rwnd_segs: u64,
}

/// One connection: its stream, its subflows, its scheduler, both ends' data-level state.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) id: String,
    /// Subflow flow indices, by position.
    pub(crate) subs: Vec<u32>,
    size: Option<u64>,
    /// Data segments of the stream (`u64::MAX`: unbounded).
    total: u64,
    sched: Box<dyn SubflowScheduler>,
    rcvbuf: RcvBuf,
    penalize: bool,
    // Sender.
    dsn_nxt: u64,
    data_una: u64,
    /// DSNs `data_una..dsn_nxt`: the mask of subflows carrying each, whether it was acknowledged, and
    /// whether it waits in `reinject`.
    out: VecDeque<(u32, bool, bool)>,
    /// DSNs to send again on another subflow (a subflow's retransmission timeout), oldest first.
    reinject: VecDeque<u64>,
    /// The stream was cut short by `stop` (`size` no longer its length).
    stopped: bool,
    /// Per subflow position: when it last penalised the others (ps; `None`: never).
    last_penal: Vec<Option<u64>>,
    // Receiver.
    rcv_nxt: u64,
    ooo: Ranges,
    ooo_segs: u64,
    pub(crate) finished: Option<u64>,
    stats: ConnStats,
    views: Vec<SubflowView>,
}

impl Connection {
    /// A connection over `spec.subs` (flow indices; each gets its mapping here), index `idx`.
    pub(crate) fn new(idx: u32, spec: ConnSpec, flows: &mut [Flow], mss: u64) -> Connection {
        let ConnSpec {
            id,
            subs,
            size,
            sched,
            rcvbuf,
            penalize,
        } = spec;
        let (total, last_payload) = match size {
            None => (u64::MAX, mss as u32),
            Some(s) => {
                let n = s.div_ceil(mss);
                (n, (s - (n - 1) * mss) as u32)
            }
        };
        for &fl in &subs {
            let f = &mut flows[fl as usize];
            f.snd.nsegs = 0;
            // Subflows start without a handshake (MPTCP's MP_CAPABLE / MP_JOIN are not modelled).
            f.snd.hs = crate::transport::handshake::Hs::new(false);
            f.sub = Some(Box::new(SubMap {
                conn: idx,
                base: 0,
                dsns: VecDeque::new(),
                last_dsn: total.saturating_sub(1),
                last_payload,
            }));
        }
        let n = subs.len();
        Connection {
            id,
            subs,
            size,
            total,
            sched,
            rcvbuf,
            penalize,
            dsn_nxt: 0,
            data_una: 0,
            out: VecDeque::new(),
            reinject: VecDeque::new(),
            stopped: false,
            last_penal: vec![None; n],
            rcv_nxt: 0,
            ooo: Ranges::default(),
            ooo_segs: 0,
            finished: None,
            stats: ConnStats::default(),
            views: Vec::with_capacity(n),
        }
    }

    /// The receive window (segments) at this moment.
    fn rwnd_segs(&self, flows: &[Flow], mss: u64) -> u64 {
        let mut bytes = self.rcvbuf.bytes as f64;
        if let Some(beta) = self.rcvbuf.beta {
            let (mut max_rtt, mut sum_bw) = (0.0f64, 0.0f64);
            for &fl in &self.subs {
                let f = &flows[fl as usize];
                if let (true, Some(r)) = (f.info.started, f.snd.rtt.srtt()) {
                    if r > 0.0 {
                        max_rtt = max_rtt.max(r);
                        sum_bw += f.snd.win.cwnd * mss as f64 / r; // bytes per ns
                    }
                }
            }
            bytes = bytes.max(beta * max_rtt * sum_bw);
        }
        ((bytes / mss as f64) as u64).max(1)
    }

    fn view(f: &Flow, pos: usize, tried: bool) -> SubflowView {
        let s = &f.snd;
        let in_flight = s.snd_nxt - s.snd_una;
        let wnd = s.win.cwnd.floor().max(1.0) as u64;
        SubflowView {
            pos,
            class: s.class,
            srtt_ns: s.rtt.srtt(),
            cwnd: s.win.cwnd,
            in_flight,
            available: f.info.started
                && f.info.finished.is_none()
                && !tried
                && !s.blocked
                && s.snd_nxt >= s.nsegs
                && (s.in_recovery || s.dupacks > 0 || in_flight < wnd),
        }
    }

    /// Grants `dsn` to the subflow at `pos` and lets it send; takes the grant back (false) if it did not.
    fn grant(&mut self, pos: usize, dsn: u64, flows: &mut [Flow], cx: &mut Ctx<'_>) -> bool {
        let fl = self.subs[pos];
        let f = &mut flows[fl as usize];
        let Some(m) = f.sub.as_mut() else {
            return false;
        };
        m.dsns.push_back(dsn);
        f.snd.nsegs += 1;
        f.try_send(fl, cx);
        if f.snd.snd_nxt >= f.snd.nsegs {
            return true;
        }
        f.snd.nsegs -= 1;
        if let Some(m) = f.sub.as_mut() {
            m.dsns.pop_back();
        }
        false
    }

    /// Hands out data to the subflows while the scheduler finds one that takes it and the receive
    /// window allows (module doc).
    pub(crate) fn push(&mut self, flows: &mut [Flow], cx: &mut Ctx<'_>) {
        if self.finished.is_some() {
            return;
        }
        let mut tried = 0u32;
        loop {
            self.drop_stale_reinjects();
            if self.reinject.is_empty() && self.dsn_nxt >= self.total {
                break;
            }
            self.views.clear();
            for (k, &fl) in self.subs.iter().enumerate() {
                let v = Self::view(&flows[fl as usize], k, tried & (1 << k) != 0);
                self.views.push(v);
            }
            let Some(k) = self.sched.pick(&self.views) else {
                break;
            };
            if !self.views.get(k).is_some_and(|v| v.available) {
                break; // a scheduler that picks an unavailable subflow sends nothing
            }
            if !self.reinject.is_empty() {
                if let Some(i) = self.reinject_for(k) {
                    let dsn = self.reinject[i];
                    if self.grant(k, dsn, flows, cx) {
                        self.reinject.remove(i);
                        let e = &mut self.out[(dsn - self.data_una) as usize];
                        e.0 |= 1 << k;
                        e.2 = false;
                        self.stats.rto_reinjections += 1;
                    } else {
                        tried |= 1 << k;
                    }
                    continue;
                }
                if self.dsn_nxt >= self.total {
                    tried |= 1 << k; // it carries every queued DSN: let another subflow take them
                    continue;
                }
            }
            let wnd = self.rwnd_segs(flows, cx.p.mss);
            self.stats.max_rwnd_segs = self.stats.max_rwnd_segs.max(wnd);
            if self.dsn_nxt >= self.data_una.saturating_add(wnd) {
                self.stats.window_blocked += 1;
                if self.penalize {
                    self.rcv_buf_optimization(k, flows, cx);
                }
                break;
            }
            let dsn = self.dsn_nxt;
            if self.grant(k, dsn, flows, cx) {
                self.dsn_nxt += 1;
                self.out.push_back((1 << k, false, false));
            } else {
                tried |= 1 << k;
            }
        }
    }

    /// Forgets queued reinjections that were acknowledged meanwhile (at the front).
    fn drop_stale_reinjects(&mut self) {
        while let Some(&d) = self.reinject.front() {
            let gone = d < self.data_una
                || self
                    .out
                    .get((d - self.data_una) as usize)
                    .is_none_or(|e| e.1);
            if !gone {
                break;
            }
            self.reinject.pop_front();
            if let Some(e) = d
                .checked_sub(self.data_una)
                .and_then(|i| self.out.get_mut(i as usize))
            {
                e.2 = false;
            }
        }
    }

    /// The oldest queued reinjection not yet acknowledged that subflow `k` does not carry.
    fn reinject_for(&self, k: usize) -> Option<usize> {
        self.reinject.iter().position(|&d| {
            d >= self.data_una
                && self
                    .out
                    .get((d - self.data_una) as usize)
                    .is_some_and(|e| !e.1 && e.0 & (1 << k) == 0)
        })
    }

    /// Subflow `flow` had a retransmission timeout: the DSNs it carries that are not acknowledged
    /// are queued for the other subflows (module doc).
    pub(crate) fn on_subflow_rto(&mut self, flow: &Flow) {
        let Some(m) = flow.sub.as_ref() else {
            return;
        };
        if self.finished.is_some() {
            return;
        }
        for seg in flow.snd.snd_una..flow.snd.nsegs {
            let Some(d) = m.dsn(seg) else { continue };
            let Some(e) = d
                .checked_sub(self.data_una)
                .and_then(|i| self.out.get_mut(i as usize))
            else {
                continue;
            };
            if !e.1 && !e.2 {
                e.2 = true;
                self.reinject.push_back(d);
                self.stats.rto_queued += 1;
            }
        }
    }

    /// `stop_ns`: the stream ends at the data handed out so far. Returns true if it is now complete.
    pub(crate) fn stop(&mut self, flows: &mut [Flow], now: u64, mss: u64) -> bool {
        if self.finished.is_some() {
            return false;
        }
        if self.dsn_nxt < self.total {
            self.total = self.dsn_nxt;
            self.stopped = true;
            for &fl in &self.subs {
                if let Some(m) = flows[fl as usize].sub.as_mut() {
                    m.last_dsn = self.total.saturating_sub(1);
                    m.last_payload = mss as u32;
                }
            }
        }
        if self.rcv_nxt >= self.total {
            self.finished = Some(now);
            return true;
        }
        false
    }

    /// Linux's `mptcp_rcv_buf_optimization` for the picked subflow `k` (module doc).
    fn rcv_buf_optimization(&mut self, k: usize, flows: &mut [Flow], cx: &mut Ctx<'_>) {
        let Some(&(mask, _, _)) = self.out.front() else {
            return;
        };
        let now = cx.now();
        let me = &flows[self.subs[k] as usize];
        let my_rtt = me.snd.rtt.srtt().unwrap_or(0.0);
        let again = self.last_penal[k].is_none_or(|t| (now - t) as f64 >= my_rtt * 1000.0);
        let holders = || (0..self.subs.len()).filter(move |&j| j != k && mask & (1 << j) != 0);
        if again {
            for j in holders() {
                let f = &mut flows[self.subs[j] as usize];
                let slower = my_rtt < f.snd.rtt.srtt().unwrap_or(0.0);
                if slower && !f.snd.in_recovery {
                    let w = &mut f.snd.win;
                    let prior = w.cwnd;
                    w.cwnd = (w.cwnd / 2.0).floor().max(1.0);
                    if prior >= w.ssthresh {
                        w.ssthresh = (w.ssthresh / 2.0).floor().max(2.0);
                    }
                    self.last_penal[k] = Some(now);
                    self.stats.penalisations += 1;
                }
            }
        }
        if mask & (1 << k) != 0 {
            return;
        }
        let mut reinject = false;
        for j in holders() {
            let f = &flows[self.subs[j] as usize];
            if f.snd.win.cwnd <= 4.0 {
                reinject = true;
                break;
            }
            if 4.0 * my_rtt >= f.snd.rtt.srtt().unwrap_or(0.0) {
                reinject = false;
                break;
            }
            reinject = true;
        }
        let head = self.data_una;
        if reinject && self.grant(k, head, flows, cx) {
            if let Some(m) = self.out.front_mut() {
                m.0 |= 1 << k;
            }
            self.stats.reinjections += 1;
        }
    }

    /// The subflow at `pos` had its segments `from..to` cumulatively acknowledged.
    pub(crate) fn on_subflow_acked(&mut self, flow: &mut Flow, from: u64, to: u64) {
        let Some(m) = flow.sub.as_mut() else {
            return;
        };
        for seg in from..to {
            let Some(d) = m.dsn(seg) else { continue };
            if d < self.data_una {
                continue;
            }
            if let Some(e) = self.out.get_mut((d - self.data_una) as usize) {
                e.1 = true;
            }
        }
        m.trim(to);
        while self.out.front().is_some_and(|e| e.1) {
            self.out.pop_front();
            self.data_una += 1;
        }
    }

    /// The receiver: `dsn` arrived (first time on its subflow). Returns true if the stream is now
    /// complete (everything delivered in order).
    pub(crate) fn deliver(&mut self, dsn: u64, now: u64) -> bool {
        if self.finished.is_some() {
            return false;
        }
        if dsn == self.rcv_nxt {
            self.rcv_nxt += 1;
            if let Some(end) = self.ooo.pop_if_starts_at(self.rcv_nxt) {
                self.ooo_segs -= end - self.rcv_nxt;
                self.rcv_nxt = end;
            }
        } else if dsn > self.rcv_nxt && !self.ooo.contains(dsn) {
            self.ooo.insert(dsn, dsn + 1);
            self.ooo_segs += 1;
            self.stats.max_ooo_segs = self.stats.max_ooo_segs.max(self.ooo_segs);
        }
        if self.rcv_nxt >= self.total {
            self.finished = Some(now);
            return true;
        }
        false
    }

    /// Bytes delivered in order to the application.
    pub(crate) fn bytes_delivered(&self, mss: u64) -> u64 {
        match self.size {
            Some(s) if self.rcv_nxt >= self.total && !self.stopped => s,
            _ => self.rcv_nxt * mss,
        }
    }
}

/// The `connections` table of the output (docs/engine-contract.md), or `None` without connections.
pub(crate) fn output(
    conns: &[Connection],
    flows: &[Flow],
    mss: u64,
    ps_per_ns: u64,
) -> Option<Value> {
    if conns.is_empty() {
        return None;
    }
    let col = |f: &dyn Fn(&Connection) -> Value| conns.iter().map(f).collect::<Vec<_>>();
    Some(json!({
        "id": col(&|c| json!(c.id)),
        "subflows": col(&|c| json!(c.subs.iter().map(|&i| flows[i as usize].info.id.clone()).collect::<Vec<_>>())),
        "size_bytes": col(&|c| json!(c.size)),
        "finish_ns": col(&|c| json!(c.finished.map(|t| t / ps_per_ns))),
        "bytes_delivered": col(&|c| json!(c.bytes_delivered(mss))),
        "window_blocked": col(&|c| json!(c.stats.window_blocked)),
        "penalisations": col(&|c| json!(c.stats.penalisations)),
        "reinjections": col(&|c| json!(c.stats.reinjections)),
        "rto_queued": col(&|c| json!(c.stats.rto_queued)),
        "rto_reinjections": col(&|c| json!(c.stats.rto_reinjections)),
        "max_ooo_bytes": col(&|c| json!(c.stats.max_ooo_segs * mss)),
        "max_rwnd_bytes": col(&|c| json!(c.stats.max_rwnd_segs * mss)),
    }))
}

/// What the other subflows of its connection see of a subflow (coupled controllers).
#[inline]
pub(crate) fn peer_window(f: &Flow) -> PeerWindow {
    PeerWindow {
        cwnd: f.snd.win.cwnd,
        srtt_ns: f.snd.rtt.srtt(),
        loss_interval: f.snd.cc.loss_interval(),
    }
}
