//! The optional TCP three-way handshake (`transport.handshake`; absent = none, every flow sends its
//! data at its start as before).
//!
//! With it a TCP flow's sender starts by sending a SYN (`syn_bytes` on the wire) along the data route;
//! the receiver answers every SYN it gets with a SYN-ACK (`syn_bytes` too) along the ACK route, echoing
//! the SYN's send time; when the first SYN-ACK reaches the sender the connection is established: it
//! takes the handshake's RTT sample (srtt, rttvar and the RTO, as ns-3 with timestamps and Linux do),
//! sends the third ACK (a pure ACK, `ack_bytes`, on the data route, ahead of its first data segment, as
//! ns-3 and Linux send it) and starts sending data. SYN, SYN-ACK and third ACK go through the same
//! channels and queues as every packet and may be dropped there.
//!
//! A lost SYN or SYN-ACK: the sender retransmits the SYN `connect_timeout` after the first one, then
//! doubles the wait before each further retransmission (capped at the larger of `max_rto` and
//! `connect_timeout`), as Linux (initial 1 s, `tcp_syn_retries` 6) and ns-3 (`ConnTimeout` 3 s,
//! `ConnCount` 6 SYNs in all = 5 retransmissions) do; after `syn_retries` unanswered retransmissions
//! it gives up (the flow never finishes). The receiver has no SYN-ACK timer of its own: the retransmitted
//! SYN makes it answer again (ns-3's and Linux's servers also retransmit the SYN-ACK on their own timer,
//! which fires about when the retransmitted SYN arrives). SYN timeouts are not counted in `timeouts`
//! (ns-3 counts loss-state entries, which a connecting socket never makes). The third ACK is never
//! retransmitted: the receiver needs nothing from it (ns-3's and Linux's servers take the first data
//! segment as its replacement). Not modelled: Linux's window of one segment after more than one
//! SYN / SYN-ACK retransmission, RFC 6298's 3 s RTO after a SYN timeout.
//!
//! Handshake packets are control packets: `is_ack` set (no payload; channels count their drops in
//! `drops_ack`), told apart by a sequence number no data or ACK reaches ([`SYN`], [`SYN_ACK`],
//! [`HS_ACK`]); [`Flow::on_ack`] hands them here. Subflows of a multipath connection and
//! constant-bit-rate flows start without a handshake.
//!
//! The flow's `start_ns` is its SYN; the output's `handshake.established_ns` is when the SYN-ACK
//! arrived, the data's start: a flow completion time from the establishment (ns-3's, in its finite
//! cross-check scenario) is `finish_ns - established_ns`, one from the start (what an application
//! timing `connect` + `send` sees) `finish_ns - start_ns`.
use super::{Ctx, Flow, Params as TParams};
use crate::config::HandshakeCfg;
use crate::error::{EngineError, Result};
use crate::event::Ev;
use crate::net::Pkt;
use crate::sack::SackOpt;
use crate::units::Ps;
use serde_json::{json, Value};

/// The sequence number of a SYN (sender to receiver).
pub(crate) const SYN: u64 = u64::MAX;
/// The sequence number of a SYN-ACK (receiver to sender).
pub(crate) const SYN_ACK: u64 = u64::MAX - 1;
/// The sequence number of the third ACK (sender to receiver).
pub(crate) const HS_ACK: u64 = u64::MAX - 2;

/// Handshake parameters (times in ps), checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) syn_bytes: u16,
    pub(crate) connect_timeout: u64,
    pub(crate) syn_retries: u32,
}

/// The handshake parameters of `transport.handshake` (None: no handshake); errors name the field.
pub(crate) fn params(cfg: Option<&HandshakeCfg>) -> Result<Option<Params>> {
    let Some(c) = cfg else { return Ok(None) };
    let f = "transport.handshake";
    let syn_ok = (1..=u16::MAX as u64).contains(&c.syn_bytes);
    EngineError::require(syn_ok, format!("{f}.syn_bytes"), "must be in 1..=65535")?;
    let timeout_ok = c.connect_timeout_ns > 0;
    EngineError::require(timeout_ok, format!("{f}.connect_timeout_ns"), "must be > 0")?;
    EngineError::require(
        c.syn_retries <= 30,
        format!("{f}.syn_retries"),
        "must be <= 30",
    )?;
    Ok(Some(Params {
        syn_bytes: c.syn_bytes as u16,
        connect_timeout: Ps::from_ns(c.connect_timeout_ns).0,
        syn_retries: c.syn_retries,
    }))
}

/// A sender's handshake state.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hs {
    /// Data may flow (established, or no handshake).
    pub(crate) open: bool,
    /// SYNs sent (the first one included).
    pub(crate) syns: u32,
    /// Gave up after `syn_retries` retransmissions.
    pub(crate) failed: bool,
    /// When the SYN-ACK arrived (ps).
    pub(crate) established: Option<u64>,
}

impl Hs {
    /// The state of a new flow: open at once without a handshake.
    pub(crate) fn new(handshake: bool) -> Hs {
        Hs {
            open: !handshake,
            ..Hs::default()
        }
    }
}

impl Flow {
    /// Called by `try_send` while the connection is not open: sends the first SYN (once).
    pub(crate) fn hs_start(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        if self.snd.hs.syns == 0 && self.info.finished.is_none() {
            self.send_syn(idx, cx);
        }
    }

    /// Sends a SYN and arms the connect timer (doubled per retransmission).
    fn send_syn(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let Some(hp) = cx.p.hs else { return };
        let tries = self.snd.hs.syns;
        self.snd.hs.syns += 1;
        let wait = hp
            .connect_timeout
            .saturating_mul(1u64 << tries.min(40))
            .min(cx.p.max_rto.max(hp.connect_timeout));
        self.send_control(idx, SYN, hp.syn_bytes, cx.now(), true, cx);
        let r = &mut self.snd.rtt;
        let d = cx.now() + wait;
        r.rto_deadline = d;
        if r.rto_event_at == 0 || r.rto_event_at > d {
            r.rto_event_at = d;
            cx.schedule(d, Ev::Rto { flow: idx });
        }
    }

    /// A handshake packet (`on_data` route: SYN, third ACK; ACK route: SYN-ACK) of `size` bytes
    /// echoing `ts`.
    fn send_control(
        &mut self,
        idx: u32,
        seq: u64,
        size: u16,
        ts: u64,
        fwd: bool,
        cx: &mut Ctx<'_>,
    ) {
        let key = self.qkey();
        let route = if fwd {
            self.info.route_data
        } else {
            self.info.route_ack
        };
        let pkt = Pkt {
            flow: idx,
            pos: route,
            is_ack: true,
            class: self.snd.class,
            size,
            seq,
            ts,
            sack: SackOpt::NONE,
            ce: false,
        };
        let ch = cx.routes[route as usize];
        cx.inject(pkt, ch, key);
    }

    /// The connect timer expired before the SYN-ACK: the next SYN, or give up.
    pub(crate) fn syn_timeout(&mut self, idx: u32, cx: &mut Ctx<'_>) {
        let Some(hp) = cx.p.hs else { return };
        self.snd.rtt.rto_deadline = 0;
        if self.snd.hs.syns > hp.syn_retries {
            self.snd.hs.failed = true;
            return;
        }
        self.send_syn(idx, cx);
    }

    /// A handshake packet reached its end: the receiver answers a SYN, the sender opens on the first
    /// SYN-ACK; the third ACK needs nothing.
    pub(crate) fn on_handshake(&mut self, idx: u32, pkt: Pkt, cx: &mut Ctx<'_>) {
        let Some(hp) = cx.p.hs else { return };
        match pkt.seq {
            SYN => self.send_control(idx, SYN_ACK, hp.syn_bytes, pkt.ts, false, cx),
            SYN_ACK if !self.snd.hs.open && !self.snd.hs.failed => {
                let now = cx.now();
                let s = &mut self.snd;
                s.hs.open = true;
                s.hs.established = Some(now);
                s.rtt.rto_deadline = 0;
                s.rtt
                    .sample((now - pkt.ts) as f64 / 1000.0, cx.p.min_rto, cx.p.max_rto);
                self.send_control(idx, HS_ACK, cx.p.ack_bytes as u16, now, true, cx);
                self.try_send(idx, cx);
            }
            _ => {}
        }
    }
}

/// The output's `handshake` object (with `transport.handshake` only): per flow, in the flows' order,
/// when it was established (ns; null if never, or for a flow without a handshake) and its SYNs.
pub(crate) fn output(flows: &[Flow], p: &TParams) -> Option<Value> {
    p.hs?;
    Some(json!({
        "established_ns": flows.iter().map(|f| f.snd.hs.established.map(|t| t / Ps::PER_NS)).collect::<Vec<_>>(),
        "syns": flows.iter().map(|f| f.snd.hs.syns).collect::<Vec<_>>(),
    }))
}
