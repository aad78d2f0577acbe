//! Building a [`Simulation`] from a scenario: the engine's own checks of its invariants (errors name
//! the field, in the words of the Python scenario schema where it has the same rule), the channels
//! with their queue disciplines, the flows and the first events.
use super::{Simulation, Vm};
use crate::cc::Policy;
use crate::config::{BufCfg, ChangeCfg, NodeKind, Scenario};
use crate::error::{EngineError, Result};
use crate::event::{Ev, EventQueue};
use crate::host::VmInfo;
use crate::metrics::Sampler;
use crate::net::channel::Channel;
use crate::net::qdisc::limits;
use crate::net::slab::Slab;
use crate::net::{NetStats, ROUTE_END};
use crate::rng::stream;
use crate::topo::{Network, Router};
use crate::transport::{Flow, FlowInfo, Params};
use crate::units::Ps;
use crate::workload::{host_of, positive, ArrivalGen};
use crate::{QdiscCx, QdiscPlace, Registry};
use rand::RngCore;
use std::collections::{HashMap, HashSet};

/// Parameters of a new flow.
pub(crate) struct NewFlow {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) src: u32,
    pub(crate) dst: u32,
    pub(crate) size: Option<u64>,
    pub(crate) start: u64,
    pub(crate) theta: u64,
    pub(crate) omega: f64,
    pub(crate) vm: Option<u32>,
    pub(crate) class: u8,
    pub(crate) changes: Vec<ChangeCfg>,
    /// Its own controller maker (index into `Simulation::flow_cc`), else the scenario's.
    pub(crate) cc: Option<u32>,
    /// Copy the routes of this flow (index) instead of drawing an ECMP path.
    pub(crate) same_path_as: Option<u32>,
    /// Constant bit rate (UDP-like) instead of TCP.
    pub(crate) cbr_bps: Option<u64>,
    /// The `k`-th equal-cost path instead of an ECMP draw ([`crate::topo::Router::route`]).
    pub(crate) path: Option<u32>,
}

pub(super) fn nonzero(field: &str, v: u64) -> Result<()> {
    if v == 0 {
        return Err(EngineError::invalid(field, "must be > 0"));
    }
    Ok(())
}

pub(super) fn check_buf(field: &str, b: &BufCfg) -> Result<()> {
    match b {
        BufCfg::Packets(0) | BufCfg::Bytes(0) => Err(EngineError::invalid(field, "must be > 0")),
        _ => Ok(()),
    }
}

/// The invariants of the packet and transport sections: the one place these rules live (the Python
/// front runs them through [`crate::check_transport_json`] and names its own fields in the errors).
pub(crate) fn check_transport(
    p: &crate::config::PacketCfg,
    t: &crate::config::TransportCfg,
    host_queue: &serde_json::Value,
) -> Result<()> {
    if p.mtu_bytes <= p.header_bytes {
        return Err(EngineError::invalid(
            "packet.mtu_bytes",
            "must be larger than packet.header_bytes",
        ));
    }
    nonzero("packet.ack_bytes", p.ack_bytes)?;
    if p.mtu_bytes > u16::MAX as u64 {
        return Err(EngineError::invalid("packet.mtu_bytes", "must be <= 65535"));
    }
    if p.ack_bytes > u16::MAX as u64 {
        return Err(EngineError::invalid("packet.ack_bytes", "must be <= 65535"));
    }
    positive("transport.init_cwnd_pkts".into(), t.init_cwnd_pkts)?;
    nonzero("transport.min_rto_ns", t.min_rto_ns)?;
    nonzero("transport.initial_rto_ns", t.initial_rto_ns)?;
    if t.max_rto_ns < t.min_rto_ns {
        return Err(EngineError::invalid(
            "transport.max_rto_ns",
            "must be >= transport.min_rto_ns",
        ));
    }
    if !(t.min_rto_ns..=t.max_rto_ns).contains(&t.initial_rto_ns) {
        return Err(EngineError::invalid(
            "transport.initial_rto_ns",
            "must be between transport.min_rto_ns and transport.max_rto_ns",
        ));
    }
    if t.host_fq_pkts > 0 && !t.host_backpressure {
        return Err(EngineError::invalid(
            "transport.host_fq_pkts",
            "needs transport.host_backpressure = true",
        ));
    }
    if t.host_fq_pkts > 0 && host_queue.get("kind").and_then(|k| k.as_str()) != Some("drop_tail") {
        return Err(EngineError::invalid(
            "transport.host_fq_pkts",
            "needs queues.host.kind = drop_tail",
        ));
    }
    if t.dupack_threshold == 0 {
        return Err(EngineError::invalid(
            "transport.dupack_threshold",
            "must be >= 1",
        ));
    }
    if t.delayed_ack {
        nonzero("transport.delayed_ack_timeout_ns", t.delayed_ack_timeout_ns)?;
    }
    if t.ack_delay_mean_ns >= t.min_rto_ns {
        return Err(EngineError::invalid(
            "transport.ack_delay_mean_ns",
            "must be < transport.min_rto_ns",
        ));
    }
    Ok(())
}

/// The transport parameters, checked.
fn params(sc: &Scenario) -> Result<Params> {
    check_transport(&sc.packet, &sc.transport, &sc.queues.host)?;
    let (p, t) = (&sc.packet, &sc.transport);
    Ok(Params {
        mss: p.mtu_bytes - p.header_bytes,
        header: p.header_bytes,
        ack_bytes: p.ack_bytes,
        init_cwnd: t.init_cwnd_pkts,
        min_rto: Ps::from_ns(t.min_rto_ns).0,
        initial_rto: Ps::from_ns(t.initial_rto_ns).0,
        max_rto: Ps::from_ns(t.max_rto_ns).0,
        delayed_ack: t.delayed_ack,
        delack_timeout: Ps::from_ns(t.delayed_ack_timeout_ns).0,
        dupthresh: t.dupack_threshold,
        sack: t.sack,
        backpressure: t.host_backpressure,
        host_fq: t.host_fq_pkts,
        prr: t.prr,
        rack: t.rack,
        ack_delay_mean: Ps::from_ns(t.ack_delay_mean_ns).0,
        seed: sc.seed,
        hs: crate::transport::handshake::params(t.handshake.as_ref())?,
    })
}

impl Simulation {
    /// Validates a scenario and builds the simulation with the built-in schemes.
    pub fn new(sc: Scenario) -> Result<Simulation> {
        Self::with_registry(sc, &Registry::default())
    }

    /// Validates a scenario and builds the simulation; `cc.kind` and selector kinds are looked up in
    /// `reg`.
    pub fn with_registry(sc: Scenario, reg: &Registry) -> Result<Simulation> {
        nonzero("duration_ns", sc.duration_ns)?;
        let p = params(&sc)?;
        let cc = reg.cc_maker(&sc.cc)?;
        nonzero("sampling.interval_ns", sc.sampling.interval_ns)?;
        let net = Network::build(&sc.topology)?;
        let router = Router::new(sc.routing, &net)?;
        let hosts: Vec<u32> = (0..net.names.len() as u32)
            .filter(|&n| net.kinds[n as usize] == NodeKind::Host)
            .collect();
        let mut vms = Vec::new();
        let mut vm_info = Vec::new();
        let mut vm_ids: HashMap<String, u32> = HashMap::new();
        let mut vm_of_host = HashMap::new();
        for (i, v) in sc.vms.iter().enumerate() {
            let f = format!("vms[{i}]");
            if vm_ids.insert(v.id.clone(), i as u32).is_some() {
                return Err(EngineError::invalid(
                    format!("{f}.id"),
                    format!("duplicate vm id '{}'", v.id),
                ));
            }
            let h = host_of(&net, &v.host, format!("{f}.host"))?;
            positive(format!("{f}.omega"), v.omega)?;
            vm_of_host.entry(h).or_insert(i as u32);
            vms.push(Vm {
                theta: v.theta_bps,
                omega: v.omega,
                label: v.label.clone(),
                active: Vec::new(),
            });
            vm_info.push(VmInfo {
                id: v.id.clone(),
                host: h,
                theta_bps: v.theta_bps,
                omega: v.omega,
            });
        }
        let cx = |field, place| QdiscCx {
            field,
            place,
            seed: sc.seed,
            vms: &vm_info,
            vm_ids: &vm_ids,
            reg,
        };
        let host_q = reg.qdisc_maker(&cx("queues.host", QdiscPlace::Host), &sc.queues.host)?;
        let switch_q =
            reg.qdisc_maker(&cx("queues.switch", QdiscPlace::Switch), &sc.queues.switch)?;
        let sizes = (sc.packet.mtu_bytes, sc.packet.ack_bytes);
        let channels: Vec<Channel> = net
            .channels
            .iter()
            .map(|c| {
                let from_host = net.kinds[c.from as usize] == NodeKind::Host;
                let mut ch = Channel::new(c.rate, c.delay.0, limits(c.buffer), sizes);
                ch.lossless = p.backpressure && from_host;
                ch.sched = if from_host {
                    host_q(c.from)
                } else {
                    switch_q(c.from)
                }
                .map(|mut q| {
                    q.on_channel(c.rate.0, limits(c.buffer));
                    Box::new(q)
                });
                ch
            })
            .collect();
        let host_acks = channels
            .iter()
            .any(|c| c.sched.as_deref().is_some_and(|q| q.wants_acks()));
        let mut sim = Simulation {
            duration: Ps::from_ns(sc.duration_ns).0,
            p,
            q: EventQueue::default(),
            channels,
            slab: Slab::default(),
            stats: NetStats::default(),
            nic_turn: None,
            finished: Vec::new(),
            flows: Vec::new(),
            routes: Vec::new(),
            cc,
            net,
            router,
            ecmp: stream(sc.seed, "ecmp"),
            vms,
            vm_of_host,
            vm_names: sc.vms.iter().map(|v| v.id.clone()).collect(),
            gens: Vec::new(),
            hosts,
            sampler: Sampler::new(
                Ps::from_ns(sc.sampling.interval_ns).0,
                sc.sampling.flows,
                sc.sampling.cwnd,
            ),
            ids: HashSet::new(),
            events: 0,
            flow_cc: Vec::new(),
            conns: Default::default(),
            peer_buf: Vec::new(),
            host_acks,
        };
        let mut index: HashMap<&str, u32> = HashMap::new();
        for (i, fc) in sc.flows.iter().enumerate() {
            let f = format!("flows[{i}]");
            let src = host_of(&sim.net, &fc.src, format!("{f}.src"))?;
            let dst = host_of(&sim.net, &fc.dst, format!("{f}.dst"))?;
            if src == dst {
                return Err(EngineError::invalid(
                    format!("{f}.dst"),
                    "must differ from src",
                ));
            }
            if fc.size_bytes == Some(0) {
                return Err(EngineError::invalid(
                    format!("{f}.size_bytes"),
                    "must be > 0 or null",
                ));
            }
            positive(format!("{f}.omega"), fc.omega)?;
            let vm = match &fc.vm {
                None => None,
                Some(v) => {
                    let id = *vm_ids.get(v).ok_or_else(|| {
                        EngineError::invalid(format!("{f}.vm"), format!("unknown vm '{v}'"))
                    })?;
                    if !fc.changes.is_empty() {
                        return Err(EngineError::invalid(
                            format!("{f}.changes"),
                            "a VBP flow (vm set) has no changes",
                        ));
                    }
                    Some(id)
                }
            };
            if fc.changes.len() > u16::MAX as usize {
                return Err(EngineError::invalid(
                    format!("{f}.changes"),
                    "at most 65535 changes",
                ));
            }
            let mut last = 0;
            for (j, c) in fc.changes.iter().enumerate() {
                positive(format!("{f}.changes[{j}].omega"), c.omega)?;
                if c.at_ns < last {
                    return Err(EngineError::invalid(
                        format!("{f}.changes[{j}].at_ns"),
                        "changes must be in time order",
                    ));
                }
                last = c.at_ns;
            }
            let (theta, omega) = match vm {
                Some(v) => (sim.vms[v as usize].theta, sim.vms[v as usize].omega),
                None => (fc.theta_bps, fc.omega),
            };
            if fc.cbr_bps == Some(0) {
                return Err(EngineError::invalid(format!("{f}.cbr_bps"), "must be > 0"));
            }
            let cc = match &fc.cc {
                None => None,
                Some(v) => {
                    let make = reg
                        .cc_maker(v)
                        .map_err(|e| EngineError::invalid(format!("{f}.cc"), e.to_string()))?;
                    sim.flow_cc.push(make);
                    Some(sim.flow_cc.len() as u32 - 1)
                }
            };
            let earlier = |key: &str, other: &Option<String>| -> Result<Option<u32>> {
                let Some(other) = other else {
                    return Ok(None);
                };
                let j = *index.get(other.as_str()).ok_or_else(|| {
                    EngineError::invalid(format!("{f}.{key}"), format!("no earlier flow '{other}'"))
                })?;
                let o = &sim.flows[j as usize].info;
                if (o.src, o.dst) != (src, dst) {
                    return Err(EngineError::invalid(
                        format!("{f}.{key}"),
                        format!("flow '{other}' has other endpoints"),
                    ));
                }
                Ok(Some(j))
            };
            let same_path_as = earlier("same_path_as", &fc.same_path_as)?;
            if fc.path.is_some() && same_path_as.is_some() {
                return Err(EngineError::invalid(
                    format!("{f}.path"),
                    "a flow takes either path or same_path_as",
                ));
            }
            if let Some(t) = fc.stop_ns {
                if t < fc.start_ns {
                    return Err(EngineError::invalid(
                        format!("{f}.stop_ns"),
                        "must not be before start_ns",
                    ));
                }
            }
            let nf = NewFlow {
                id: fc.id.clone(),
                label: fc.label.clone(),
                src,
                dst,
                size: fc.size_bytes,
                start: Ps::from_ns(fc.start_ns).0,
                theta,
                omega,
                vm,
                class: fc.class,
                changes: fc.changes.clone(),
                cc,
                same_path_as,
                cbr_bps: fc.cbr_bps,
                path: fc.path,
            };
            let idx = sim.add_flow(nf, &f)?;
            index.insert(fc.id.as_str(), idx);
            if let Some(t) = fc.stop_ns {
                sim.q.schedule(Ps::from_ns(t).0, Ev::Stop { flow: idx });
            }
            sim.q
                .schedule(Ps::from_ns(fc.start_ns).0, Ev::FlowStart { flow: idx });
            for (j, c) in fc.changes.iter().enumerate() {
                sim.q.schedule(
                    Ps::from_ns(c.at_ns).0,
                    Ev::Change {
                        flow: idx,
                        idx: j as u16,
                    },
                );
            }
        }
        sim.add_connections(&sc.connections, &sc.flows, reg)?;
        for (i, a) in sc.arrivals.iter().enumerate() {
            let (g, first) =
                ArrivalGen::new(i, a, sc.seed, &sim.net, &sc.topology, sim.hosts.len())?;
            sim.gens.push(g);
            if let Some(t) = first {
                sim.q.schedule(t, Ev::Arrival { gen: i as u32 });
            }
        }
        if sim.sampler.interval <= sim.duration {
            let t = sim.sampler.interval;
            sim.q.schedule(t, Ev::Sample);
        }
        Ok(sim)
    }

    /// Adds a flow (not started): its routes (ECMP hash from the `ecmp` stream), its controller.
    pub(crate) fn add_flow(&mut self, nf: NewFlow, field: &str) -> Result<u32> {
        if !self.ids.insert(nf.id.clone()) {
            return Err(EngineError::invalid(
                format!("{field}.id"),
                format!("duplicate flow id '{}'", nf.id),
            ));
        }
        let hash = self.ecmp.next_u64();
        let no_path = || EngineError::invalid(field, "no path between its src and dst");
        let (data_at, ack_at) = match nf.same_path_as {
            // A subflow on its sibling's path shares its routes in the flat table.
            Some(j) => {
                let o = &self.flows[j as usize].info;
                (o.route_data as usize, o.route_ack as usize)
            }
            None => {
                let route_data = self
                    .router
                    .route(&self.net, nf.src, nf.dst, hash, nf.path)
                    .ok_or_else(no_path)?;
                let route_ack = self
                    .router
                    .route(&self.net, nf.dst, nf.src, hash, nf.path)
                    .ok_or_else(no_path)?;
                let data_at = self.routes.len();
                if data_at + route_data.len() + route_ack.len() + 2 >= ROUTE_END as usize {
                    return Err(EngineError::invalid(field, "too many routes"));
                }
                self.routes.extend(&route_data);
                self.routes.push(ROUTE_END);
                let ack_at = self.routes.len();
                self.routes.extend(&route_ack);
                self.routes.push(ROUTE_END);
                (data_at, ack_at)
            }
        };
        let idx = self.flows.len() as u32;
        self.sampler.add_flow(idx, nf.size);
        let nchanges = nf.changes.len();
        let info = FlowInfo {
            id: nf.id,
            label: nf.label,
            src: nf.src,
            dst: nf.dst,
            vm: nf.vm,
            size: nf.size,
            start: nf.start,
            route_data: data_at as u32,
            route_ack: ack_at as u32,
            theta0: nf.theta,
            omega0: nf.omega,
            changes: nf.changes,
            change_acked: vec![0; nchanges],
            started: false,
            finished: None,
            cbr_bps: nf.cbr_bps,
        };
        let policy = Policy {
            theta_bps: nf.theta as f64,
            omega: nf.omega,
        };
        let cc = match nf.cc {
            Some(k) => (self.flow_cc[k as usize])(),
            None => (self.cc)(),
        };
        let mut flow = Flow::new(info, policy, cc, &self.p);
        flow.snd.class = nf.class;
        self.flows.push(flow);
        Ok(idx)
    }
}
