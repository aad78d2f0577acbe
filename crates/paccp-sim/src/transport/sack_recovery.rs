//! SACK loss recovery (RFC 6675 in segment units): IsLost, SetPipe, NextSeg, the recovery entry and
//! lost-retransmission detection. The scoreboard itself is [`crate::sack`].
//!
//! With `transport.rack` (off by default), in a recovery an original segment is lost as Linux's RACK
//! decides it there (`tcp_rack_advance`, `tcp_rack_detect_loss`, with the reordering window
//! `tcp_rack_reo_wnd` gives in recovery when no reordering was seen: 0): once a segment sent after it
//! has arrived. A flow's packets keep their order, so that is exact: (1) an unSACKed segment below a
//! SACKed one (IsLost with one SACKed segment above instead of RFC 6675's `dupack_threshold`; the
//! recovery is still entered on `dupack_threshold`); (2) the unSACKed segments above the highest SACKed one, which IsLost never
//! marks (nothing is sent above a flow's last segments, and the recovery ended in a retransmission
//! timeout where Linux, and ns-3 by resending the first unacknowledged segment at every partial
//! ACK, repair them): the segment that triggered an ACK was sent at the time the ACK echoes, and what
//! the engine knows of the sending order are its retransmissions ([`Sender::rtx_marks`], each sent
//! after every original segment below the `snd_nxt` it records), so the original segments below that
//! `snd_nxt` of the last retransmission sent before the echoed time (or at it, if that retransmission
//! has arrived: Linux's timestamp check of a retransmitted segment) are lost
//! ([`Sender::rack_lost`]). Lost retransmissions are detected by the older rule below; delayed and
//! processing-delayed ACKs echo an earlier segment, which only delays (2).
use super::{Ctx, Flow, Sender};
use crate::cc::Controller;

impl Sender {
    /// RFC 6675 IsLost in segments: an unSACKed segment is lost iff at least `dupthresh` SACKed
    /// segments lie above it, i.e. iff it is below the `dupthresh`-th highest SACKed segment (returned;
    /// `snd_una` if fewer are SACKed).
    /// With `rack` (`transport.rack`), in a recovery (see the module): below the highest SACKed
    /// segment and below [`Sender::rack_lost`].
    pub(crate) fn sack_lost_below(&self, dupthresh: u32, rack: bool) -> u64 {
        let k = if rack && self.in_recovery {
            1
        } else {
            dupthresh as u64
        };
        self.sacked
            .kth_largest(k)
            .unwrap_or(0)
            .max(self.rack_lost)
            .max(self.snd_una)
    }

    /// RFC 6675 SetPipe over `[snd_una, snd_nxt)`: every unSACKed segment not presumed lost counts
    /// once, and once more if it was retransmitted in this recovery (below `rtx_ptr`).
    /// A retransmission found lost (in `relost`) counts as not in the network.
    pub(crate) fn sack_pipe(&self, lost_below: u64) -> u64 {
        let (una, nxt) = (self.snd_una, self.snd_nxt);
        let unsacked = |x: u64| {
            let x = x.clamp(una, nxt);
            (x - una) - self.sacked.count_below(x)
        };
        (unsacked(nxt) - unsacked(lost_below) + unsacked(self.rtx_ptr))
            .saturating_sub(self.relost.len() as u64)
    }

    /// Loss detection at an ACK of a recovery echoing the send time `echo` (ps): with `rack`, RACK for
    /// the original segments (see the module), then lost-retransmission detection (like Linux's pre-RACK
    /// `tcp_mark_lost_retrans`): a retransmission sent when `snd_nxt` was N is lost once
    /// `dupack_threshold` segments at or above N (sent after it) are SACKed while it is still missing;
    /// it is then queued to be sent again.
    pub(crate) fn sack_detect_lost_rtx(&mut self, dupthresh: u32, echo: u64, rack: bool) {
        if rack {
            let (una, sacked) = (self.snd_una, &self.sacked);
            // The marks are in sending order: their times and `snd_nxt`s never decrease.
            let k = self.rtx_marks.partition_point(|m| m.2 < echo);
            let mut lost = k.checked_sub(1).map_or(0, |i| self.rtx_marks[i].1);
            for &(h, n, _) in self.rtx_marks.range(k..).take_while(|m| m.2 == echo) {
                if h < una || sacked.contains(h) {
                    lost = n;
                }
            }
            self.rack_lost = self.rack_lost.max(lost);
        }
        let all = self.sacked.count_below(u64::MAX);
        let (una, sacked) = (self.snd_una, &self.sacked);
        self.relost.retain(|&h| h >= una && !sacked.contains(h));
        while let Some(&(h, n, _)) = self.rtx_marks.front() {
            if h < self.snd_una || self.sacked.contains(h) {
                self.rtx_marks.pop_front();
            } else if all - self.sacked.count_below(n) >= dupthresh as u64 {
                self.rtx_marks.pop_front();
                self.relost.push_back(h);
            } else {
                break;
            }
        }
    }
}

impl Flow {
    /// SACK recovery (RFC 6675 NextSeg): while the pipe is below cwnd, send (1) the lowest lost hole not
    /// yet retransmitted, else (2) new data, else (3) the lowest unSACKed hole not yet retransmitted
    /// below the highest SACKed segment. No rescue retransmission (rule 4).
    pub(crate) fn try_send_sack_recovery(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let (dupthresh, rack) = (cx.p.dupthresh, cx.p.rack);
        loop {
            let s = &self.snd;
            let wnd = s.win.cwnd.floor().max(1.0) as u64;
            let lost_below = s.sack_lost_below(dupthresh, rack);
            if s.sack_pipe(lost_below) >= wnd {
                break;
            }
            let high = s.sacked.end().unwrap_or(0).min(s.snd_nxt);
            let h = s.sacked.next_gap(s.rtx_ptr.max(s.snd_una));
            let again = s.relost.front().copied();
            let rtx = if again.is_some() {
                again
            } else if h < lost_below || (s.snd_nxt >= s.nsegs && h < high) {
                Some(h)
            } else if s.snd_nxt < s.nsegs && s.snd_nxt - s.snd_una < s.host_wnd {
                None
            } else {
                break;
            };
            if !self.nic_room(idx, cx) {
                break;
            }
            let s = &mut self.snd;
            match rtx {
                Some(h) => {
                    if again.is_some() {
                        s.relost.pop_front();
                    } else {
                        s.rtx_ptr = h + 1;
                    }
                    s.rtx_marks.push_back((h, s.snd_nxt, cx.now()));
                    self.send_segment(idx, h, cx);
                }
                None => {
                    let seg = s.snd_nxt;
                    s.snd_nxt += 1;
                    self.send_segment(idx, seg, cx);
                }
            }
        }
    }

    /// RFC 6675 section 5: start a recovery on `dupack_threshold` duplicate ACKs or when the scoreboard
    /// shows the first unacknowledged segment lost, unless still within the last recovery (or RTO)
    /// window.
    pub(crate) fn sack_should_recover(&self, dupthresh: u32) -> bool {
        let s = &self.snd;
        !s.in_recovery
            && s.snd_una >= s.recover
            && s.snd_nxt > s.snd_una
            && (s.dupacks >= dupthresh || s.sack_lost_below(dupthresh, false) > s.snd_una)
    }

    /// Enters SACK recovery (RFC 6675 section 5): window decrease, retransmit `snd_una` at once.
    pub(crate) fn enter_sack_recovery(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let ctx = self.cc_ctx(cx.now(), cx.p.mss);
        let s = &mut self.snd;
        s.cc.on_loss(&mut s.win, &ctx);
        s.recover = s.high_tx;
        s.in_recovery = true;
        let u = s.snd_una;
        s.rtx_ptr = u + 1;
        s.rtx_marks.clear();
        s.relost.clear();
        s.rack_lost = 0;
        s.rtx_marks.push_back((u, s.snd_nxt, cx.now()));
        self.send_segment(idx, u, cx);
        self.arm_rto(idx, cx);
        self.try_send(idx, cx);
    }
}
