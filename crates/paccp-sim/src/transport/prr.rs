//! Proportional Rate Reduction (RFC 6937) as Linux does it (`tcp_cwnd_reduction`), and the NewReno
//! recovery built on it (Linux's `tcp_add_reno_sack` / `tcp_remove_reno_sacks` / `tcp_newreno_mark_lost`).
//!
//! During a recovery the sender may have at most `cwnd` segments in the pipe, where on every ACK that
//! delivered data `cwnd = pipe + sndcnt` and
//! - while `pipe > ssthresh`: `sndcnt = ceil(prr_delivered * ssthresh / RecoverFS) - prr_out`
//!   (proportional: about `ssthresh / RecoverFS` segments sent per segment delivered);
//! - else (slow-start reduction bound, PRR-SSRB): `sndcnt = min(ssthresh - pipe,
//!   max(prr_delivered - prr_out, delivered) [+ 1 if snd_una advanced and no new loss was marked])`;
//! - the first ACK of a recovery may always send one segment (the fast retransmission).
//!
//! `RecoverFS` is the window before the decrease (Linux's `prior_cwnd`). An ACK that delivers nothing
//! leaves `cwnd` unchanged. At the end of the recovery `cwnd = ssthresh` (Linux, ns-3), which PRR has
//! already brought the pipe to, so there is no burst.
//!
//! NewReno (no SACK) counts every duplicate ACK as one delivered segment ("reno SACK", [`RenoSacks`]),
//! at most the outstanding segments but one; a partial ACK delivers `max(1, newly - dupACKed)`
//! segments, removes `newly - 1` counted duplicates and marks the new first unacknowledged segment
//! lost; the pipe is the outstanding segments, minus the duplicate-ACKed ones, minus a lost head not
//! yet retransmitted.
//! Outside recovery the duplicate-ACKed segments do not count in flight either, which is RFC 3042's
//! limited transmit as Linux does it. Used by the NewReno sender (`sack` false) when `prr` is on.
//!
//! Two departures from Linux, each where Linux waits for its retransmission timer (200 ms at least)
//! with no ACK left to come (issue 31: one of four long-lived flows acknowledged 0.19 MB in 200 ms):
//! - a partial ACK that answers the sender's newest transmission retransmits the new first
//!   unacknowledged segment even when `sndcnt` is 0 ([`Prr::allow_one`]). The pipe of a NewReno
//!   sender counts every segment lost with the first one, so after a burst of losses the recovery
//!   stays in the proportional phase, which sends about `ssthresh / RecoverFS` segments per segment
//!   delivered: the ACK clock thins to the partial ACKs' retransmissions alone, and one held back
//!   leaves nothing in flight;
//! - a lost retransmission of the first unacknowledged segment is found by the send times the
//!   duplicate ACKs echo ([`RenoSacks::head_rtx_lost`]): a segment sent after it arrived, it did not.

/// PRR state of one recovery.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prr {
    /// Segments delivered to the receiver since the recovery began (`prr_delivered`).
    pub(crate) delivered: u64,
    /// Segments sent since the recovery began (`prr_out`).
    pub(crate) out: u64,
    /// The window before the decrease (RFC 6937 `RecoverFS`, Linux `prior_cwnd`), at least 1.
    pub(crate) recover_fs: f64,
    /// The recovery's current window: the sender sends while its pipe is below it.
    pub(crate) cwnd: u64,
}

impl Prr {
    /// A new recovery from a window of `prior_cwnd` segments.
    pub(crate) fn start(prior_cwnd: f64) -> Prr {
        Prr {
            delivered: 0,
            out: 0,
            recover_fs: prior_cwnd.max(1.0),
            cwnd: 0,
        }
    }

    /// One ACK during the recovery: `delivered` segments newly delivered (cumulatively or selectively
    /// acknowledged), `pipe` segments in flight, `ssthresh` the target window; `una_advanced_no_loss`:
    /// the ACK advanced `snd_una` and marked no new segment lost. Sets the recovery's window.
    pub(crate) fn on_ack(
        &mut self,
        delivered: u64,
        pipe: u64,
        ssthresh: f64,
        una_advanced_no_loss: bool,
    ) {
        if delivered == 0 {
            return;
        }
        self.delivered += delivered;
        let ss = ssthresh.max(1.0);
        let out = self.out as i64;
        let sndcnt = if pipe as f64 > ss {
            (self.delivered as f64 * ss / self.recover_fs).ceil() as i64 - out
        } else {
            let mut limit = (self.delivered as i64 - out).max(delivered as i64);
            if una_advanced_no_loss {
                limit += 1;
            }
            limit.min((ss - pipe as f64).floor() as i64)
        };
        let sndcnt = sndcnt.max(i64::from(self.out == 0));
        self.cwnd = pipe + sndcnt.max(0) as u64;
    }

    /// Lets one more segment go with `pipe` segments in flight, whatever `sndcnt` said (counted in
    /// `out` when sent, so the proportional phase takes it back from later ACKs).
    pub(crate) fn allow_one(&mut self, pipe: u64) {
        self.cwnd = self.cwnd.max(pipe + 1);
    }

    /// Whether one more segment may be sent with `pipe` segments in flight.
    #[inline]
    pub(crate) fn may_send(&self, pipe: u64) -> bool {
        pipe < self.cwnd
    }
}

/// NewReno's duplicate-ACK bookkeeping: ns-3's emulated SACK for connections without SACK
/// (ns-3.44 `TcpTxBuffer::AddRenoSack`, `DiscardUpTo`, `MarkHeadAsLost`, `IsLost`, `NextSeg`; Linux's
/// `tcp_add_reno_sack` counts alike).
///
/// - Every duplicate ACK marks the lowest unmarked segment above the first unacknowledged one as
///   delivered (at most the outstanding segments but one), so the marks are always the `dup` segments
///   right after it: a count.
/// - A cumulative ACK removes the marks it covers. If the new first unacknowledged segment carried a
///   mark (it cannot have been delivered, or the ACK would cover it), the mark moves to the next
///   unmarked segment and the first segment is presumed lost: it is retransmitted as soon as the
///   window allows, in a recovery or not. The marks survive the end of a recovery (Linux clears them
///   there, ns-3 only at a timeout): a segment sent during a recovery and lost, which no third
///   duplicate ACK can reveal any more, is repaired at once instead of by the timer.
/// - Not taken from ns-3: there a duplicate ACK finding the first segment presumed lost starts a
///   recovery at once (RFC 6675 step (2), `IsLost(HighACK + 1)`, whatever the duplicate-ACK count). In
///   the behaviour tests' testbed run that made 49 of the MRG flow's 52 recoveries, each followed by a
///   window of spurious partial-ACK retransmissions (1448 in 200 ms); without it the cross-check
///   figures are the same.
///
/// ns-3 has no way out of a wrong guess: while the ACKs advance one segment at a time, each moves the
/// marks up and retransmits the next segment, and the duplicate ACKs these spurious copies cause add
/// marks (and, through `IsLost`, start recoveries). The engine ends it as Eifel (RFC 3522) does with timestamps: a
/// cumulative ACK covering such a retransmission but echoing an earlier send time was caused by the
/// original, so the retransmission was spurious and every mark is dropped; the duplicate ACK that
/// spurious copy causes later (it echoes the copy's send time) is ignored. Without this, the behaviour
/// tests' PACCP runs lost a third of their throughput to thousands of spurious retransmissions; ns-3
/// has no such check (see docs/explanation/fidelity.md). An ACK of new data sent at the same
/// instant as the spurious copy carries the same echo and is ignored too.
#[derive(Debug, Clone, Default)]
pub(crate) struct RenoSacks {
    /// Duplicate ACKs counted as delivered segments (Linux `sacked_out`, ns-3 `m_sackedOut`).
    pub(crate) dup: u64,
    /// The first unacknowledged segment is marked lost and not yet retransmitted.
    pub(crate) head_lost: bool,
    /// The last retransmission of a presumed-lost first segment outside a recovery: its send time (0 =
    /// none pending) and segment.
    pub(crate) rtx_at: u64,
    pub(crate) rtx_seg: u64,
    /// The send time of the last such retransmission found spurious (0 = none).
    pub(crate) spurious_at: u64,
    /// The send time of the sender's newest transmission and the segments sent at that instant (see
    /// [`Self::acks_newest`]).
    pub(crate) last_tx_at: u64,
    pub(crate) last_tx_n: u32,
    /// In a recovery: the send time of the pending retransmission of the first unacknowledged
    /// segment (0 = none; see [`Self::head_rtx_lost`]).
    pub(crate) head_rtx_at: u64,
}

impl RenoSacks {
    /// A duplicate ACK with `outstanding` segments unacknowledged: the segments it delivered (0 or 1).
    pub(crate) fn on_dupack(&mut self, outstanding: u64) -> u64 {
        let holes = 1; // at least the first unacknowledged segment is missing
        if self.dup + holes < outstanding {
            self.dup += 1;
            1
        } else {
            0
        }
    }

    /// A cumulative ACK of `newly` segments leaving `outstanding` unacknowledged: the segments it
    /// delivered (at least 1). Moves the marks (see the type) and sets whether the new first
    /// unacknowledged segment is presumed lost.
    pub(crate) fn on_cum_ack(&mut self, newly: u64, outstanding: u64) -> u64 {
        let delivered = newly.saturating_sub(self.dup).max(1);
        let moved = newly <= self.dup && outstanding > 0;
        self.dup = self
            .dup
            .saturating_sub(newly.saturating_sub(1))
            .min(outstanding.saturating_sub(1));
        self.head_lost = moved;
        delivered
    }

    /// Records a retransmission of the presumed-lost first segment `seg` at `now` outside a recovery.
    pub(crate) fn note_rtx(&mut self, now: u64, seg: u64) {
        self.rtx_at = now;
        self.rtx_seg = seg;
    }

    /// A cumulative ACK up to `ack` echoing send time `ts` (before [`Self::on_cum_ack`]): if it covers
    /// the recorded retransmission but echoes an earlier send, the original arrived and the
    /// retransmission was spurious (Eifel, RFC 3522): the marks were wrong and are cleared.
    pub(crate) fn check_rtx(&mut self, ts: u64, ack: u64) {
        if self.rtx_at != 0 && self.rtx_seg < ack {
            if ts < self.rtx_at {
                self.spurious_at = self.rtx_at;
                self.dup = 0;
                self.head_lost = false;
            }
            self.rtx_at = 0;
        }
    }

    /// Whether a duplicate ACK echoing `ts` answers the retransmission found spurious.
    pub(crate) fn spurious_dupack(&self, ts: u64) -> bool {
        self.spurious_at != 0 && ts == self.spurious_at
    }

    /// A segment sent at `now`.
    pub(crate) fn note_tx(&mut self, now: u64) {
        if now == self.last_tx_at {
            self.last_tx_n = self.last_tx_n.saturating_add(1);
        } else {
            self.last_tx_at = now;
            self.last_tx_n = 1;
        }
    }

    /// Whether an ACK echoing send time `ts` answers the sender's newest transmission, the only
    /// segment sent at its instant (the echo cannot tell segments sent at one instant apart). Paths
    /// deliver a flow's segments in order, so every segment sent before it and neither acknowledged
    /// nor duplicate-ACKed is lost, whatever the pipe still counts: no later ACK will come.
    pub(crate) fn acks_newest(&self, ts: u64) -> bool {
        ts == self.last_tx_at && self.last_tx_n == 1
    }

    /// Records a retransmission of the first unacknowledged segment at `now` in a recovery.
    pub(crate) fn note_head_rtx(&mut self, now: u64) {
        self.head_rtx_at = now;
    }

    /// A duplicate ACK in a recovery echoing send time `ts`: if a segment sent after the pending
    /// retransmission of the first unacknowledged segment has arrived (the receiver echoes the send
    /// time of the segment that triggered the ACK) while the retransmission has not, the
    /// retransmission is lost (in-order paths, as RACK reasons with SACK); the head is marked lost
    /// again, to be retransmitted within PRR's window. Returns whether it was.
    pub(crate) fn head_rtx_lost(&mut self, ts: u64) -> bool {
        if self.head_rtx_at != 0 && ts > self.head_rtx_at && !self.head_lost {
            self.head_lost = true;
            self.head_rtx_at = 0;
            return true;
        }
        false
    }

    /// The pipe of a NewReno sender with `outstanding` segments unacknowledged.
    pub(crate) fn pipe(&self, outstanding: u64) -> u64 {
        outstanding.saturating_sub(self.dup + u64::from(self.head_lost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proportional_phase_sends_about_half_of_what_is_delivered() {
        // Reno: RecoverFS 100, ssthresh 50; 40 segments delivered while the pipe stays above ssthresh.
        let mut p = Prr::start(100.0);
        let mut sent = 0;
        let mut pipe = 99; // one segment lost, 99 in flight
        for k in 0..40 {
            pipe -= 1; // one delivered
            p.on_ack(1, pipe, 50.0, false);
            while p.may_send(pipe) {
                pipe += 1;
                p.out += 1;
                sent += 1;
            }
            assert_eq!(sent, (k + 1u64).div_ceil(2), "after {} deliveries", k + 1);
        }
        assert_eq!(sent, 20);
    }

    #[test]
    fn first_ack_may_always_send_the_fast_retransmission() {
        let mut p = Prr::start(10.0);
        p.on_ack(1, 9, 5.0, false);
        assert!(p.may_send(9));
        assert!(!p.may_send(10));
    }

    #[test]
    fn slow_start_reduction_bound_refills_to_ssthresh_at_most() {
        // The pipe fell far below ssthresh (many losses): sending grows like slow start, never above it.
        let mut p = Prr::start(20.0);
        p.out = 1;
        p.delivered = 0;
        p.on_ack(3, 2, 10.0, false);
        assert_eq!(p.cwnd, 2 + 3);
        p.on_ack(30, 2, 10.0, true);
        assert_eq!(p.cwnd, 10);
    }

    #[test]
    fn reno_sacks_count_dupacks_and_remove_them_on_a_partial_ack() {
        let mut r = RenoSacks::default();
        for _ in 0..5 {
            assert_eq!(r.on_dupack(10), 1);
        }
        assert_eq!(r.pipe(10), 5);
        // A partial ACK of 3 segments: 1 hole + 2 counted duplicates.
        assert_eq!(r.on_cum_ack(3, 7), 1);
        assert_eq!(r.dup, 3);
        // The new first unacknowledged segment carried a mark: the mark moves, the segment is lost.
        assert!(r.head_lost);
        assert_eq!(r.pipe(7), 3);
        // An ACK covering every mark and the segment after them clears them all.
        assert_eq!(r.on_cum_ack(4, 3), 1);
        assert_eq!(r.dup, 0);
        assert!(!r.head_lost);
    }

    #[test]
    fn eifel_check_drops_the_marks_after_a_spurious_head_retransmission() {
        let mut r = RenoSacks {
            dup: 2,
            ..RenoSacks::default()
        };
        // The ACK ending a recovery uncovers a marked segment 10: presumed lost, retransmitted at t=500.
        r.on_cum_ack(1, 20);
        assert!(r.head_lost);
        r.head_lost = false;
        r.note_rtx(500, 10);
        // The ACK of the retransmission itself (echo 500) keeps the marks and moves them on.
        let mut genuine = r.clone();
        genuine.check_rtx(500, 11);
        assert_eq!(genuine.on_cum_ack(1, 19), 1);
        assert!(genuine.head_lost && genuine.dup == 2);
        assert!(!genuine.spurious_dupack(500));
        // The ACK of the original (echo 300 < 500): spurious, every mark goes, nothing presumed lost.
        r.check_rtx(300, 11);
        r.on_cum_ack(1, 19);
        assert!(!r.head_lost && r.dup == 0);
        // The duplicate ACK the spurious copy causes later is recognised by its echo.
        assert!(r.spurious_dupack(500) && !r.spurious_dupack(501));
        // Never more than outstanding - 1.
        let mut r = RenoSacks::default();
        let got: u64 = (0..10).map(|_| r.on_dupack(4)).sum();
        assert_eq!(got, 3);
    }
}
