//! Subflow groups of the subflow-as-flow multipath model: flows joined by `subflow_of` (config) form
//! one connection. This is the model the MPTCP BG/WC experiments run on until the connection layer
//! (one byte stream, subflow schedulers, a connection-level receive buffer) replaces it:
//!
//! - **Coupling**: a subflow's controller sees the windows of the other subflows of its group as
//!   [`crate::cc::CcCtx::peers`] when an ACK arrives (LIA, OLIA).
//! - **Shared budget**: when the group's first flow has a size, its subflows draw segments one at a
//!   time from the group's budget of `ceil(size / MSS)` full segments whenever their window has room
//!   (an ample send buffer and an unbounded receive buffer: no scheduler choice and no
//!   head-of-line blocking are modelled). A subflow finishes when the budget is empty and everything
//!   it took is acknowledged; the connection finishes with its last subflow.
//! - **Stop** (`stop_ns`): the flow takes no new data from then on (a pooled group's budget is
//!   emptied); what is in flight is still delivered.
use super::{Ctx, Flow};
use crate::cc::{Controller, PeerWindow};

/// One connection's subflows and its shared budget.
#[derive(Debug)]
pub(crate) struct Group {
    /// Its flows, first (root) first.
    pub(crate) members: Vec<u32>,
    /// Segments not yet taken by a subflow (only when `pooled`).
    pub(crate) unsent: u64,
    /// The subflows share the root's size.
    pub(crate) pooled: bool,
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
                s.nsegs += 1;
            }
        }
    }

    /// Everything the flow took is acknowledged and there is nothing more to take.
    #[inline]
    pub(crate) fn all_acked(&self, cx: &Ctx<'_>) -> bool {
        self.snd.snd_una >= self.snd.nsegs
            && match self.info.group {
                Some(g) => {
                    let g = &cx.groups[g as usize];
                    !g.pooled || g.unsent == 0
                }
                None => true,
            }
    }

    /// A pooled subflow with nothing in flight whose group budget ran dry finishes now.
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
        if let Some(g) = self.info.group {
            cx.groups[g as usize].unsent = 0;
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
