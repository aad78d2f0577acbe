//! SACK loss recovery (RFC 6675 in segment units): IsLost, SetPipe, NextSeg, the recovery entry and
//! lost-retransmission detection. The scoreboard itself is [`crate::sack`].
use super::{Ctx, Flow, Sender};
use crate::cc::Controller;

impl Sender {
    /// RFC 6675 IsLost in segments: an unSACKed segment is lost iff at least `dupthresh` SACKed
    /// segments lie above it, i.e. iff it is below the `dupthresh`-th highest SACKed segment (returned;
    /// `snd_una` if fewer are SACKed).
    pub(crate) fn sack_lost_below(&self, dupthresh: u32) -> u64 {
        self.sacked
            .kth_largest(dupthresh as u64)
            .map_or(self.snd_una, |q| q.max(self.snd_una))
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

    /// Lost-retransmission detection (like Linux's pre-RACK `tcp_mark_lost_retrans`): a retransmission
    /// sent when `snd_nxt` was N is lost once `dupack_threshold` segments at or above N (sent after it)
    /// are SACKed while it is still missing; it is then queued to be sent again.
    pub(crate) fn sack_detect_lost_rtx(&mut self, dupthresh: u32) {
        let all = self.sacked.count_below(u64::MAX);
        let (una, sacked) = (self.snd_una, &self.sacked);
        self.relost.retain(|&h| h >= una && !sacked.contains(h));
        while let Some(&(h, n)) = self.rtx_marks.front() {
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
        let dupthresh = cx.p.dupthresh;
        loop {
            let s = &self.snd;
            let wnd = s.win.cwnd.floor().max(1.0) as u64;
            let lost_below = s.sack_lost_below(dupthresh);
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
            } else if s.snd_nxt < s.nsegs {
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
                    s.rtx_marks.push_back((h, s.snd_nxt));
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
            && (s.dupacks >= dupthresh || s.sack_lost_below(dupthresh) > s.snd_una)
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
        s.rtx_marks.push_back((u, s.snd_nxt));
        self.send_segment(idx, u, cx);
        self.arm_rto(idx, cx);
        self.try_send(idx, cx);
    }
}
