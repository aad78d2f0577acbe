//! Constant-bit-rate flows (UDP-like, e.g. iperf -u): one datagram of up to an MSS every
//! `size * 8 / rate`, no congestion control, no ACKs, no retransmission. A delivered datagram counts as
//! acknowledged at the receiver (`snd_una` counts delivered datagrams), so samples and `bytes_acked`
//! report the delivered rate. The packets go through the same NIC, queues and shapers as TCP's.
//!
//! Under host backpressure the NIC queue is lossless (TCP waits for room instead of being dropped), and
//! datagrams are queued there even above the queue's limit (a UDP flow within its shaper's rate keeps
//! its share next to TCP, which keeps that queue full). Only above [`CBR_QUEUE_CAP_BYTES`] of queued
//! bytes is a datagram dropped at the host: without that cap every datagram of a flow faster than its
//! NIC or shaper stayed queued, memory proportional to rate x time (a 100 Tbit/s flow allocated 10 GiB
//! and aborted).
use super::{Ctx, Flow};
use crate::event::Ev;
use crate::net::Pkt;
use crate::sack::SackOpt;
use crate::units::{Bps, Bytes};

/// Bytes a lossless host queue may hold before a constant-rate datagram is dropped there (64 MiB: far
/// above any configured queue, so only a flow faster than its NIC or shaper reaches it; memory per
/// queue is then bounded, about 45,000 packets).
pub(crate) const CBR_QUEUE_CAP_BYTES: u64 = 64 << 20;

impl Flow {
    /// Sends the next datagram and schedules the one after it.
    pub(crate) fn cbr_send(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let Some(rate) = self.info.cbr_bps else {
            return;
        };
        let key = self.qkey();
        let s = &mut self.snd;
        if self.info.finished.is_some() || s.snd_nxt >= s.nsegs {
            return;
        }
        let seg = s.snd_nxt;
        s.snd_nxt += 1;
        s.high_tx = s.snd_nxt;
        let payload = if seg + 1 == s.nsegs {
            s.last_payload
        } else {
            cx.p.mss as u32
        };
        let size = payload + cx.p.header as u32;
        let pkt = Pkt {
            flow: idx,
            pos: self.info.route_data,
            is_ack: false,
            class: s.class,
            size: size as u16,
            seq: seg,
            ts: cx.now(),
            sack: SackOpt::NONE,
            ce: false,
        };
        let ch = cx.routes[self.info.route_data as usize];
        let c = &mut cx.channels[ch as usize];
        if !c.lossless || c.queue_bytes() + size as u64 <= CBR_QUEUE_CAP_BYTES {
            cx.inject(pkt, ch, key);
        } else {
            c.drops += 1;
            cx.stats.packets_sent += 1;
            cx.stats.packets_dropped += 1;
        }
        let next = cx.now() + Bps(rate).tx_time(Bytes(size as u64)).0;
        cx.schedule(next, Ev::CbrSend { flow: idx });
    }

    /// A datagram reached the receiver.
    pub(crate) fn cbr_deliver(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let s = &mut self.snd;
        s.snd_una += 1;
        if s.snd_una >= s.nsegs && self.info.finished.is_none() {
            self.info.finished = Some(cx.now());
            cx.finish(idx);
        }
    }
}
