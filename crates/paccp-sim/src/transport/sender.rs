//! The TCP sender: sending within the window, the NIC gate (host backpressure, host fair queuing),
//! ACK processing with NewReno recovery, and the retransmission timer.
use super::prr::{Prr, RenoSacks};
use super::{Ctx, Flow};
use crate::cc::{CcCtx, Controller};
use crate::event::Ev;
use crate::net::Pkt;
use crate::sack::SackOpt;

impl Flow {
    /// The controller's context at `now`.
    #[inline]
    pub(crate) fn cc_ctx(&self, now: u64, mss: u64) -> CcCtx<'static> {
        CcCtx {
            now_ps: now,
            srtt_ns: self.snd.rtt.srtt(),
            mss_bytes: mss,
            policy: self.policy,
            peers: &[],
        }
    }

    /// Sends segment `seg` (new or again) into the flow's NIC queue.
    pub(crate) fn send_segment(&mut self, idx: u32, seg: u64, cx: &mut Ctx<'_>) {
        let key = self.qkey();
        let ctx = self.cc_ctx(cx.now(), cx.p.mss);
        let payload = self.seg_payload(seg, cx.p.mss);
        let s = &mut self.snd;
        s.cc.on_send(&mut s.win, seg, &ctx);
        s.reno.note_tx(cx.now());
        if seg < s.high_tx {
            s.retransmits += 1;
        } else {
            s.high_tx = seg + 1;
        }
        let pkt = Pkt {
            flow: idx,
            pos: self.info.route_data,
            is_ack: false,
            class: s.class,
            size: (payload + cx.p.header as u32) as u16,
            seq: seg,
            ts: cx.now(),
            sack: SackOpt::NONE,
            ce: false,
        };
        let ch = cx.routes[self.info.route_data as usize];
        cx.inject(pkt, ch, key);
        let host_fq = cx.p.host_fq as usize;
        if host_fq > 0 {
            // The host NIC is a lossless FIFO under host fair queuing (validated), so the packet was
            // accepted and its serialisation ends at the channel's `busy_until`.
            let done = cx.channels[ch as usize].busy_until;
            let s = &mut self.snd;
            s.nic_done.push_back(done);
            while s.nic_done.len() > host_fq {
                s.nic_done.pop_front();
            }
        }
    }

    /// Host fair queuing: whether the flow holds fewer than `host_fq` packets in its NIC queue; if not,
    /// an [`Ev::FqRoom`] is scheduled for when its oldest one has been serialised.
    fn fq_room(&mut self, idx: u32, cx: &mut Ctx<'_>) -> bool {
        let now = cx.now();
        let s = &mut self.snd;
        while s.nic_done.front().is_some_and(|&d| d <= now) {
            s.nic_done.pop_front();
        }
        if s.nic_done.len() < cx.p.host_fq as usize {
            return true;
        }
        if !s.fq_wake {
            s.fq_wake = true;
            let t = s.nic_done[0];
            cx.schedule(t, Ev::FqRoom { flow: idx });
        }
        false
    }

    /// Whether the flow may put a segment into its NIC queue now. With host fair queuing, not while it
    /// holds `host_fq` packets there. With host backpressure, only if the queue has room and no other
    /// flow waits ahead of it (or it is the flow whose turn it is, see
    /// [`crate::sim::Simulation::nic_room_freed`], which uses the turn up); otherwise the flow waits
    /// at the back of the NIC's waiters.
    pub(crate) fn nic_room(&mut self, idx: u32, cx: &mut Ctx<'_>) -> bool {
        if cx.p.host_fq > 0 && !self.fq_room(idx, cx) {
            return false;
        }
        if !cx.p.backpressure {
            return true;
        }
        let size = cx.p.mss + cx.p.header;
        let key = self.qkey();
        let ch = cx.routes[self.info.route_data as usize];
        let c = &mut cx.channels[ch as usize];
        c.advance_unless_room(size, key, cx.q.now, cx.q.cur_from, cx.slab);
        if c.has_room(size, key) {
            if *cx.nic_turn == Some(idx) {
                *cx.nic_turn = None;
                return true;
            }
            // Per-class / per-VM queues: a flow whose own queue has room does not wait behind
            // flows of other queues.
            if c.waiters.is_empty() || c.sched.is_some() {
                return true;
            }
        }
        if !self.snd.blocked {
            self.snd.blocked = true;
            c.waiters.push_back(idx);
        }
        c.schedule_wake(ch, cx.q, cx.slab);
        false
    }

    /// Sends what the window (and the NIC gate) allows; arms the timer if data is outstanding.
    pub(crate) fn try_send(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        if !self.snd.hs.open {
            self.hs_start(idx, cx);
            return;
        }
        if cx.p.sack && self.snd.in_recovery {
            self.try_send_sack_recovery(idx, cx);
            self.arm_rto_if_idle(idx, cx);
            return;
        }
        if cx.p.prr && !cx.p.sack && self.snd.in_recovery {
            self.try_send_reno_prr(idx, cx);
            self.arm_rto_if_idle(idx, cx);
            return;
        }
        loop {
            let s = &mut self.snd;
            if cx.p.sack {
                // After a timeout, go-back-N skips what the scoreboard says the receiver holds.
                s.snd_nxt = s.sacked.next_gap(s.snd_nxt);
            }
            // NewReno with PRR: limited transmit (as Linux), duplicate-ACKed segments are not in flight.
            let left = if cx.p.prr && !cx.p.sack {
                s.reno.dup
            } else {
                0
            };
            let wnd = (s.win.cwnd.floor().max(1.0) as u64)
                .saturating_add(if s.in_recovery { s.inflate } else { 0 })
                .saturating_add(left)
                .min(s.host_wnd);
            // NewReno with PRR: a first unacknowledged segment presumed lost outside a recovery (ns-3's
            // NextSeg rule 1, see [`RenoSacks`]) goes first; it is not in flight.
            if cx.p.prr && !cx.p.sack && s.reno.head_lost {
                if s.snd_nxt - s.snd_una >= wnd.saturating_add(1) {
                    break;
                }
                s.reno.head_lost = false;
                let u = s.snd_una;
                s.reno.note_rtx(cx.now(), u);
                self.send_segment(idx, u, cx);
                continue;
            }
            if s.snd_nxt >= s.nsegs || s.snd_nxt - s.snd_una >= wnd || !self.nic_room(idx, cx) {
                break;
            }
            let seg = self.snd.snd_nxt;
            self.snd.snd_nxt += 1;
            self.send_segment(idx, seg, cx);
        }
        self.arm_rto_if_idle(idx, cx);
    }

    /// NewReno recovery with PRR: the lost head first (a fast retransmission, not held back by the NIC
    /// gate), then new data, while the pipe is below the PRR window.
    fn try_send_reno_prr(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        loop {
            let s = &self.snd;
            if !s.prr.may_send(s.reno.pipe(s.snd_nxt - s.snd_una)) {
                break;
            }
            if s.reno.head_lost {
                let s = &mut self.snd;
                s.reno.head_lost = false;
                s.reno.note_head_rtx(cx.now());
                s.prr.out += 1;
                let u = s.snd_una;
                self.send_segment(idx, u, cx);
                continue;
            }
            if s.snd_nxt >= s.nsegs
                || s.snd_nxt - s.snd_una >= s.host_wnd
                || !self.nic_room(idx, cx)
            {
                break;
            }
            let s = &mut self.snd;
            s.prr.out += 1;
            let seg = s.snd_nxt;
            s.snd_nxt += 1;
            self.send_segment(idx, seg, cx);
        }
    }

    fn arm_rto_if_idle(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let s = &self.snd;
        if s.snd_nxt > s.snd_una && s.rtt.rto_deadline == 0 {
            self.arm_rto(idx, cx);
        }
    }

    /// (Re)starts the retransmission timer: it expires one RTO from now.
    pub(crate) fn arm_rto(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let r = &mut self.snd.rtt;
        let d = cx.now() + r.rto;
        r.rto_deadline = d;
        if r.rto_event_at == 0 || r.rto_event_at > d {
            r.rto_event_at = d;
            cx.schedule(d, Ev::Rto { flow: idx });
        }
    }

    /// `stop_ns` of a single-path flow: no new data from now on (what was sent is still delivered;
    /// a connection's stop is its connection's, [`super::conn::Connection::stop`]).
    pub(crate) fn stop(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        if self.info.finished.is_some() || self.sub.is_some() {
            return;
        }
        let s = &mut self.snd;
        let sent = s.high_tx.max(s.snd_nxt);
        if sent < s.nsegs {
            s.nsegs = sent;
            s.last_payload = cx.p.mss as u32;
        }
        if self.snd.snd_una >= self.snd.nsegs {
            self.info.finished = Some(cx.now());
            self.snd.rtt.rto_deadline = 0;
            cx.finish(idx);
        }
    }

    /// The timer event: re-scheduled if the deadline moved, else a timeout (RFC 6298 section 5).
    pub(crate) fn rto_fire(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let now = cx.now();
        let ctx = self.cc_ctx(now, cx.p.mss);
        let s = &mut self.snd;
        if s.rtt.rto_event_at != now {
            return; // stale timer event
        }
        s.rtt.rto_event_at = 0;
        if s.rtt.rto_deadline == 0 || self.info.finished.is_some() {
            return;
        }
        if s.rtt.rto_deadline > now {
            let d = s.rtt.rto_deadline;
            s.rtt.rto_event_at = d;
            cx.schedule(d, Ev::Rto { flow: idx });
            return;
        }
        if !s.hs.open {
            self.syn_timeout(idx, cx);
            return;
        }
        let s = &mut self.snd;
        s.timeouts += 1;
        s.cc.on_rto(&mut s.win, &ctx);
        s.in_recovery = false;
        s.inflate = 0;
        s.dupacks = 0;
        s.reno = RenoSacks::default();
        s.recover = s.high_tx;
        s.snd_nxt = s.snd_una;
        // The scoreboard is kept (the receiver never discards SACKed data), like Linux.
        s.rtx_ptr = 0;
        s.rtx_marks.clear();
        s.relost.clear();
        s.rack_lost = 0;
        s.rtt.rto = (s.rtt.rto.saturating_mul(2)).min(cx.p.max_rto);
        s.rtt.rto_deadline = 0;
        self.try_send(idx, cx);
    }

    /// An ACK reached the sender.
    pub(crate) fn on_ack(&mut self, idx: u32, pkt: Pkt, cx: &mut Ctx<'_>) {
        if self.info.finished.is_some() {
            return;
        }
        if pkt.seq >= super::handshake::HS_ACK {
            self.on_handshake(idx, pkt, cx);
            return;
        }
        let now = cx.now();
        let p = cx.p;
        let sack = p.sack;
        let ack = pkt.seq;
        let s = &mut self.snd;
        if sack {
            for (a, b) in pkt.sack.blocks(ack) {
                s.sacked.insert(a.max(s.snd_una), b.min(s.high_tx));
            }
        }
        if ack > s.snd_una {
            let newly = ack - s.snd_una;
            s.snd_una = ack;
            if sack {
                s.sacked.trim_below(ack);
            }
            if s.snd_nxt < ack {
                s.snd_nxt = ack;
            }
            s.rtt
                .sample((now - pkt.ts) as f64 / 1000.0, p.min_rto, p.max_rto);
            let mut retransmit = false;
            // NewReno with PRR: the segments this ACK delivered (PRR's DeliveredData).
            let delivered = if p.prr && !sack {
                s.reno.check_rtx(pkt.ts, ack);
                s.reno.on_cum_ack(newly, s.snd_nxt - s.snd_una)
            } else {
                newly
            };
            if s.in_recovery {
                if ack >= s.recover {
                    s.in_recovery = false;
                    s.inflate = 0;
                    s.rack_lost = 0;
                    // NewReno: the duplicate-ACK marks stay (ns-3), see [`RenoSacks`].
                    s.reno.head_rtx_at = 0;
                    s.win.cwnd = s.win.ssthresh;
                } else if !sack && p.prr {
                    // RFC 6582 step 3 as Linux does it: a partial ACK marks the new first
                    // unacknowledged segment lost (tcp_newreno_mark_lost), PRR's window is set from the
                    // pipe without it (no SSRB bonus: a loss was newly marked, tcp_cwnd_reduction), and
                    // the send loop retransmits it first within that window, counted in prr_out
                    // (tcp_xmit_retransmit_queue): sndcnt segments in all. With sndcnt 0 the
                    // retransmission waits for a later ACK (ns-3 sends it at once), unless this ACK
                    // answers the newest transmission: then no later ACK will come (the pipe still
                    // counts the segments lost with the first one; in a long recovery PRR's
                    // proportional phase thins the ACK clock down to the retransmissions alone),
                    // and Linux would wait for the timer, so the retransmission goes now.
                    s.reno.head_lost = true;
                    s.reno.head_rtx_at = 0;
                    let pipe = s.reno.pipe(s.snd_nxt - s.snd_una);
                    let ss = s.win.ssthresh;
                    s.prr.on_ack(delivered, pipe, ss, false);
                    if s.reno.acks_newest(pkt.ts) {
                        s.prr.allow_one(pipe);
                    }
                } else if !sack {
                    s.inflate = s.inflate.saturating_sub(newly) + 1;
                    retransmit = true;
                }
            } else {
                let ctx = CcCtx {
                    peers: cx.peers,
                    ..self.cc_ctx(now, p.mss)
                };
                let s = &mut self.snd;
                s.cc.on_ack(&mut s.win, newly, &ctx);
            }
            self.snd.dupacks = 0;
            // A connection's subflow ends with its connection, not when its granted data is acknowledged.
            if self.snd.snd_una >= self.snd.nsegs && self.sub.is_none() {
                self.info.finished = Some(now);
                self.snd.rtt.rto_deadline = 0;
                cx.finish(idx);
                return;
            }
            let s = &mut self.snd;
            if s.snd_nxt > s.snd_una {
                self.arm_rto(idx, cx);
            } else {
                s.rtt.rto_deadline = 0;
            }
            if retransmit {
                let u = self.snd.snd_una;
                self.send_segment(idx, u, cx);
            }
            if sack && self.sack_should_recover(p.dupthresh) {
                self.enter_sack_recovery(idx, cx);
                return;
            }
            if sack && self.snd.in_recovery {
                self.snd.sack_detect_lost_rtx(p.dupthresh, pkt.ts, p.rack);
            }
            self.try_send(idx, cx);
        } else if ack == s.snd_una && s.snd_nxt > s.snd_una {
            if !sack && p.prr && s.reno.spurious_dupack(pkt.ts) {
                return; // the receiver had the segment: nothing left the network
            }
            s.dupacks += 1;
            if sack {
                if s.in_recovery {
                    s.sack_detect_lost_rtx(p.dupthresh, pkt.ts, p.rack);
                    self.try_send(idx, cx);
                } else if self.sack_should_recover(p.dupthresh) {
                    self.enter_sack_recovery(idx, cx);
                }
            } else if p.prr {
                if s.in_recovery {
                    s.reno.head_rtx_lost(pkt.ts);
                }
                self.reno_prr_dupack(idx, cx);
            } else if s.in_recovery {
                s.inflate += 1;
                self.try_send(idx, cx);
            } else if s.dupacks == p.dupthresh && s.snd_una >= s.recover {
                let ctx = self.cc_ctx(now, p.mss);
                let s = &mut self.snd;
                s.cc.on_loss(&mut s.win, &ctx);
                s.recover = s.high_tx;
                s.in_recovery = true;
                s.inflate = p.dupthresh as u64;
                let u = s.snd_una;
                s.rtx_ptr = u + 1;
                self.send_segment(idx, u, cx);
                self.arm_rto(idx, cx);
                self.try_send(idx, cx);
            }
        }
    }
}

impl Flow {
    /// A duplicate ACK without SACK, with PRR: counted as one delivered segment; the third one starts a
    /// recovery (unless `snd_una` is still below the last recovery point, RFC 6582's careful variant),
    /// the others send what PRR (in recovery) or limited transmit (before it) allows.
    fn reno_prr_dupack(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let p = cx.p;
        let s = &mut self.snd;
        let delivered = s.reno.on_dupack(s.snd_nxt - s.snd_una);
        if !s.in_recovery && s.dupacks == p.dupthresh && s.snd_una >= s.recover {
            let ctx = self.cc_ctx(cx.now(), p.mss);
            let s = &mut self.snd;
            let prior = s.win.cwnd;
            s.cc.on_loss(&mut s.win, &ctx);
            s.recover = s.high_tx;
            s.in_recovery = true;
            s.prr = Prr::start(prior);
            s.reno.head_lost = true;
            let pipe = s.reno.pipe(s.snd_nxt - s.snd_una);
            let ss = s.win.ssthresh;
            s.prr.on_ack(delivered.max(1), pipe, ss, false);
            self.arm_rto(idx, cx);
        } else if s.in_recovery {
            let pipe = s.reno.pipe(s.snd_nxt - s.snd_una);
            let ss = s.win.ssthresh;
            s.prr.on_ack(delivered, pipe, ss, false);
        }
        self.try_send(idx, cx);
    }
}

#[cfg(test)]
#[path = "sender_tests.rs"]
mod tests;
