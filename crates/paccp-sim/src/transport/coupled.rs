//! Subflow groups of the subflow-as-flow multipath model: flows joined by `subflow_of` (config) form
//! one connection. This is the model the MPTCP BG/WC experiments run on until the connection layer
//! (one byte stream, subflow schedulers, a connection-level receive buffer) replaces it:
//!
//! - **Coupling**: a subflow's controller sees the windows of the other subflows of its group as
//!   [`crate::cc::CcCtx::peers`] when an ACK arrives (LIA, OLIA).
//! - **Shared budget**: when the group's first flow has a size, the connection has `ceil(size / MSS)`
//!   full data segments; a subflow takes the next one whenever its window has room (an ample send
//!   buffer and an unbounded receive buffer: no subflow scheduler choice and no head-of-line blocking
//!   are modelled). The connection completes when every data segment has been delivered once; then all
//!   its subflows finish at that instant (MPTCP's DATA_FIN closes them).
//! - **Reinjection** (as Linux MPTCP on a subflow's retransmission timeout): the data segments a
//!   timed-out subflow has not delivered go back to the budget for any subflow to carry; the subflow
//!   keeps retransmitting them at its own level, but they no longer count for the connection.
//! - **Stop** (`stop_ns`): the flow takes no new data from then on (a pooled group's budget is
//!   emptied); what is in flight is still delivered.
use super::{Ctx, Flow};
use crate::cc::{Controller, PeerWindow};

/// One connection's subflows and its shared budget.
#[derive(Debug)]
pub(crate) struct Group {
    /// Its flows, first (root) first.
    pub(crate) members: Vec<u32>,
    /// Data segments not yet taken by a subflow (only when `pooled`).
    pub(crate) unsent: u64,
    /// Data segments taken by a subflow and not yet delivered (only when `pooled`).
    pub(crate) outstanding: u64,
    /// The subflows share the root's size.
    pub(crate) pooled: bool,
    /// Every data segment was delivered (pooled) or the budget was stopped and drained.
    pub(crate) done: bool,
}

impl Group {
    /// A pooled group whose data are all delivered becomes done; true if it just did.
    fn settle(&mut self) -> bool {
        if self.pooled && !self.done && self.unsent == 0 && self.outstanding == 0 {
            self.done = true;
            return true;
        }
        false
    }
}

impl Flow {
    /// Whether segment `snd_nxt` may be sent as new data: within what the flow holds, or one more
    /// segment in its group's budget ([`Flow::take_segment`] takes it).
    #[inline]
    pub(crate) fn data_available(&self, cx: &Ctx<'_>) -> bool {
        let s = &self.snd;
        if s.snd_nxt < s.nsegs {
            return true;
        }
        match self.info.group {
            Some(g) => {
                let g = &cx.groups[g as usize];
                g.pooled && g.unsent > 0 && s.snd_nxt == s.nsegs
            }
            None => false,
        }
    }

    /// Takes segment `snd_nxt` from the group's budget if the flow does not hold it yet (after
    /// [`Flow::data_available`] said yes).
    #[inline]
    pub(crate) fn take_segment(&mut self, cx: &mut Ctx<'_>) {
        let s = &mut self.snd;
        if s.snd_nxt == s.nsegs {
            if let Some(g) = self.info.group {
                let g = &mut cx.groups[g as usize];
                g.unsent -= 1;
                g.outstanding += 1;
                s.nsegs += 1;
            }
        }
    }

    /// The cumulative ACK moved from `old_una` to `snd_una`: a pooled connection counts the data
    /// segments delivered (not the reinjected ones this subflow still carries).
    #[inline]
    pub(crate) fn count_delivered(&mut self, old_una: u64, cx: &mut Ctx<'_>) {
        let Some(gi) = self.info.group else {
            return;
        };
        let g = &mut cx.groups[gi as usize];
        if !g.pooled {
            return;
        }
        let from = old_una.max(self.info.reinjected_below);
        let n = self.snd.snd_una.saturating_sub(from);
        g.outstanding = g.outstanding.saturating_sub(n);
        if g.settle() {
            cx.woken.push(gi);
        }
    }

    /// A retransmission timeout: a pooled subflow's undelivered data segments go back to the budget.
    pub(crate) fn reinject(&mut self, cx: &mut Ctx<'_>) {
        let Some(gi) = self.info.group else {
            return;
        };
        let g = &mut cx.groups[gi as usize];
        if !g.pooled || g.done {
            return;
        }
        let s = &self.snd;
        let k = s
            .nsegs
            .saturating_sub(s.snd_una.max(self.info.reinjected_below));
        if k > 0 {
            g.outstanding -= k;
            g.unsent += k;
            self.info.reinjected_below = s.nsegs;
            cx.woken.push(gi);
        }
    }

    /// Everything the flow took is acknowledged and there is nothing more to take (a pooled subflow:
    /// its connection is complete).
    #[inline]
    pub(crate) fn all_acked(&self, cx: &Ctx<'_>) -> bool {
        match self.info.group {
            Some(g) if cx.groups[g as usize].pooled => cx.groups[g as usize].done,
            _ => self.snd.snd_una >= self.snd.nsegs,
        }
    }

    /// A pooled subflow whose connection is complete finishes now (at its start, or when woken).
    pub(crate) fn finish_if_drained(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        if self.info.group.is_some()
            && self.info.started
            && self.info.finished.is_none()
            && self.info.cbr_bps.is_none()
            && self.all_acked(cx)
        {
            self.info.finished = Some(cx.now());
            self.snd.rtt.rto_deadline = 0;
            cx.finish(idx);
        }
    }

    /// `stop_ns`: no new data from now on.
    pub(crate) fn stop(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        if self.info.finished.is_some() {
            return;
        }
        if let Some(gi) = self.info.group {
            let g = &mut cx.groups[gi as usize];
            g.unsent = 0;
            if g.pooled {
                if g.settle() {
                    cx.woken.push(gi);
                }
                return;
            }
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

    /// What its group's other subflows see of it.
    #[inline]
    pub(crate) fn peer_window(&self) -> PeerWindow {
        PeerWindow {
            cwnd: self.snd.win.cwnd,
            srtt_ns: self.snd.rtt.srtt(),
            loss_interval: self.snd.cc.loss_interval(),
        }
    }
}

/// Fills `out` with the windows of `flow`'s group peers (cleared when it has none).
#[inline]
pub(crate) fn collect_peers(
    flows: &[Flow],
    groups: &[Group],
    flow: u32,
    out: &mut Vec<PeerWindow>,
) {
    out.clear();
    if let Some(g) = flows[flow as usize].info.group {
        for &m in &groups[g as usize].members {
            if m != flow {
                out.push(flows[m as usize].peer_window());
            }
        }
    }
}
