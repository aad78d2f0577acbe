//! PACCP enforced at the host (`paccp_host`): a VM's purchase (theta, omega) delivered by its host's
//! egress stage whatever the guest's transport does (issue 25; README "PACCP enforced at the host").
//!
//! Three parts, each with a switch (for the ablation):
//!
//! 1. **Port allocation** (`alloc = "optimum"`): the host knows its port rate C and every VM's pair, so
//!    it solves PACCP's own objective, max sum omega log x s.t. sum x <= C, x >= theta, among its
//!    *active* VMs (a data packet waiting, or one sent in the last `hold_ns`), by water-filling:
//!    x_i = max(theta_i, omega_i lambda). Guarantees that sum above C are scaled by one factor
//!    C / sum theta first (equal fulfilment, as SoftBW). Re-solved whenever the active set changes and
//!    every `resolve_ns`. The x_i are the weights of a start-time fair queueing scheduler (SFQ: pick
//!    the smallest start tag; a VM that was idle restarts at the current virtual time, so an idle VM
//!    banks no credit), which is work conserving: a VM that sends less than its x_i leaves the rest to
//!    the others in proportion to theirs. `alloc = "equal"` uses equal weights instead (ablation).
//! 2. **The VM as one entity** (`per_vm = true`): all data of a VM shares one queue and one weight, so
//!    k connections get what one gets. `per_vm = false` (ablation) gives each flow its own queue with
//!    the VM's weight.
//! 3. **Remote bottlenecks** (`fabric`, optional): one rate limiter per VM (GCRA token bucket) whose
//!    rate R follows PACCP's law (SPEC section 3, congestion avoidance in rate form, one "RTT" being
//!    `interval_ns`) from a congestion signal the host sees without the guest's help: a
//!    retransmission of a segment that already left the host (the loss was beyond the host; segments
//!    lost in the VM's own host queue show up as a gap in the sequence numbers leaving the host and do
//!    not count). Per interval, with W = R interval / MSS: loss: W/2 + (omega - 1); else if W < Wmin
//!    (theta): (rcos+1) W/2 + (rcos-1+omega); else if the limiter held packets back: W + omega. R
//!    never drops below the VM's (scaled) guarantee nor rises above the port; a VM idle for
//!    `idle_ns` restarts unlimited. One state per VM, so the guest's flow count and congestion control
//!    do not change its aggregate. ACKs are never limited and go first.
use super::{AnySelector, Selector, SelectorMaker, VmInfo, VmQueue};
use crate::error::{EngineError, Result};
use crate::net::Pkt;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::rc::Rc;

const PS_PER_S: f64 = 1e12;
/// The sub-queue of ACKs.
const ACK_SUB: u32 = u32::MAX;
/// Gaps (locally dropped segment ranges) remembered per flow.
const MAX_GAPS: usize = 64;

/// A VM's purchase at its host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// Guarantee (bit/s).
    pub theta_bps: f64,
    /// Weight.
    pub omega: f64,
}

/// PACCP's optimum on one link of capacity `cap_bps` (max sum omega log x, sum x <= cap, x >= theta):
/// x_i = max(theta_i, omega_i lambda) with the sum equal to `cap_bps`. Guarantees summing above the
/// capacity are scaled by one factor first (every VM then gets its scaled guarantee).
pub fn water_fill(cap_bps: f64, vms: &[Pair]) -> Vec<f64> {
    let sum_theta: f64 = vms.iter().map(|p| p.theta_bps).sum();
    let scale = if sum_theta > cap_bps && sum_theta > 0.0 {
        cap_bps / sum_theta
    } else {
        1.0
    };
    let theta: Vec<f64> = vms.iter().map(|p| p.theta_bps * scale).collect();
    if scale < 1.0 {
        return theta;
    }
    // pinned: theta_i > omega_i lambda; lambda falls as more are pinned, so grow the pinned set
    let mut pinned = vec![false; vms.len()];
    loop {
        let left: f64 = cap_bps
            - theta
                .iter()
                .zip(&pinned)
                .filter(|(_, p)| **p)
                .map(|(t, _)| t)
                .sum::<f64>();
        let w: f64 = vms
            .iter()
            .zip(&pinned)
            .filter(|(_, p)| !**p)
            .map(|(v, _)| v.omega)
            .sum();
        if w <= 0.0 {
            return theta;
        }
        let lambda = left.max(0.0) / w;
        let mut changed = false;
        for (i, v) in vms.iter().enumerate() {
            if !pinned[i] && theta[i] > v.omega * lambda {
                pinned[i] = true;
                changed = true;
            }
        }
        if !changed {
            return vms
                .iter()
                .zip(&theta)
                .map(|(v, t)| t.max(v.omega * lambda))
                .collect();
        }
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct VmCfg {
    theta_bps: u64,
    omega: f64,
    port_bps: u64,
}

#[derive(Deserialize, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
struct FabricCfg {
    interval_ns: u64,
    idle_ns: u64,
    rcos: f64,
    mss_bytes: u64,
    burst_bytes: u64,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
enum Alloc {
    Optimum,
    Equal,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cfg {
    #[allow(dead_code)]
    kind: String,
    /// Purchase and port rate of each VM id (VMs not listed: (0, 1)).
    vms: BTreeMap<String, VmCfg>,
    alloc: Alloc,
    per_vm: bool,
    hold_ns: u64,
    resolve_ns: u64,
    #[serde(default)]
    fabric: Option<FabricCfg>,
}

#[derive(Debug, Clone, Copy)]
struct Params {
    alloc: Alloc,
    per_vm: bool,
    hold_ps: u64,
    resolve_ps: u64,
    fabric: Option<FabricCfg>,
}

/// The per-VM congestion state of part 3.
#[derive(Debug, Clone, Copy)]
struct Limiter {
    rate_bps: f64,
    /// GCRA theoretical arrival time (ps).
    tat: u64,
    lost: bool,
    limited: bool,
    sent: bool,
}

#[derive(Debug, Clone)]
struct VmState {
    pair: Pair,
    /// SFQ weight (bit/s): its share in the last solve.
    share_bps: f64,
    last_active: u64,
    limiter: Option<Limiter>,
}

/// What left the host of one flow: the next new segment and the ranges skipped (dropped locally).
#[derive(Debug, Clone, Default)]
struct FlowSeen {
    next: u64,
    gaps: Vec<(u64, u64)>,
}

/// The selector of one host.
#[derive(Debug)]
pub struct PaccpHost {
    p: Params,
    port_bps: f64,
    purchases: Rc<BTreeMap<u32, Pair>>,
    vms: BTreeMap<u32, VmState>,
    /// SFQ start tag of each queue slot (seconds of service at its weight) and whether it was idle.
    tags: Vec<(f64, bool)>,
    vtime: f64,
    /// The active VMs of the last solve.
    solved: Vec<u32>,
    next_solve: u64,
    next_tick: u64,
    flows: BTreeMap<u32, FlowSeen>,
    serving: Option<u32>,
}

impl PaccpHost {
    fn vm(&mut self, vm: u32, now: u64) -> &mut VmState {
        let pair = self.purchases.get(&vm).copied().unwrap_or(Pair {
            theta_bps: 0.0,
            omega: 1.0,
        });
        let port = self.port_bps;
        let fabric = self.p.fabric.is_some();
        self.vms.entry(vm).or_insert_with(|| VmState {
            pair,
            share_bps: 0.0,
            last_active: now,
            limiter: fabric.then_some(Limiter {
                rate_bps: port,
                tat: 0,
                lost: false,
                limited: false,
                sent: false,
            }),
        })
    }

    /// Re-solves the port's allocation when the active set changed or the period elapsed.
    fn solve(&mut self, queues: &[VmQueue], now: u64) {
        for q in queues {
            if q.sub != ACK_SUB && !q.fifo.is_empty() {
                self.vm(q.vm, now).last_active = now;
            }
        }
        let hold = self.p.hold_ps;
        let active: Vec<u32> = self
            .vms
            .iter()
            .filter(|(_, s)| s.last_active.saturating_add(hold) > now)
            .map(|(v, _)| *v)
            .collect();
        if active == self.solved && now < self.next_solve {
            return;
        }
        let pairs: Vec<Pair> = active.iter().map(|v| self.vms[v].pair).collect();
        let shares = match self.p.alloc {
            Alloc::Optimum => water_fill(self.port_bps, &pairs),
            Alloc::Equal => vec![self.port_bps / active.len().max(1) as f64; active.len()],
        };
        for (v, x) in active.iter().zip(shares) {
            if let Some(s) = self.vms.get_mut(v) {
                s.share_bps = x.max(1.0);
            }
        }
        self.solved = active;
        self.next_solve = now.saturating_add(self.p.resolve_ps);
    }

    /// Part 3: one interval of PACCP's law for every VM's limiter.
    fn tick(&mut self, now: u64) {
        let Some(f) = self.p.fabric else {
            return;
        };
        if now < self.next_tick {
            return;
        }
        let t_s = f.interval_ns as f64 / 1e9;
        let seg = (f.mss_bytes * 8) as f64 / t_s; // one segment per interval, in bit/s
        let port = self.port_bps;
        let idle_ps = f.idle_ns.saturating_mul(1000);
        let sum_theta: f64 = self.vms.values().map(|s| s.pair.theta_bps).sum();
        let scale = if sum_theta > port {
            port / sum_theta
        } else {
            1.0
        };
        for s in self.vms.values_mut() {
            let floor = (s.pair.theta_bps * scale).max(seg);
            let w_min = s.pair.theta_bps * scale / seg;
            let om = s.pair.omega;
            let idle = s.last_active.saturating_add(idle_ps) <= now;
            let Some(l) = s.limiter.as_mut() else {
                continue;
            };
            let w = l.rate_bps / seg;
            let next = if idle {
                port / seg
            } else if l.lost {
                w / 2.0 + (om - 1.0)
            } else if !l.sent {
                w
            } else if w < w_min {
                (f.rcos + 1.0) * w / 2.0 + (f.rcos - 1.0 + om)
            } else if l.limited {
                w + om
            } else {
                w
            };
            l.rate_bps = (next * seg).clamp(floor, port.max(floor));
            l.lost = false;
            l.limited = false;
            l.sent = false;
        }
        let iv = f.interval_ns.saturating_mul(1000).max(1);
        self.next_tick = (now / iv + 1) * iv;
    }

    /// When the head of VM `vm`'s data queue may leave (its limiter's tokens).
    fn release(&self, vm: u32) -> u64 {
        match (self.p.fabric, self.vms.get(&vm).and_then(|s| s.limiter)) {
            (Some(f), Some(l)) => {
                let tau = (f.burst_bytes * 8) as f64 * PS_PER_S / l.rate_bps.max(1.0);
                l.tat.saturating_sub(tau as u64)
            }
            _ => 0,
        }
    }

    /// Whether `pkt` (data) re-sends a segment that already left the host (a loss beyond it).
    fn remote_loss(&mut self, pkt: &Pkt) -> bool {
        let f = self.flows.entry(pkt.flow).or_default();
        if pkt.seq >= f.next {
            if pkt.seq > f.next && f.next > 0 {
                f.gaps.push((f.next, pkt.seq));
                if f.gaps.len() > MAX_GAPS {
                    f.gaps.remove(0);
                }
            }
            f.next = pkt.seq + 1;
            return false;
        }
        match f
            .gaps
            .iter()
            .position(|&(a, b)| a <= pkt.seq && pkt.seq < b)
        {
            Some(i) => {
                // a locally dropped segment: split its gap
                let (a, b) = f.gaps.remove(i);
                if a < pkt.seq {
                    f.gaps.push((a, pkt.seq));
                }
                if pkt.seq + 1 < b {
                    f.gaps.push((pkt.seq + 1, b));
                }
                false
            }
            None => true,
        }
    }
}

impl Selector for PaccpHost {
    fn select(&mut self, queues: &[VmQueue], now_ps: u64) -> Option<usize> {
        if let Some(i) = queues
            .iter()
            .position(|q| q.sub == ACK_SUB && !q.fifo.is_empty())
        {
            self.serving = Some(queues[i].vm);
            return Some(i);
        }
        self.tick(now_ps);
        self.solve(queues, now_ps);
        if self.tags.len() < queues.len() {
            self.tags.resize(queues.len(), (0.0, true));
        }
        let mut best: Option<(f64, usize)> = None;
        for (i, q) in queues.iter().enumerate() {
            if q.fifo.is_empty() {
                self.tags[i].1 = true;
                continue;
            }
            if self.tags[i].1 {
                self.tags[i] = (self.tags[i].0.max(self.vtime), false);
            }
            if self.release(q.vm) > now_ps {
                if let Some(l) = self.vms.get_mut(&q.vm).and_then(|s| s.limiter.as_mut()) {
                    l.limited = true;
                }
                continue;
            }
            if best.is_none_or(|(t, _)| self.tags[i].0 < t) {
                best = Some((self.tags[i].0, i));
            }
        }
        let (tag, i) = best?;
        let x = self.vms.get(&queues[i].vm).map_or(1.0, |s| s.share_bps);
        if let Some(head) = queues[i].fifo.head() {
            self.tags[i].0 = tag + head.size as f64 * 8.0 / x;
        }
        self.vtime = tag;
        self.serving = Some(queues[i].vm);
        Some(i)
    }

    fn next_eligible(&self, queues: &[VmQueue], _now_ps: u64) -> Option<u64> {
        queues
            .iter()
            .filter(|q| !q.fifo.is_empty())
            .map(|q| self.release(q.vm))
            .min()
    }

    fn on_dequeue(&mut self, _idx: usize, pkt: &Pkt, now_ps: u64) {
        let Some(vm) = self.serving.take() else {
            return;
        };
        if pkt.is_ack || self.p.fabric.is_none() {
            return;
        }
        let lost = self.remote_loss(pkt);
        let s = self.vm(vm, now_ps);
        s.last_active = now_ps;
        if let Some(l) = s.limiter.as_mut() {
            l.lost |= lost;
            l.sent = true;
            let dt = pkt.size as f64 * 8.0 * PS_PER_S / l.rate_bps.max(1.0);
            l.tat = l.tat.max(now_ps) + dt as u64;
        }
    }

    fn subqueue(&self, pkt: &Pkt) -> u32 {
        if pkt.is_ack {
            ACK_SUB
        } else if self.p.per_vm {
            0
        } else {
            pkt.flow
        }
    }
}

/// Parses `{"kind": "paccp_host", "vms": {id: {theta_bps, omega, port_bps}}, "alloc", "per_vm",
/// "hold_ns", "resolve_ns", "fabric": null | {interval_ns, idle_ns, rcos, mss_bytes, burst_bytes}}`.
pub fn parse(v: &Value, vms: &[VmInfo]) -> Result<SelectorMaker> {
    let field = "queues.host.selector";
    let cfg: Cfg = serde_json::from_value(v.clone())
        .map_err(|e| EngineError::Parse(format!("{field}: {e}")))?;
    if cfg.resolve_ns == 0 || cfg.hold_ns == 0 {
        return Err(EngineError::invalid(
            format!("{field}.resolve_ns"),
            "resolve_ns and hold_ns must be > 0",
        ));
    }
    if let Some(f) = cfg.fabric {
        if f.interval_ns == 0
            || f.mss_bytes == 0
            || f.rcos.is_nan()
            || f.rcos <= 1.0
            || f.burst_bytes == 0
        {
            return Err(EngineError::invalid(
                format!("{field}.fabric"),
                "needs interval_ns > 0, mss_bytes > 0, burst_bytes > 0 and rcos > 1",
            ));
        }
    }
    let mut purchases: BTreeMap<u32, Pair> = BTreeMap::new();
    let mut ports: BTreeMap<u32, u64> = BTreeMap::new();
    for (id, c) in &cfg.vms {
        let (idx, info) = vms
            .iter()
            .enumerate()
            .find(|(_, vm)| &vm.id == id)
            .ok_or_else(|| EngineError::Parse(format!("{field}.vms: unknown VM {id:?}")))?;
        if c.omega.is_nan() || c.omega <= 0.0 || !c.omega.is_finite() || c.port_bps == 0 {
            return Err(EngineError::invalid(
                format!("{field}.vms.{id}"),
                "omega must be > 0 and port_bps > 0",
            ));
        }
        purchases.insert(
            idx as u32,
            Pair {
                theta_bps: c.theta_bps as f64,
                omega: c.omega,
            },
        );
        let port = ports.entry(info.host).or_insert(0);
        *port = (*port).max(c.port_bps);
    }
    let p = Params {
        alloc: cfg.alloc,
        per_vm: cfg.per_vm,
        hold_ps: cfg.hold_ns.saturating_mul(1000),
        resolve_ps: cfg.resolve_ns.saturating_mul(1000),
        fabric: cfg.fabric,
    };
    let purchases = Rc::new(purchases);
    Ok(Box::new(move |host| match ports.get(&host) {
        None => AnySelector::RoundRobin(super::RoundRobin::default()),
        Some(&port) => AnySelector::Custom(Box::new(PaccpHost {
            p,
            port_bps: port as f64,
            purchases: Rc::clone(&purchases),
            vms: BTreeMap::new(),
            tags: Vec::new(),
            vtime: 0.0,
            solved: Vec::new(),
            next_solve: 0,
            next_tick: 0,
            flows: BTreeMap::new(),
            serving: None,
        })),
    }))
}

/// The key of VM `vm`'s packets at a host queue (tests).
#[cfg(test)]
fn key(vm: u32) -> crate::net::QKey {
    crate::net::QKey { class: 0, vm }
}

#[cfg(test)]
mod tests;
