//! The TCP receiver: cumulative ACKs with echoed send times, out-of-order ranges, SACK blocks
//! (RFC 2018) and delayed ACKs.
use super::{Ctx, Flow};
use crate::event::Ev;
use crate::net::Pkt;
use crate::sack::{SackOpt, MAX_BLOCKS};

impl Flow {
    /// A data segment reached the receiver.
    pub(crate) fn on_data(&mut self, idx: u32, pkt: Pkt, cx: &mut Ctx<'_>) {
        let r = &mut self.rcv;
        let seg = pkt.seq;
        let mut immediate = true;
        if seg == r.rcv_nxt {
            let had_hole = !r.ooo.is_empty();
            r.rcv_nxt += 1;
            if let Some(end) = r.ooo.pop_if_starts_at(r.rcv_nxt) {
                r.rcv_nxt = end;
            }
            if cx.p.delayed_ack && !had_hole {
                r.delack_pending += 1;
                if r.delack_pending < 2 {
                    immediate = false;
                    r.delack_ts = pkt.ts;
                    r.delack_gen = r.delack_gen.wrapping_add(1);
                    let gen = r.delack_gen;
                    let t = cx.now() + cx.p.delack_timeout;
                    cx.schedule(t, Ev::DelAck { flow: idx, gen });
                }
            }
        } else if seg > r.rcv_nxt {
            if r.ooo.contains(seg) {
                r.spurious += 1;
            } else {
                r.ooo.insert(seg, seg + 1);
            }
            if cx.p.sack {
                // The block of this segment goes first, then the most recently reported other blocks.
                let mut recent = [u64::MAX; MAX_BLOCKS];
                recent[0] = seg;
                let mut n = 1;
                let this = r.ooo.find(seg);
                for &q in &r.recent {
                    if n == MAX_BLOCKS {
                        break;
                    }
                    if q == u64::MAX || q < r.rcv_nxt {
                        continue;
                    }
                    let b = r.ooo.find(q);
                    if b != this && !recent[1..n].iter().any(|&x| r.ooo.find(x) == b) {
                        recent[n] = q;
                        n += 1;
                    }
                }
                r.recent = recent;
            }
        } else {
            r.spurious += 1;
        }
        if immediate {
            self.send_ack(idx, pkt.ts, cx);
        }
    }

    /// The delayed-ACK timer of generation `gen` fired.
    pub(crate) fn delack_fire(&mut self, idx: u32, gen: u32, cx: &mut Ctx<'_>) {
        if self.rcv.delack_gen == gen && self.rcv.delack_pending > 0 {
            let ts = self.rcv.delack_ts;
            self.send_ack(idx, ts, cx);
        }
    }

    /// Sends an ACK echoing `ts`, with SACK blocks when enabled.
    pub(crate) fn send_ack(&mut self, idx: u32, ts: u64, cx: &mut Ctx<'_>) {
        let key = self.qkey();
        let r = &mut self.rcv;
        r.delack_pending = 0;
        r.delack_gen = r.delack_gen.wrapping_add(1);
        let mut sack = SackOpt::NONE;
        if cx.p.sack && !r.ooo.is_empty() {
            for &q in &r.recent {
                if q != u64::MAX && q >= r.rcv_nxt {
                    if let Some((s, e)) = r.ooo.find(q) {
                        sack.push(r.rcv_nxt, s, e);
                    }
                }
            }
        }
        let pkt = Pkt {
            flow: idx,
            hop: 0,
            is_ack: true,
            class: self.snd.class,
            size: cx.p.ack_bytes as u32,
            seq: r.rcv_nxt,
            ts,
            sack,
        };
        let ch = self.info.route_ack[0];
        cx.inject(pkt, ch, key);
    }
}
