//! Connections in the simulation ([`crate::transport::conn`]): building them from the scenario's
//! `connections` (checks, subflow delay lines), and the hooks the event handlers call after a
//! subflow's events (data handed out after ACKs, starts, timeouts and NIC room; data delivered to the
//! reorder buffer; the connection's completion finishing its subflows).
use super::Simulation;
use crate::cc::PeerWindow;
use crate::config::{ConnCfg, FlowCfg, SubflowCfg};
use crate::error::{EngineError, Result};
use crate::event::Ev;
use crate::net::channel::Channel;
use crate::net::ROUTE_END;
use crate::transport::conn::{peer_window, ConnSpec, Connection, RcvBuf, MAX_SUBFLOWS};
use crate::transport::{Ctx, Flow};
use crate::units::{Bps, Ps};
use crate::Registry;

/// Rate of a delay line: serialisation is negligible (12 ps for 1,500 bytes), only the delay counts.
const DELAY_LINE_BPS: u64 = 1_000_000_000_000_000;

/// A subflow's extra one-way delay (netem-like): a channel of unbounded buffer and negligible
/// serialisation after its host NIC, whose delay changes at the given steps (ps).
#[derive(Debug)]
pub(crate) struct DelayLine {
    ch: u32,
    steps: Vec<(u64, u64)>,
}

/// The connections of a simulation and their delay lines.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    pub(crate) list: Vec<Connection>,
    lines: Vec<DelayLine>,
}

/// Lets `flow`'s connection (if it is a subflow) hand out data.
#[inline]
pub(crate) fn push_of(conns: &mut Conns, flows: &mut [Flow], cx: &mut Ctx<'_>, flow: u32) {
    if let Some(c) = flows[flow as usize].sub.as_ref().map(|m| m.conn) {
        conns.list[c as usize].push(flows, cx);
    }
}

/// A subflow's retransmission timeout: its connection queues its unacknowledged data for the others.
#[inline]
pub(crate) fn reinject_of(conns: &mut Conns, flows: &[Flow], flow: u32) {
    let f = &flows[flow as usize];
    if let Some(c) = f.sub.as_ref().map(|m| m.conn) {
        conns.list[c as usize].on_subflow_rto(f);
    }
}

/// Fills `out` with the windows of the other subflows of `flow`'s connection (cleared if none).
#[inline]
pub(crate) fn collect_peers(conns: &Conns, flows: &[Flow], flow: u32, out: &mut Vec<PeerWindow>) {
    out.clear();
    if let Some(c) = flows[flow as usize].sub.as_ref().map(|m| m.conn) {
        for &m in &conns.list[c as usize].subs {
            if m != flow {
                out.push(peer_window(&flows[m as usize]));
            }
        }
    }
}

impl Simulation {
    /// Builds the scenario's connections over its fixed flows (errors name the field).
    pub(crate) fn add_connections(
        &mut self,
        cfgs: &[ConnCfg],
        flow_cfgs: &[FlowCfg],
        reg: &Registry,
    ) -> Result<()> {
        for (i, c) in cfgs.iter().enumerate() {
            let f = format!("connections[{i}]");
            if self.conns.list.iter().any(|x| x.id == c.id) {
                return Err(EngineError::invalid(
                    format!("{f}.id"),
                    format!("duplicate connection id '{}'", c.id),
                ));
            }
            if c.subflows.is_empty() || c.subflows.len() > MAX_SUBFLOWS {
                return Err(EngineError::invalid(
                    format!("{f}.subflows"),
                    format!("needs 1 to {MAX_SUBFLOWS} subflows"),
                ));
            }
            if c.size_bytes == Some(0) {
                return Err(EngineError::invalid(
                    format!("{f}.size_bytes"),
                    "must be > 0 or null",
                ));
            }
            if c.receive_buffer_bytes == 0 {
                return Err(EngineError::invalid(
                    format!("{f}.receive_buffer_bytes"),
                    "must be > 0",
                ));
            }
            if let Some(b) = c.dynamic_beta {
                if !(b.is_finite() && b >= 1.0) {
                    return Err(EngineError::invalid(
                        format!("{f}.dynamic_beta"),
                        format!("must be a finite number >= 1 (got {b})"),
                    ));
                }
            }
            let make = reg.scheduler_maker(&format!("{f}.scheduler"), &c.scheduler)?;
            let mut subs = Vec::new();
            for (j, s) in c.subflows.iter().enumerate() {
                subs.push(self.subflow_of(&format!("{f}.subflows[{j}]"), s, &subs, flow_cfgs)?);
            }
            let idx = self.conns.list.len() as u32;
            if let Some(t) = c.stop_ns {
                let start = self.flows[subs[0] as usize].info.start;
                if Ps::from_ns(t).0 < start {
                    return Err(EngineError::invalid(
                        format!("{f}.stop_ns"),
                        "must not be before its first subflow's start_ns",
                    ));
                }
                self.q
                    .schedule(Ps::from_ns(t).0, Ev::ConnStop { conn: idx });
            }
            let rcvbuf = RcvBuf {
                bytes: c.receive_buffer_bytes,
                beta: c.dynamic_beta,
            };
            let spec = ConnSpec {
                id: c.id.clone(),
                subs: subs.clone(),
                size: c.size_bytes,
                sched: make(),
                rcvbuf,
                penalize: c.penalize,
            };
            let conn = Connection::new(idx, spec, &mut self.flows, self.p.mss);
            self.conns.list.push(conn);
            for (j, s) in c.subflows.iter().enumerate() {
                if s.extra_delay_ns > 0 || !s.delay_steps.is_empty() {
                    self.add_delay_line(&format!("{f}.subflows[{j}]"), subs[j], s)?;
                }
            }
        }
        Ok(())
    }

    /// The flow index of a connection's subflow entry, checked.
    fn subflow_of(
        &self,
        f: &str,
        s: &SubflowCfg,
        taken: &[u32],
        flow_cfgs: &[FlowCfg],
    ) -> Result<u32> {
        let field = format!("{f}.flow");
        let idx = self
            .flows
            .iter()
            .position(|x| x.info.id == s.flow)
            .ok_or_else(|| EngineError::invalid(&field, format!("no flow '{}'", s.flow)))?
            as u32;
        let fl = &self.flows[idx as usize];
        if fl.sub.is_some() || taken.contains(&idx) {
            return Err(EngineError::invalid(
                &field,
                format!("flow '{}' is already a subflow", s.flow),
            ));
        }
        if fl.info.cbr_bps.is_some() {
            return Err(EngineError::invalid(
                &field,
                format!("flow '{}' is constant-bit-rate, not TCP", s.flow),
            ));
        }
        if flow_cfgs
            .get(idx as usize)
            .is_some_and(|x| x.stop_ns.is_some())
        {
            return Err(EngineError::invalid(
                &field,
                format!(
                    "flow '{}' must have stop_ns null (the connection has the stop time)",
                    s.flow
                ),
            ));
        }
        if fl.info.size.is_some() {
            return Err(EngineError::invalid(
                &field,
                format!(
                    "flow '{}' must have size_bytes null (the connection has the size)",
                    s.flow
                ),
            ));
        }
        if let Some(k) = taken.first() {
            let m = &self.flows[*k as usize].info;
            if (m.src, m.dst) != (fl.info.src, fl.info.dst) {
                return Err(EngineError::invalid(
                    &field,
                    format!(
                        "flow '{}' has other endpoints than the first subflow",
                        s.flow
                    ),
                ));
            }
        }
        let mut last = 0;
        for (k, st) in s.delay_steps.iter().enumerate() {
            if st.at_ns < last {
                return Err(EngineError::invalid(
                    format!("{f}.delay_steps[{k}].at_ns"),
                    "steps must be in time order",
                ));
            }
            last = st.at_ns;
        }
        if s.delay_steps.len() > u16::MAX as usize {
            return Err(EngineError::invalid(
                format!("{f}.delay_steps"),
                "at most 65535 steps",
            ));
        }
        Ok(idx)
    }

    /// Puts a delay line after the host NIC of subflow `fl`'s data route (its own copy of the route).
    fn add_delay_line(&mut self, f: &str, fl: u32, s: &SubflowCfg) -> Result<()> {
        let ch = self.channels.len() as u32;
        let sizes = (self.p.mss + self.p.header, self.p.ack_bytes);
        self.channels.push(Channel::new(
            Bps(DELAY_LINE_BPS),
            Ps::from_ns(s.extra_delay_ns).0,
            (u64::MAX, u64::MAX),
            sizes,
        ));
        let at = self.flows[fl as usize].info.route_data as usize;
        let old: Vec<u32> = self.routes[at..]
            .iter()
            .copied()
            .take_while(|&c| c != ROUTE_END)
            .collect();
        if self.routes.len() + old.len() + 2 >= ROUTE_END as usize {
            return Err(EngineError::invalid(f, "too many routes"));
        }
        let new_at = self.routes.len() as u32;
        self.routes.push(old[0]);
        self.routes.push(ch);
        self.routes.extend(&old[1..]);
        self.routes.push(ROUTE_END);
        self.flows[fl as usize].info.route_data = new_at;
        let line = self.conns.lines.len() as u32;
        let steps: Vec<(u64, u64)> = s
            .delay_steps
            .iter()
            .map(|st| (Ps::from_ns(st.at_ns).0, Ps::from_ns(st.delay_ns).0))
            .collect();
        for (idx, &(t, _)) in steps.iter().enumerate() {
            let idx = idx as u16;
            self.q.schedule(t, Ev::DelayStep { line, idx });
        }
        self.conns.lines.push(DelayLine { ch, steps });
        Ok(())
    }

    /// [`Ev::DelayStep`]: a delay line's new delay (packets on it keep their order; those not yet
    /// arrived take the new delay from the next departure on).
    pub(crate) fn delay_step(&mut self, line: u32, idx: u16) {
        let l = &self.conns.lines[line as usize];
        let (ch, delay) = (l.ch, l.steps[idx as usize].1);
        self.channels[ch as usize].delay = delay;
    }

    /// After an ACK of subflow `flow` (its `snd_una` was `before`): the connection learns what was
    /// acknowledged and hands out more data.
    pub(crate) fn conn_acked(&mut self, flow: u32, before: u64) {
        let Some(c) = self.flows[flow as usize].sub.as_ref().map(|m| m.conn) else {
            return;
        };
        let conn = &mut self.conns.list[c as usize];
        let f = &mut self.flows[flow as usize];
        let to = f.snd.snd_una;
        conn.on_subflow_acked(f, before, to);
        let (flows, mut cx) = ctx!(self);
        conn.push(flows, &mut cx);
    }

    /// Data-level delivery of `dsn` of connection `c`; its completion finishes its subflows.
    pub(crate) fn conn_deliver(&mut self, c: u32, dsn: u64) {
        let now = self.q.now;
        if self.conns.list[c as usize].deliver(dsn, now) {
            self.conn_finished(c);
        }
    }

    /// [`Ev::ConnStop`]: connection `c` hands out no new data; complete if all was delivered.
    pub(crate) fn conn_stop(&mut self, c: u32) {
        let (now, mss) = (self.q.now, self.p.mss);
        if self.conns.list[c as usize].stop(&mut self.flows, now, mss) {
            self.conn_finished(c);
        }
    }

    /// Connection `c` completed: its subflows finish with it.
    fn conn_finished(&mut self, c: u32) {
        let now = self.q.now;
        let conn = &self.conns.list[c as usize];
        for &fl in &conn.subs {
            let f = &mut self.flows[fl as usize];
            if f.info.finished.is_none() {
                f.info.finished = Some(now);
                f.snd.rtt.rto_deadline = 0;
                self.finished.push(fl);
            }
        }
    }
}
