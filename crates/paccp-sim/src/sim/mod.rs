//! The simulation: owns the event queue, the channels and the flows, runs the event loop and
//! dispatches each event to its owner (a channel, a flow's sender or receiver, the arrivals, the
//! sampler). Handlers reach the rest of the engine only through a [`crate::transport::Ctx`].
//!
//! One event per packet hop: a FIFO drop-tail channel fixes a packet's serialisation end when it
//! accepts it, so only the arrival at the far end is an event, and each channel has at most one such
//! event pending (its pipe's head). Packets are `Copy` structs in one slab, listed per channel
//! ([`crate::net::slab`]); a route is a slice of channel indices precomputed per flow.
mod build;
pub(crate) use build::check_transport;
pub mod qdiscs;

use crate::cc::{CcMaker, PeerWindow, Policy};
use crate::error::{EngineError, Result};
use crate::event::{Entry, Ev, EventQueue};
use crate::metrics::{output, OutputParts, Sampler};
use crate::net::channel::Channel;
use crate::net::slab::Slab;
use crate::net::{NetStats, Pkt, QKey, ROUTE_END};
use crate::prefetch::{prefetch, prefetch_all};
use crate::topo::{Network, Router};
use crate::transport::{Ctx, Flow, Params};
use crate::units::Ps;
use crate::workload::{ArrivalGen, DrawnCos};
use rand_pcg::Pcg64Mcg;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

pub(crate) use build::NewFlow;

/// A VM with a VBP pair, split equally over its active flows.
pub(crate) struct Vm {
    pub(crate) theta: u64,
    pub(crate) omega: f64,
    pub(crate) label: String,
    pub(crate) active: Vec<u32>,
}

/// Progress callback: `(sim_ns_done, sim_ns_total)`; an `Err` aborts the run.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64) -> std::result::Result<(), String>;

/// One simulation: owns everything; [`Simulation::run`] consumes it and returns the output JSON value.
pub struct Simulation {
    duration: u64,
    p: Params,
    q: EventQueue,
    channels: Vec<Channel>,
    /// Where the packets in the channels live.
    slab: Slab,
    stats: NetStats,
    /// Host backpressure: the flow whose turn it is to put one segment into its NIC queue.
    nic_turn: Option<u32>,
    /// Flows finished by the handler being run (their VMs are re-split after it).
    finished: Vec<u32>,
    flows: Vec<Flow>,
    /// Every flow's data and ACK routes, each a run of channel indices ended by [`ROUTE_END`].
    routes: Vec<u32>,
    cc: CcMaker,
    net: Network,
    router: Router,
    ecmp: Pcg64Mcg,
    vms: Vec<Vm>,
    vm_of_host: HashMap<u32, u32>,
    vm_names: Vec<String>,
    gens: Vec<ArrivalGen>,
    hosts: Vec<u32>,
    sampler: Sampler,
    ids: HashSet<String>,
    events: u64,
    /// Controllers of flows with their own `cc` (see [`NewFlow::cc`]).
    flow_cc: Vec<CcMaker>,
    /// Multipath connections over some of the flows, and their subflows' delay lines.
    conns: conn::Conns,
    /// At an ACK of a subflow: the windows of its connection's other subflows (coupled controllers).
    peer_buf: Vec<PeerWindow>,
    /// Some host's egress stage wants the ACKs of its flows ([`crate::host::Selector::on_ack_in`]).
    host_acks: bool,
}

/// Splits the simulation into the flows and the context their handlers see.
macro_rules! ctx {
    ($s:ident) => {
        (
            &mut $s.flows,
            Ctx {
                q: &mut $s.q,
                channels: &mut $s.channels,
                slab: &mut $s.slab,
                stats: &mut $s.stats,
                p: &$s.p,
                routes: &$s.routes,
                nic_turn: &mut $s.nic_turn,
                finished: &mut $s.finished,
                peers: &$s.peer_buf,
            },
        )
    };
}

mod conn;

impl Simulation {
    /// Runs to the end and returns the output (docs/engine-contract.md).
    pub fn run(mut self, mut progress: Option<Progress<'_>>) -> Result<Value> {
        let total_ns = self.duration / Ps::PER_NS;
        let step = (self.duration / 100).max(1);
        let mut next_report = step;
        let mut last_t = 0;
        // A report at the start: with the one at the end, it brackets the event loop (a caller may time it).
        if let Some(cb) = progress.as_mut() {
            cb(0, total_ns).map_err(EngineError::Aborted)?;
        }
        loop {
            if self.q.needs_refill() {
                self.q.refill();
                self.prefetch_bucket();
            }
            let Some(&e) = self.q.peek() else { break };
            if e.t > self.duration {
                break;
            }
            if e.t >= next_report {
                if let Some(cb) = progress.as_mut() {
                    cb(e.t / Ps::PER_NS, total_ns).map_err(EngineError::Aborted)?;
                }
                next_report = (e.t / step + 1) * step;
            }
            self.q.now = e.t;
            self.q.cur_from = e.from;
            last_t = e.t;
            self.events += 1;
            // The hot path: a hop whose channel has another packet in its pipe schedules that packet's
            // arrival in place of the event being handled (the same order and sequence numbers as a
            // pop and a push).
            if let Ev::Hop { slot } = e.ev {
                let ch = self.slab.slot(slot).ch;
                let Some((pkt, next)) = self.channels[ch as usize].pop_head(&mut self.slab) else {
                    unreachable!("a hop event names the head of a non-empty channel");
                };
                match next {
                    Some(n) => {
                        self.q.seq += 1;
                        let seq = self.q.seq;
                        self.q.replace_top(Entry {
                            t: n.done + self.channels[ch as usize].delay,
                            from: n.done,
                            seq,
                            ev: Ev::Hop { slot: n.slot },
                        });
                    }
                    None => {
                        self.q.pop();
                    }
                }
                self.prefetch_next();
                self.arrive(pkt);
            } else {
                self.q.pop();
                self.handle(e.ev);
            }
        }
        // Serialisations that ended by the end of the run count as transmitted (and as processed
        // instants, as their end events did when each was an event).
        let end = self.duration;
        for c in &mut self.channels {
            last_t = last_t.max(c.finish(end, &self.slab));
        }
        if let Some(cb) = progress.as_mut() {
            cb(total_ns, total_ns).map_err(EngineError::Aborted)?;
        }
        let mut out = output(&OutputParts {
            flows: &self.flows,
            net: &self.net,
            channels: &self.channels,
            routes: &self.routes,
            vm_names: &self.vm_names,
            sampler: &self.sampler,
            stats: &self.stats,
            events: self.events,
            mss: self.p.mss,
            sim_end: last_t.min(self.duration),
        });
        if let Some(c) =
            crate::transport::conn::output(&self.conns.list, &self.flows, self.p.mss, Ps::PER_NS)
        {
            out["connections"] = c;
        }
        if let Some(h) = crate::transport::handshake::output(&self.flows, &self.p) {
            out["handshake"] = h;
        }
        Ok(out)
    }

    /// Starts fetching what the next events will read while this packet is forwarded (on a large
    /// fabric a packet's slot, its channels and its flow are rarely in cache), along the current
    /// bucket's sorted events: the slot of the hop three events ahead (a hop event names it); for the
    /// next event, a hop, the channel it leaves and either the channel it enters (both lines admission
    /// reads) or, at its route's end, its flow (its slot and route entry were fetched earlier). No
    /// effect on results.
    #[inline(always)]
    fn prefetch_next(&self) {
        if let Some(&Entry {
            ev: Ev::Hop { slot },
            ..
        }) = self.q.ahead(3)
        {
            prefetch(self.slab.slot(slot));
        }
        if let Some(&Entry {
            ev: Ev::Hop { slot },
            ..
        }) = self.q.peek()
        {
            let s = self.slab.slot(slot);
            prefetch(&self.channels[s.ch as usize]);
            let to = self.routes[s.pkt.pos as usize + 1];
            if to != ROUTE_END {
                self.channels[to as usize].prefetch_admission();
            } else {
                prefetch_all(&self.flows[s.pkt.flow as usize]);
            }
        }
    }

    /// A new bucket of events became current: start fetching, for the next bucket, the packet slots of
    /// its hops and the channels of its NIC wake-ups; for this bucket (fetched one bucket ago), the
    /// channel and route entry of each hop's packet and the first queued packet of each woken NIC
    /// (the wake-up moves it to the wire). By the time an event runs, what it reads is in cache or on
    /// its way. No effect on results.
    #[inline]
    fn prefetch_bucket(&self) {
        for e in self.q.upcoming(1) {
            match e.ev {
                Ev::Hop { slot } => prefetch(self.slab.slot(slot)),
                Ev::NicRoom { ch } => prefetch(&self.channels[ch as usize]),
                _ => {}
            }
        }
        for e in self.q.current() {
            match e.ev {
                Ev::Hop { slot } => {
                    let s = self.slab.slot(slot);
                    prefetch(&self.channels[s.ch as usize]);
                    prefetch(&self.routes[s.pkt.pos as usize + 1]);
                }
                Ev::NicRoom { ch } => {
                    if let Some(s) = self.channels[ch as usize].pipe.first_queued(&self.slab) {
                        prefetch(s);
                    }
                }
                _ => {}
            }
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            // `run` handles every hop itself; it never gets here.
            Ev::Hop { .. } => unreachable!("hop events are handled by Simulation::run"),
            Ev::TxEnd { ch } => {
                let c = &mut self.channels[ch as usize];
                if c.wait_at <= self.q.now {
                    c.wait_at = 0;
                }
                c.advance(self.q.now, &self.slab);
                c.start_next(ch, &mut self.q, &mut self.slab, &mut self.stats);
                if !self.channels[ch as usize].waiters.is_empty() {
                    self.serve_waiters(ch);
                    self.channels[ch as usize].schedule_wake(ch, &mut self.q, &self.slab);
                }
            }
            Ev::NicRoom { ch } => self.nic_room_freed(ch),
            Ev::FqRoom { flow } => {
                self.flows[flow as usize].snd.fq_wake = false;
                self.kick(flow);
            }
            Ev::FlowStart { flow } => self.start_flow(flow),
            Ev::Rto { flow } => {
                let (flows, mut cx) = ctx!(self);
                let before = flows[flow as usize].snd.timeouts;
                flows[flow as usize].rto_fire(flow, &mut cx);
                if flows[flow as usize].snd.timeouts != before {
                    conn::reinject_of(&mut self.conns, flows, flow);
                }
                conn::push_of(&mut self.conns, flows, &mut cx, flow);
            }
            Ev::DelAck { flow, gen } => {
                let (flows, mut cx) = ctx!(self);
                flows[flow as usize].delack_fire(flow, gen, &mut cx);
            }
            Ev::Sample => {
                self.sampler.tick(&self.flows, self.p.mss);
                let t = self.q.now + self.sampler.interval;
                if t <= self.duration {
                    self.q.schedule(t, Ev::Sample);
                }
            }
            Ev::Change { flow, idx } => self.change(flow, idx),
            Ev::Arrival { gen } => self.arrival(gen),
            Ev::CbrSend { flow } => {
                let (flows, mut cx) = ctx!(self);
                flows[flow as usize].cbr_send(flow, &mut cx);
            }
            Ev::DelayStep { line, idx } => self.delay_step(line, idx),
            Ev::Stop { flow } => {
                let (flows, mut cx) = ctx!(self);
                flows[flow as usize].stop(flow, &mut cx);
            }
            Ev::ConnStop { conn } => self.conn_stop(conn),
            Ev::HostWnd { flow } => self.host_window(flow),
        }
        self.settle_finished();
    }

    /// A packet reached the far end of its channel: the next hop, or its flow's sender / receiver.
    #[inline]
    fn arrive(&mut self, mut pkt: Pkt) {
        let ch = self.routes[pkt.pos as usize + 1];
        if ch != ROUTE_END {
            // Only switch channels follow the first hop: they classify by class alone.
            let key = QKey {
                class: pkt.class,
                vm: QKey::NO_VM,
            };
            pkt.pos += 1;
            self.channels[ch as usize].enqueue(
                ch,
                pkt,
                key,
                &mut self.q,
                &mut self.stats,
                &mut self.slab,
            );
            return;
        }
        self.stats.in_flight -= 1;
        if pkt.is_ack && self.host_acks {
            // The sender's host sees the ACK first (a virtual switch may rewrite its window).
            let info = &self.flows[pkt.flow as usize].info;
            let (data, ack) = (info.route_data as usize, info.route_ack as usize);
            let first = self.routes[data];
            // the unloaded RTT of the flow's path (propagation and one segment's / ACK's
            // serialisation per hop), which a host knows of its own fabric
            let hops = |from: usize, ack: bool| {
                self.routes[from..]
                    .iter()
                    .take_while(|c| **c != ROUTE_END)
                    .map(|c| {
                        let ch = &self.channels[*c as usize];
                        ch.delay + if ack { ch.tx_ack.1 } else { ch.tx_mtu.1 }
                    })
                    .sum::<u64>()
            };
            let base = hops(data, false) + hops(ack, true);
            if let Some(q) = self.channels[first as usize].sched.as_deref_mut() {
                if let Some(w) = q.on_ack_in(&pkt, base, self.q.now) {
                    self.flows[pkt.flow as usize].snd.host_wnd = w;
                }
                while let Some((flow, at)) = q.next_reopen() {
                    self.q.schedule(at, Ev::HostWnd { flow });
                }
            }
        }
        if pkt.is_ack && self.flows[pkt.flow as usize].sub.is_some() {
            conn::collect_peers(&self.conns, &self.flows, pkt.flow, &mut self.peer_buf);
        } else {
            self.peer_buf.clear();
        }
        let (flows, mut cx) = ctx!(self);
        let f = &mut flows[pkt.flow as usize];
        if pkt.is_ack {
            let before = f.snd.snd_una;
            f.on_ack(pkt.flow, pkt, &mut cx);
            if f.sub.is_some() {
                self.conn_acked(pkt.flow, before);
            }
        } else if f.info.cbr_bps.is_some() {
            f.cbr_deliver(pkt.flow, &mut cx);
        } else {
            // A subflow's segment new to its receiver carries a DSN for the connection's reorder buffer.
            let r = &f.rcv;
            let dsn = f.sub.as_ref().and_then(|m| {
                let new = pkt.seq >= r.rcv_nxt && !r.ooo.contains(pkt.seq);
                new.then(|| m.dsn(pkt.seq).map(|d| (m.conn, d))).flatten()
            });
            f.on_data(pkt.flow, pkt, &mut cx);
            if let Some((c, d)) = dsn {
                self.conn_deliver(c, d);
            }
        }
        self.settle_finished();
    }

    /// Host backpressure: the NIC queue of `ch` may have room again ([`Ev::NicRoom`]).
    pub(crate) fn nic_room_freed(&mut self, ch: u32) {
        self.channels[ch as usize].wake_pending = false;
        self.serve_waiters(ch);
        self.channels[ch as usize].schedule_wake(ch, &mut self.q, &self.slab);
    }

    /// Host backpressure: the waiters of NIC queue `ch` take turns, one segment each in the order they
    /// started waiting, until the queue is full or nobody waits; a flow that wants to send more waits
    /// again at the back. (Waking every waiter at once let the first one, a bulk flow blocked again at
    /// once, take every freed slot and starve a flow that started later.) With a scheduled discipline
    /// (per-class or per-VM queues) every waiter whose own queue has room gets its turn; the others
    /// keep their place.
    fn serve_waiters(&mut self, ch: u32) {
        let now = self.q.now;
        let size = self.p.mss + self.p.header;
        if self.channels[ch as usize].sched.is_some() {
            self.channels[ch as usize].advance(now, &self.slab);
            let waiting: Vec<u32> = self.channels[ch as usize].waiters.drain(..).collect();
            let mut keep = std::collections::VecDeque::new();
            for fl in waiting {
                if !self.channels[ch as usize].has_room(size, self.flows[fl as usize].qkey()) {
                    keep.push_back(fl);
                    continue;
                }
                self.take_turn(fl);
            }
            let c = &mut self.channels[ch as usize];
            keep.extend(c.waiters.drain(..));
            c.waiters = keep;
        } else {
            loop {
                let c = &mut self.channels[ch as usize];
                let Some(&fl) = c.waiters.front() else { break };
                // The queue is brought up to date only when it looks full as it stands (see
                // `Channel::advance_unless_room`; packets queued since then end after `now`).
                let key = self.flows[fl as usize].qkey();
                if !c.has_room(size, key) {
                    c.advance(now, &self.slab);
                    if !c.has_room(size, key) {
                        break;
                    }
                }
                c.waiters.pop_front();
                self.take_turn(fl);
            }
        }
        self.settle_finished();
    }

    /// A waiting flow (already out of its NIC's waiters) puts one segment into its NIC queue.
    fn take_turn(&mut self, fl: u32) {
        let (flows, mut cx) = ctx!(self);
        let f = &mut flows[fl as usize];
        f.snd.blocked = false;
        if f.info.finished.is_none() {
            *cx.nic_turn = Some(fl);
            f.try_send(fl, &mut cx);
            conn::push_of(&mut self.conns, flows, &mut cx, fl);
            *cx.nic_turn = None;
        }
    }

    // ----- flow life, VBP, FBP -----

    pub(crate) fn start_flow(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        f.info.started = true;
        if let Some(vm) = f.info.vm {
            self.vms[vm as usize].active.push(flow);
            self.resplit(vm);
        }
        if let (true, Some(vm)) = (self.host_acks, self.flows[flow as usize].info.vm) {
            // the sender's host sees the connection open (a virtual switch may set its window)
            let first = self.host_channel(flow);
            if let Some(q) = self.channels[first].sched.as_deref_mut() {
                if let Some(w) = q.on_flow_start(flow, vm, self.q.now) {
                    self.flows[flow as usize].snd.host_wnd = w;
                }
            }
        }
        let (flows, mut cx) = ctx!(self);
        if flows[flow as usize].info.cbr_bps.is_some() {
            flows[flow as usize].cbr_send(flow, &mut cx);
        } else {
            flows[flow as usize].try_send(flow, &mut cx);
            conn::push_of(&mut self.conns, flows, &mut cx, flow);
        }
        self.settle_finished();
    }

    /// The channel `flow`'s data leaves its sender's host on (the first of its data route): where
    /// the host's queue discipline sees the flow open, its ACKs, window updates and close.
    fn host_channel(&self, flow: u32) -> usize {
        self.routes[self.flows[flow as usize].info.route_data as usize] as usize
    }

    /// The sender's host reopens the window it closed on `flow` (a window update to its guest).
    fn host_window(&mut self, flow: u32) {
        let first = self.host_channel(flow);
        let Some(q) = self.channels[first].sched.as_deref_mut() else {
            return;
        };
        let Some(w) = q.on_reopen(flow, self.q.now) else {
            return;
        };
        self.flows[flow as usize].snd.host_wnd = w;
        self.kick(flow);
    }

    /// `flow`'s sender may send again (room in its NIC queue, a window its host opened).
    fn kick(&mut self, flow: u32) {
        let (flows, mut cx) = ctx!(self);
        let f = &mut flows[flow as usize];
        if f.info.finished.is_none() {
            f.try_send(flow, &mut cx);
        }
        conn::push_of(&mut self.conns, flows, &mut cx, flow);
    }

    /// Updates the VMs of the flows that finished in the last handler.
    fn settle_finished(&mut self) {
        while let Some(flow) = self.finished.pop() {
            self.finish_flow(flow);
        }
    }

    pub(crate) fn finish_flow(&mut self, flow: u32) {
        if let Some(vm) = self.flows[flow as usize].info.vm {
            self.vms[vm as usize].active.retain(|&x| x != flow);
            self.resplit(vm);
            if self.host_acks {
                // the sender's host sees the connection close (a virtual switch sees its FIN)
                let first = self.host_channel(flow);
                if let Some(q) = self.channels[first].sched.as_deref_mut() {
                    q.on_flow_end(flow, self.q.now);
                }
            }
        }
    }

    /// VBP: each active flow of the VM gets (theta / n, omega / n).
    fn resplit(&mut self, vm: u32) {
        let v = &self.vms[vm as usize];
        let n = v.active.len().max(1) as f64;
        let pair = Policy {
            theta_bps: v.theta as f64 / n,
            omega: v.omega / n,
        };
        for &fl in &v.active {
            self.flows[fl as usize].policy = pair;
        }
    }

    fn change(&mut self, flow: u32, idx: u16) {
        let mss = self.p.mss;
        let f = &mut self.flows[flow as usize];
        let c = &f.info.changes[idx as usize];
        f.policy = Policy {
            theta_bps: c.theta_bps as f64,
            omega: c.omega,
        };
        let acked = f.bytes_acked(mss);
        f.info.change_acked[idx as usize] = acked;
    }

    fn arrival(&mut self, gi: u32) {
        let now = self.q.now;
        let d = self.gens[gi as usize].draw(now, &self.hosts, &self.net);
        let (label, theta, omega, vm) = match d.cos {
            DrawnCos::ByVm => match self.vm_of_host.get(&d.src) {
                Some(&v) => {
                    let vmr = &self.vms[v as usize];
                    (vmr.label.clone(), vmr.theta, vmr.omega, Some(v))
                }
                None => ("BE".to_string(), 0, 1.0, None),
            },
            DrawnCos::Class {
                label,
                theta_bps,
                omega,
            } => (label, theta_bps, omega, None),
        };
        let nf = NewFlow {
            id: d.id,
            label,
            src: d.src,
            dst: d.dst,
            size: Some(d.size),
            start: now,
            theta,
            omega,
            vm,
            class: 0,
            changes: Vec::new(),
            cc: None,
            same_path_as: None,
            cbr_bps: None,
            path: None,
        };
        // Routes exist for every host pair of a connected topology; a failure here is skipped silently
        // only if the topology is disconnected, which the fixed flows would already have revealed.
        if let Ok(idx) = self.add_flow(nf, "arrivals") {
            self.start_flow(idx);
        }
        if let Some(t) = d.next {
            self.q.schedule(t, Ev::Arrival { gen: gi });
        }
    }
}

#[cfg(test)]
mod tests;
