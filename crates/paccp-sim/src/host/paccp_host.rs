//! PACCP enforced at the host (`paccp_host`): a VM's purchase (theta, omega) delivered by its host's
//! egress stage whatever the guest's transport does (issue 25; docs/explanation/paccp-host.md).
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
//!    **Re-tagging** (`retag = true`): SFQ sets a VM's next tag at a dequeue, one packet's service
//!    at its share then ahead; when a re-solve changes the share, the part of that tag still ahead
//!    of the virtual time is rescaled by old share / new share, so the packet waits as it would at
//!    the new rate (a fluid scheduler's rate changes at once). Without it (`retag = false`,
//!    ablation) a VM whose share fell to 0 when others joined still had its next packet served at
//!    its old rate: one segment, 9-20 % of a 5 ms window at a share of 25 Mb/s.
//! 2. **The VM as one entity** (`per_vm = true`): all data of a VM shares one SFQ weight (one tag),
//!    so k connections get what one gets; with the fabric law on, each connection has a sub-queue of
//!    its own under that tag (for its pacer, part 3), the VM's sub-queues served in the order their
//!    guests sent. `per_vm = false` (ablation) gives each flow its own tag with the VM's weight.
//! 3. **The guest's window, set by the host** (`window`, optional; AC/DC TCP and vCC's mechanism:
//!    the virtual switch rewrites the receive window of the ACKs it hands to the guest). The host
//!    sees every ACK of its connections before the guest does ([`Selector::on_ack_in`]) and imposes
//!    a receive window on each connection, whatever the guest's congestion control:
//!    - **host-queue cap**: a VM's connections together never have more waiting in its host queue
//!      than its port share x over `queue_ns`, nor than 90 % of that queue (`queue_pkts`); in
//!      flight, the cap adds what x keeps beyond the host (x times the smoothed RTT beyond the
//!      host, at least the unloaded one; the smoothed RTT is kept with the law on)
//!      (cap / n each, n its active connections; a connection that ends leaves n at once, as a
//!      virtual switch sees the FIN, [`Selector::on_flow_end`]): a guest neither loses a segment in
//!      its own host queue (drop-tail losses there made Reno's recovery move acked bytes from one
//!      window to the next) nor waits there longer than `queue_ns` (kept below the minimum RTO, so a
//!      share that falls when a VM joins does not fire the guest's timers). The port's share is
//!      unaffected: the queue stays non-empty, and when the others leave room the queue drains and
//!      the same window carries (base RTT + queue_ns) / base RTT times x (work conserving);
//!    - **fabric law** (`law = true`): per connection, PACCP's law with the VM's pair split over its
//!      active connections (VBP: theta / n, omega / n), driven by a signal that does not wait for a
//!      loss: the queueing delay beyond the host, the ACK's RTT measured from the segment's departure
//!      from the host (the host queue's own wait excluded) minus the unloaded RTT (or a smaller one
//!      seen), "marked" above `mark_ns` (as ECN at a switch queue with a threshold; with `prio` the
//!      switches mark CE too, and an ACK echoing it is marked). The window imposed is the law's W,
//!      never below Wmin (theta / n over the current RTT) nor above the cap. A connection that
//!      joins a VM with live connections starts at their mean window (not at the cap).
//!    - **the law in time** (`fluid = true`): each ACK advances W over the time since the
//!      connection's previous ACK ([`Step::advance`], DCTCP's fluid model integrated exactly): per
//!      RTT of marked time W / 2 less; per RTT of unmarked time, while the VM's connections together
//!      are below theta, PACCP's guarantee step (rcos - 1) W / 2 + (rcos - 1 + omega) / n, else, with
//!      the whole imposed window in flight before the ACK, omega / n. Every change is a rate per unit
//!      time, linear in W or constant: k connections of a VM through one bottleneck whose ACKs are
//!      marked in the same share of the time change the VM's window together as one would, and
//!      shares at a fabric bottleneck follow omega above theta. (`fluid = false`, ablation: once per
//!      round of each connection, marked ACKs: W (1 - alpha / 2), alpha DCTCP's estimator starting
//!      at 1; else if W < Wmin: (rcos + 1) W / 2 + (rcos - 1 + omega) / n; else, if the connection
//!      used its window: W + omega / n. A round counts as marked if any of its ACKs is, so
//!      connections with small windows, fewer ACKs per round, are marked in fewer rounds: k
//!      connections of a VM took 1.26 times one's share at a 1 Gb/s fabric link.)
//!    - **opening by slow start** (`start = true`): a VM's first connection (none live) opens at its
//!      guarantee's window (theta / n over the unloaded RTT beyond the host, at least one segment)
//!      and, in a round with its window in use and no mark, doubles it (once per RTT elapsed) up to
//!      the cap, until its first marked round or loss; a connection joining live ones is in slow
//!      start while one of them is. (`start = false`, ablation: it opens at the cap; six VMs doing
//!      so put several times a 200-packet switch queue into it before the first mark came back.)
//!    - **loss as a strong mark** (`loss = true`): a segment that leaves the host below the highest
//!      one sent is a retransmission (the guest lost one beyond the host); at the end of that round
//!      the window halves (Reno's and DCTCP's response to a loss; per round, `fluid = false`: the
//!      round also counts as wholly marked in alpha).
//!    - **the pacer**: a guest's window cannot go below one segment, so at a bottleneck whose
//!      fair share is a few segments per RTT k connections would hold k. The law's window may go
//!      below one segment (down to 1/64); while one of a VM's connections is there, the host
//!      releases each of the VM's connections at its law rate (window over RTT; together the VM's),
//!      the guests keeping one segment each (Seawall / EyeQ: a rate limiter per VM driven by
//!      congestion, one per connection as Seawall's per-destination tunnels, so a connection at a
//!      congested receiver does not hold the VM's others). The pacers together release at least
//!      the VM's guarantee. A connection's RTT is the path's unloaded one until it has a sample. A
//!      connection is idle only after `idle_ns` beyond its expected gap between segments (RTT / W).
//!    - **pooled while paced** (`pool = true`, with `fluid`): the pacer serves a VM's connections in
//!      turn, so each gets an ACK every k of the VM's; driven by its own, a connection moves by large
//!      steps from single samples (the gamer above kept 1.30 times its share). While the VM is
//!      paced, each of its ACKs advances all its live connections over the time since the VM's
//!      previous ACK, with that ACK's mark, and a loss halves them all at most once per RTT: the VM
//!      is driven as one connection carrying all its ACKs.
//!    - **a join splits the VM's window** (`split = true`, with `fluid`): a connection that joins
//!      live ones of its VM takes 1 / (n + 1) of their windows together and they keep n / (n + 1),
//!      so opening one more connection does not add to the VM's window. (`split = false`, ablation:
//!      it starts at their mean window; 24 connections joining one in slow start each added one.)
//!    - **an end gives the window back** (`merge = true`, with `split`): a connection that ends
//!      ([`Selector::on_flow_end`]) gives its law window to its VM's live connections, in
//!      proportion to theirs, the inverse of the join's split. (`merge = false`, ablation: the window
//!      ends with it, and a large connection halved by a short one's join grew the half back at
//!      omega per RTT.)
//!    - **turns** (`turns = true`): a guest's window cannot go below one segment, so a VM with more
//!      connections than its host-queue cap has segments would keep one segment of each waiting in
//!      its host queue, n of them at its share: past its guests' minimum RTO (16 connections at 56
//!      Mb/s: 3.4 ms), and a share that falls at a join makes that wait jump, which fires the timers
//!      of RFC 6298 guests whose RTO has come down to their smoothed RTT. Then at most as many of
//!      its connections as the cap has segments hold a place in its host queue (an ACK or a turn
//!      lately and no segment left the host since; a segment out beyond the host holds none); an
//!      ACK when the places are taken passes its turn to the VM's longest waiting connection, and
//!      it waits behind a zero window, nothing in flight and no timer running, until a window
//!      update gives it its turn (a virtual switch sending its guest a window update;
//!      [`Selector::next_reopen`]) or its deadline (twice the VM's expected rotation) passes. A
//!      connection that starts while its VM's host queue already holds `queue_ns` at the VM's
//!      share waits for its turn from its start. (`turns = false`, ablation: on the unseen comparison file a silver VM with 16
//!      connections dropped to 23-33 Mb/s of its 56 for 15 ms after a join, with 30-45 guest
//!      timeouts and no loss.)
//!    - **copies dropped** (`dedup = true`): a guest's retransmission of a segment whose original
//!      still waits in its VM's host queue is dropped ([`crate::net::Qdisc::holds_copy`]; Linux
//!      does the same for its own queues, `skb_still_in_host_queue`). At a share below a segment
//!      per millisecond a segment's wait is the guests' RTT, their RFC 6298 RTO comes down to it
//!      and fires spuriously, and each copy took a slot of the VM's share. A copy sent after the
//!      original left the host but before its ACK came back is queued; the host, which sees every
//!      ACK, drops it when it comes up for service if its segment is acknowledged by then
//!      ([`Selector::stale`], before any queue is chosen, so its VM is not charged for it): after a
//!      share fell 5.5 times, such copies took 4 of the 8 segments a VM sent in a 5 ms window.
//!      (`dedup = false`, ablation: both kinds of copy take the VM's share.)
//!    - **variants, not as shipped** (both false by default): `grow_marked`, the increase of omega / n
//!      per RTT goes on in marked time too (DCTCP's fluid model: the equilibrium window is then
//!      2 omega / p instead of 2 omega (1 - p) / p for a share p of marked time, so a VM marked a few
//!      points more often, as a paced one is, loses a few percent of its share instead of a third);
//!      `pace_credit`, a paced connection that had nothing to send when its gap ended may send one
//!      segment at once. Together they bring the fabric gaming points' many-connection VM to
//!      0.78-1.05 of its share, but guaranteed VMs held at their floor then fail more windows
//!      (docs/host-scheme.md, "Not solved").
//!    - **the guarantee at priority** (`prio`; absent from the JSON: off; the scenario's
//!      `[scheme] prio` is on by default, off is the ablation `paccp-host-no-prio`;
//!      docs/host-scheme.md, "The guarantee at priority"): the switches serve two strict-priority
//!      levels sharing their link's buffer and mark CE on data that finds more than `mark_ns` of
//!      the port's backlog, whatever its level. A connection of a VM with a guarantee whose law
//!      window is at its guarantee's floor (W <= Wmin: the law holds the VM at theta) sends at the
//!      high level, any other at the low one ([`Selector::class_of`]), so a guarantee does not wait
//!      behind the traffic above the others' guarantees. A connection goes down at once, but up
//!      only once nothing it sent at the low level is unacknowledged: its high segments would
//!      overtake its low ones, and a guest takes three segments overtaken for a loss (with a
//!      per-packet token bucket at theta instead, the leaf-spine's MRG failed 16.5 % of its
//!      windows, its guests recovering from reordering). Connections open at the high level. A
//!      high segment meets little of the port's queue, so the law reads the CE echo as a mark as
//!      well as delay: it sees the port's congestion at either level.
//!    - a retransmission ends the connection's round at the next ACK even without an RTT sample (a
//!      guest in loss recovery echoes old timestamps), and an ACK advances the law by at most the
//!      expected gap between ACKs (at least an RTT), not over a silence (`fluid`).
//!
//! ACKs are never held and go first.
use super::{AnySelector, LawCounters, Selector, SelectorMaker, VmInfo, VmQueue};
use crate::error::{EngineError, Result};
use crate::net::Pkt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::rc::Rc;

const PS_PER_S: f64 = 1e12;
/// The sub-queue of ACKs.
const ACK_SUB: u32 = u32::MAX;
/// Departures remembered per connection (to match the ACKs' echoed send times).
const MAX_SENT: usize = 1024;
/// DCTCP's gain of the marked-share estimate.
const ALPHA_GAIN: f64 = 1.0 / 16.0;
/// The marked-share estimate of a new connection: 1, as Linux's DCTCP (`dctcp_alpha_on_init`), so a
/// connection that opens at its cap into a standing queue halves at its first marked round instead
/// of taking some 16 rounds to learn that the queue is there.
const ALPHA_INIT: f64 = 1.0;
/// Share of the VM's host queue its connections may have in flight together.
const QUEUE_SHARE: f64 = 0.9;
/// The smallest window (segments) the law gives a connection: below one segment the host paces.
const MIN_LAW_WND: f64 = 1.0 / 64.0;

/// The law run in time (`fluid`) for one connection of a VM with `n` connections: each ACK
/// advances it over the time since the previous one, as DCTCP's fluid model.
#[derive(Debug, Clone, Copy)]
struct Step {
    rcos: f64,
    /// The VM's weight (split over its `n` connections here).
    omega: f64,
    n: f64,
    /// The VM's connections together are below its guarantee.
    below: bool,
    /// The increase of omega / n per RTT goes on in marked time too (`grow_marked`).
    grow_marked: bool,
}

impl Step {
    /// The law window `w` after an ACK, `marked` or not, standing for `rtts` RTTs; `ss`: in slow
    /// start with its window in use (and this ACK unmarked); `used`: its window in use.
    ///
    /// Per RTT of marked time: W / 2 less (DCTCP's fluid model: over an RTT in which a share
    /// alpha of the ACKs is marked, alpha W / 2 less). Per RTT of unmarked time, the law's
    /// increase: below the VM's guarantee PACCP's step (rcos - 1) W / 2 + (rcos - 1 + omega) / n,
    /// else, with the window in use, omega / n; in slow start the window doubles. Every change is
    /// a rate per unit time, linear in W or constant, integrated exactly over the interval: k
    /// connections of a VM through one bottleneck whose ACKs are marked in the same share of the
    /// time change the VM's window together by what one connection would. (A law per round of
    /// each connection does not: a round counts as marked if any of its ACKs is, and k
    /// connections with windows k times smaller are marked in fewer of their rounds.)
    fn advance(self, w: f64, rtts: f64, marked: bool, ss: bool, used: bool) -> f64 {
        if ss {
            return w * rtts.exp2();
        }
        // dW / dt = -a W + b (per RTT)
        let (a, b) = if marked && self.grow_marked && used {
            (0.5, self.omega / self.n)
        } else if marked {
            (0.5, 0.0)
        } else if self.below {
            (
                -(self.rcos - 1.0) / 2.0,
                (self.rcos - 1.0 + self.omega) / self.n,
            )
        } else if used {
            (0.0, self.omega / self.n)
        } else {
            (0.0, 0.0)
        };
        if a == 0.0 {
            w + b * rtts
        } else {
            let e = (-a * rtts).exp();
            w * e + b * (1.0 - e) / a
        }
    }
}

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

#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(deny_unknown_fields)]
/// A VM's purchase and its port.
struct VmCfg {
    /// Minimum rate purchased (theta).
    theta_bps: u64,
    /// Weight purchased (omega).
    omega: f64,
    /// Rate of the host port the VM sends through (C).
    port_bps: u64,
}

#[derive(Deserialize, JsonSchema, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
/// The guest's window, set by the host (AC/DC TCP and vCC's mechanism), optional.
struct WindowCfg {
    /// Run the fabric law (false: the host-queue cap alone, ablation).
    law: bool,
    /// A VM's host queue (packets).
    queue_pkts: u64,
    /// Queueing delay beyond the host above which an ACK counts as marked.
    mark_ns: u64,
    /// The wait in its host queue a VM may have at its port share.
    queue_ns: u64,
    /// The law's rcos (> 1).
    rcos: f64,
    /// Segment size the window is counted in.
    mss_bytes: u64,
    /// A connection that sent nothing for this long leaves its VM's split.
    idle_ns: u64,
    /// A VM's first connection opens at its guarantee's window and doubles per unmarked round
    /// until the first mark or loss (false: it opens at the cap, ablation).
    start: bool,
    /// The law run in time, as DCTCP's fluid model, with the guarantee tested on the VM (false: per
    /// round of each connection, ablation).
    fluid: bool,
    /// While the VM is paced, its ACKs drive all its connections as one (false: each connection its
    /// own ACKs, ablation; with `fluid` only).
    pool: bool,
    /// A connection joining live ones splits the VM's window (false: it starts at their mean
    /// window, adding to the VM's, ablation; with `fluid` only).
    split: bool,
    /// A connection that ends gives its window back to its VM's live connections (false: it is
    /// lost with it, ablation; with `split` only).
    #[serde(default)]
    merge: bool,
    /// A retransmission leaving the host ends the round as a loss: the window halves (false: the
    /// law sees delay only, ablation).
    loss: bool,
    /// Connections take turns when their one-segment floors exceed the VM's host-queue cap (false:
    /// all keep a segment in the host queue, ablation).
    #[serde(default)]
    turns: bool,
    /// A retransmission of a segment whose original still waits in the host queue is dropped
    /// (false: both take the VM's share, ablation).
    #[serde(default)]
    dedup: bool,
    /// The law's increase goes on in marked time too (false as shipped: unmarked time only; a
    /// variant, see the module docstring).
    #[serde(default)]
    grow_marked: bool,
    /// A paced connection that had nothing to send when its gap ended may send one segment at
    /// once (false as shipped: its next gap starts when it sends; a variant).
    #[serde(default)]
    pace_credit: bool,
    /// The guarantee at priority: a connection whose law window is at its guarantee's floor sends
    /// at the switches' high level, else at the low one, and the law reads the switches' CE marks
    /// as well as delay (absent: off; the scenario's default is on, see the module docstring).
    #[serde(default)]
    prio: bool,
}

impl WindowCfg {
    /// A segment (bits).
    fn seg_bits(&self) -> f64 {
        (self.mss_bytes * 8) as f64
    }

    /// The segments `queue_ns` holds at a rate of `bps`.
    fn queue_segs(&self, bps: f64) -> f64 {
        bps * self.queue_ns as f64 / 1e9 / self.seg_bits()
    }

    /// The packets of its host queue a VM's connections may hold together (`QUEUE_SHARE` of it).
    fn queue_cap(&self) -> f64 {
        self.queue_pkts as f64 * QUEUE_SHARE
    }
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
/// How the port is split among the active VMs.
enum Alloc {
    /// Water-filling of the VMs' pairs (theta, omega) over the port rate.
    Optimum,
    /// Equal weights (ablation).
    Equal,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cfg {
    /// `"paccp_host"`.
    #[allow(dead_code)]
    kind: String,
    /// Purchase and port rate of each VM id (VMs not listed: (0, 1)).
    vms: BTreeMap<String, VmCfg>,
    /// Port allocation: `optimum` or `equal`.
    alloc: Alloc,
    /// The VM as one entity: one queue and one weight for all its data (false: one per flow, ablation).
    per_vm: bool,
    /// A VM stays active this long after its last data packet.
    hold_ns: u64,
    /// Period of recomputing the allocation.
    resolve_ns: u64,
    /// A re-solve re-tags what a VM's SFQ tag still owes at its new share (false: at its old one,
    /// ablation).
    #[serde(default = "yes")]
    retag: bool,
    /// The guest's window set by the host (absent: no window, the queue alone).
    #[serde(default)]
    window: Option<WindowCfg>,
}

#[derive(Debug, Clone, Copy)]
struct Params {
    alloc: Alloc,
    per_vm: bool,
    retag: bool,
    hold_ps: u64,
    resolve_ps: u64,
    window: Option<WindowCfg>,
}

#[derive(Debug, Clone)]
struct VmState {
    pair: Pair,
    /// SFQ weight (bit/s): its share in the last solve.
    share_bps: f64,
    last_active: u64,
    /// The pacer of part 3, set while one of the VM's connections has a law window below one
    /// segment: (the VM's rate in bit/s, the factor its connections' law rates are raised by so
    /// that together they are at least its guarantee, until when it holds).
    pace: Option<(f64, f64, u64)>,
    /// When its last ACK came (`fluid`).
    last_ack: u64,
    /// When a loss last halved its pooled connections.
    halved: u64,
    /// Its connections waiting for their turn (`turns`), first come first served.
    turns: std::collections::VecDeque<u32>,
    /// What the law saw of it (the output's `host_law`).
    law: LawCounters,
}

/// Part 3's state of one connection.
#[derive(Debug, Clone)]
struct ConnState {
    vm: u32,
    /// (send time, departure from the host) of its recent segments, oldest first.
    sent: std::collections::VecDeque<(u64, u64)>,
    /// One past the highest segment that left the host.
    hi: u64,
    last_sent: u64,
    /// Smallest RTT beyond the host seen (ps).
    base_ps: u64,
    srtt_ps: f64,
    /// The law's window (segments; below 1 the host paces the VM).
    w: f64,
    /// The window the law imposes now (segments, possibly below 1) and the RTT it is meant over (ps).
    x: f64,
    rtt_ps: f64,
    alpha: f64,
    round_end: u64,
    acks: u32,
    marked: u32,
    /// When the current round began.
    round_start: u64,
    /// The connection had its window in flight in this round.
    full: bool,
    /// Accumulated fractions of the windows imposed.
    dither: f64,
    /// Its window is set at its first ACK (the VM's first connection, `start`).
    opened: bool,
    /// Slow start: the window doubles per unmarked round until the first mark or loss.
    ss: bool,
    /// A retransmission of it left the host in this round.
    lost: bool,
    /// One past the highest segment acknowledged.
    una: u64,
    /// When its law last advanced (0: not yet).
    last_ack: u64,
    /// Its window was in use at its last ACK.
    used: bool,
    /// Its host-queue cap at its last ACK (segments).
    cap: f64,
    /// The earliest time the pacer lets its next segment leave (while its VM is paced).
    next_send: u64,
    /// Waiting for its turn behind a zero window (`turns`), until this time at the latest.
    waiting: Option<u64>,
    /// When it last had an ACK or was given its turn.
    moved: u64,
    /// When it was last given its turn (0: never); it is live from then on, before it sends.
    turn_at: u64,
    /// `prio`: its law window is at its guarantee's floor (it asks for the high level).
    want_high: bool,
    /// `prio`: its segments leave at the high level.
    high: bool,
    /// `prio`: one past the highest segment it sent at the low level.
    low_hi: u64,
}

impl ConnState {
    /// Its law rate (bit/s): the window imposed over its RTT, once it has an RTT.
    fn law_rate(&self, seg_bits: f64) -> Option<f64> {
        (self.rtt_ps > 0.0).then(|| self.x * seg_bits / (self.rtt_ps / PS_PER_S))
    }

    /// The expected time between its segments when its law window is below one segment (ps).
    fn gap(&self) -> u64 {
        if self.x < 1.0 && self.rtt_ps > 0.0 {
            (self.rtt_ps / self.x.max(MIN_LAW_WND)) as u64
        } else {
            0
        }
    }

    /// It sent something within `idle_ps` beyond its expected gap (a paced connection sends a
    /// segment every 1 / W RTTs and is not idle in between).
    fn alive(&self, idle_ps: u64, now: u64) -> bool {
        self.waiting.is_some()
            || (self.turn_at > 0 && self.turn_at.saturating_add(idle_ps) > now)
            || self
                .last_sent
                .saturating_add(idle_ps)
                .saturating_add(self.gap())
                > now
    }
}

/// What [`PaccpHost::take_turn`] needs of a VM's host-queue cap.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// The VM's live connections.
    n: f64,
    /// The segments its connections may have in its host queue together.
    segs: f64,
    /// The time its n segments take at its share (ps).
    rotation_ps: u64,
    /// An RTT beyond the host plus the host-queue wait (ps).
    grace_ps: u64,
}

/// The selector of one host.
#[derive(Debug)]
pub struct PaccpHost {
    p: Params,
    port_bps: f64,
    purchases: Rc<BTreeMap<u32, Pair>>,
    vms: BTreeMap<u32, VmState>,
    /// SFQ start tag (seconds of service at its weight) of each VM (`per_vm`) or each of its
    /// sub-queues (VM, connection); a tag at or below the virtual time is the same as none.
    tags: BTreeMap<(u32, u32), f64>,
    next_tag_prune: u64,
    vtime: f64,
    /// The active VMs of the last solve.
    solved: Vec<u32>,
    next_solve: u64,
    conns: BTreeMap<u32, ConnState>,
    /// Windows imposed on connections at their start that have had no ACK yet: flow -> (VM,
    /// segments, when).
    opening: BTreeMap<u32, (u32, u64, u64)>,
    next_prune: u64,
    serving: Option<u32>,
    /// (flow, when) the engine is to call [`Selector::on_reopen`] at (`turns`).
    reopen: Vec<(u32, u64)>,
    /// Connections given their turn whose window update is due.
    turn_given: std::collections::BTreeSet<u32>,
    /// Connections waiting for their turn from their start (no record yet): flow -> (VM, deadline).
    open_waiting: BTreeMap<u32, (u32, u64)>,
}

impl PaccpHost {
    /// A host port of `port_bps` with nothing queued yet.
    fn new(p: Params, port_bps: f64, purchases: Rc<BTreeMap<u32, Pair>>) -> PaccpHost {
        PaccpHost {
            p,
            port_bps,
            purchases,
            vms: BTreeMap::new(),
            tags: BTreeMap::new(),
            next_tag_prune: 0,
            vtime: 0.0,
            solved: Vec::new(),
            next_solve: 0,
            conns: BTreeMap::new(),
            opening: BTreeMap::new(),
            next_prune: 0,
            serving: None,
            reopen: Vec::new(),
            turn_given: std::collections::BTreeSet::new(),
            open_waiting: BTreeMap::new(),
        }
    }

    /// VM `vm`'s purchase ((0, 1) if it bought none).
    fn pair(&self, vm: u32) -> Pair {
        self.purchases.get(&vm).copied().unwrap_or(Pair {
            theta_bps: 0.0,
            omega: 1.0,
        })
    }

    /// The port's split among VMs with purchases `pairs` (`alloc`).
    fn shares(&self, pairs: &[Pair]) -> Vec<f64> {
        match self.p.alloc {
            Alloc::Optimum => water_fill(self.port_bps, pairs),
            Alloc::Equal => vec![self.port_bps / pairs.len().max(1) as f64; pairs.len()],
        }
    }

    fn vm(&mut self, vm: u32, now: u64) -> &mut VmState {
        let pair = self.pair(vm);
        self.vms.entry(vm).or_insert_with(|| VmState {
            pair,
            share_bps: 0.0,
            last_active: now,
            pace: None,
            last_ack: 0,
            halved: 0,
            turns: std::collections::VecDeque::new(),
            law: LawCounters::default(),
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
        let shares = self.shares(&pairs);
        let mut scale: BTreeMap<u32, f64> = BTreeMap::new();
        for (v, x) in active.iter().zip(shares) {
            if let Some(s) = self.vms.get_mut(v) {
                let new = x.max(1.0);
                if self.p.retag && s.share_bps > 0.0 && s.share_bps != new {
                    scale.insert(*v, s.share_bps / new);
                }
                s.share_bps = new;
            }
        }
        // re-tagging (`retag`): the service a VM's pending tag still owes at its old share is owed
        // at its new one
        let v0 = self.vtime;
        for ((v, _), t) in self.tags.iter_mut() {
            if let (true, Some(f)) = (*t > v0, scale.get(v)) {
                *t = v0 + (*t - v0) * f;
            }
        }
        self.solved = active;
        self.next_solve = now.saturating_add(self.p.resolve_ps);
    }

    /// Part 3: the window imposed on connection `flow` after an ACK of `pkt.seq` whose echoed send
    /// time is `pkt.ts` (module docstring).
    fn window(&mut self, f: WindowCfg, pkt: &Pkt, base_ps: u64, now: u64) -> Option<u64> {
        let idle = f.idle_ns.saturating_mul(1000);
        if now >= self.next_prune {
            self.conns.retain(|_, c| c.alive(idle, now));
            self.next_prune = now.saturating_add(idle);
        }
        self.opening.remove(&pkt.flow);
        let vm = self.conns.get(&pkt.flow)?.vm;
        // the VM's live connections and the rate of their law windows together (bit/s per segment)
        let (n, vm_segs_per_s) = self
            .conns
            .values()
            .filter(|c| c.vm == vm && c.alive(idle, now))
            .fold((0usize, 0.0), |(n, r), c| {
                let per_s = if c.rtt_ps > 0.0 {
                    c.w / (c.rtt_ps / PS_PER_S)
                } else {
                    0.0
                };
                (n + 1, r + per_s)
            });
        let n = n.max(1) as f64;
        let (theta, omega, share) = match self.vms.get(&vm) {
            // the guarantee as the port allocation scaled it (rule 4)
            Some(s) if self.solved.contains(&vm) => {
                (s.pair.theta_bps.min(s.share_bps), s.pair.omega, s.share_bps)
            }
            Some(s) => (s.pair.theta_bps, s.pair.omega, self.port_bps),
            None => self
                .purchases
                .get(&vm)
                .map_or((0.0, 1.0, self.port_bps), |p| {
                    (p.theta_bps, p.omega, self.port_bps)
                }),
        };
        let seg_bits = f.seg_bits();
        let paced = f.pool && self.pace_of(vm, now).is_some();
        let c = self.conns.get_mut(&pkt.flow)?;
        let mut sample = None;
        while let Some(&(ts, dep)) = c.sent.front() {
            if ts > pkt.ts {
                break;
            }
            c.sent.pop_front();
            if ts == pkt.ts {
                sample = Some(now.saturating_sub(dep));
                break;
            }
        }
        // the unloaded RTT the host knows of the path, or a smaller one seen; known from the first
        // ACK on even without an RTT sample (an ACK echoing a send time the host no longer holds,
        // as after a silence that ended the connection's record): a connection whose RTT stayed
        // unknown counted in its VM's pacer at a rate of zero and held the VM's queue for good
        c.base_ps = c.base_ps.min(base_ps);
        if let Some(rtt) = sample {
            c.base_ps = c.base_ps.min(rtt);
        }
        let base_s = if c.base_ps == u64::MAX {
            0.0
        } else {
            c.base_ps as f64 / PS_PER_S
        };
        // the host-queue cap: what may wait in the VM's host queue (90 % of it, and `queue_ns` at
        // its port share) plus what the share keeps in flight beyond the host (over the smoothed
        // RTT beyond it, at least the unloaded one), over n. The 90 segments bound the host queue
        // only: counted against the whole flight, they held a 10 Gb/s VM below its port's 102
        // segment BDP, and a 5 Gb/s guarantee once the path queued more than 90 us
        // (turns count their places against `queue_ns` and the unloaded RTT at the share: with the
        // host-queue part alone, the Clos file's gold failed 16 windows of 1,230 instead of 12)
        let at_share = share * (base_s + f.queue_ns as f64 / 1e9) / seg_bits;
        let host_q = f.queue_cap().min(f.queue_segs(share));
        let beyond = share * (c.srtt_ps / PS_PER_S).max(base_s) / seg_bits;
        let cap = (host_q + beyond).max(n) / n;
        if !f.law {
            return Some(cap.ceil() as u64);
        }
        let mut mark = None;
        let mut delay = None;
        if let Some(rtt) = sample {
            c.base_ps = c.base_ps.min(rtt);
            c.srtt_ps = if c.srtt_ps == 0.0 {
                rtt as f64
            } else {
                0.875 * c.srtt_ps + 0.125 * rtt as f64
            };
            c.acks += 1;
            // `prio`: a segment at the high level meets little of the port's queue; the switches'
            // CE mark tells the law what the port holds, whatever the level
            let m = rtt - c.base_ps > f.mark_ns.saturating_mul(1000) || (f.prio && pkt.ce);
            delay = Some((rtt - c.base_ps) as f64);
            if m {
                c.marked += 1;
            }
            mark = Some(m);
        }
        // the segments this ACK acknowledges for the first time (delayed ACKs cover two)
        let acked = pkt.seq.saturating_sub(c.una);
        // what it had in flight before this ACK
        let flight = c.hi.saturating_sub(c.una);
        c.una = c.una.max(pkt.seq);
        if c.hi.saturating_sub(pkt.seq) as f64 + 1.0 >= c.w.min(cap) {
            c.full = true;
        }
        // the guarantee's window at the current RTT beyond the host (a rate floor)
        let w_min = theta / n * (c.srtt_ps / PS_PER_S).max(base_s) / seg_bits;
        if !c.opened {
            // a VM's first connection opens at its guarantee's window (at least a segment) and
            // finds its share by slow start, not at the cap: six VMs opening at their caps put
            // several times a switch queue into it before the first mark came back
            c.opened = true;
            c.w = w_min.max(1.0).min(cap.max(1.0));
        }
        if let (true, Some(m), true) = (f.fluid, mark, acked > 0) {
            // the window in use: the whole window imposed (the law's, at least the guarantee's and
            // one segment) was in flight before this ACK
            c.used = flight as f64 >= c.x.max(1.0).min(cap).floor();
            if m {
                c.ss = false;
            }
            c.cap = cap;
            let w = c.w;
            let step = Step {
                rcos: f.rcos,
                omega,
                n,
                // below its guarantee is a property of the VM, not of one of its connections: its
                // connections' law rates together against theta (one connection: W < Wmin)
                below: vm_segs_per_s * seg_bits < theta || (vm_segs_per_s == 0.0 && w < w_min),
                grow_marked: f.grow_marked,
            };
            self.advance(vm, pkt.flow, step, m, paced, idle, now);
        }
        if let Some(d) = delay {
            let l = &mut self.vm(vm, now).law;
            l.samples += 1;
            l.delay_ps += d;
        }
        let c = self.conns.get_mut(&pkt.flow)?;
        let mut vm_lost = false;
        // a round ends at an ACK an RTT after it began; with a retransmission in it, at any ACK (the
        // guest's duplicate ACKs in its recovery carry no RTT sample, and a loss must still act)
        if (c.acks > 0 || (c.lost && f.loss && f.fluid)) && now >= c.round_end {
            let om = omega / n;
            // a loss is a round entirely marked (a strong mark): the window halves
            let lost = std::mem::take(&mut c.lost) && f.loss;
            if f.fluid {
                // the marks moved the window ACK by ACK; a loss still halves it once per round (a
                // pooled VM's connections all: the VM halves as one connection would)
                if lost && paced {
                    vm_lost = true;
                } else if lost {
                    c.ss = false;
                    c.w = (c.w / 2.0).max(MIN_LAW_WND);
                }
            } else {
                let frac = if lost {
                    1.0
                } else {
                    f64::from(c.marked) / f64::from(c.acks)
                };
                c.alpha = (1.0 - ALPHA_GAIN) * c.alpha + ALPHA_GAIN * frac;
                // a round lasts one RTT while the window is a segment or more; below that an ACK comes
                // every 1 / W RTTs and the increase counts the RTTs elapsed (per unit time as above)
                let rtts = if c.srtt_ps > 0.0 {
                    (now.saturating_sub(c.round_start) as f64 / c.srtt_ps)
                        .floor()
                        .clamp(1.0, (1.0 / c.w).ceil().max(1.0))
                } else {
                    1.0
                };
                // the VM's law split over its n connections: the constant step (rcos - 1) too, so
                // that n connections below their guarantee recover together as one would
                if lost || c.marked > 0 {
                    c.ss = false;
                }
                c.w = if lost {
                    c.w / 2.0
                } else if c.marked > 0 {
                    c.w * (1.0 - c.alpha / 2.0).powf(rtts)
                } else if c.w < w_min {
                    (f.rcos + 1.0) * c.w / 2.0 + (f.rcos - 1.0 + omega) / n
                } else if c.full && c.ss {
                    c.w * 2f64.powf(rtts)
                } else if c.full {
                    c.w + om * rtts
                } else {
                    c.w
                }
                .clamp(MIN_LAW_WND, cap.max(1.0));
            }
            c.acks = 0;
            c.marked = 0;
            c.full = false;
            c.round_start = now;
            c.round_end = now.saturating_add(c.srtt_ps as u64);
        }
        // the law's window; below one segment the guest keeps one and the host paces the VM
        c.x = c.w.max(w_min).min(cap);
        c.rtt_ps = c.srtt_ps.max(c.base_ps as f64);
        // `prio`: at the guarantee's floor, the connection asks for the high level
        c.want_high = f.prio && theta > 0.0 && c.w <= w_min;
        // a fractional window as the average of the whole ones imposed ACK after ACK (rounding each
        // of k connections up would add up to k segments to the VM's window)
        let x = c.x.max(1.0);
        c.dither += x.fract();
        let whole = if c.dither >= 1.0 {
            c.dither -= 1.0;
            x.ceil()
        } else {
            x.floor()
        };
        let r = c.rtt_ps as u64;
        if vm_lost {
            self.halve(vm, r, idle, now);
        }
        self.set_pace(vm, theta, seg_bits, idle, now);
        let whole = whole.max(1.0) as u64;
        if !f.turns {
            return Some(whole);
        }
        let budget = Budget {
            n,
            segs: f.queue_cap().min(at_share),
            rotation_ps: (n * seg_bits / share * PS_PER_S) as u64,
            grace_ps: ((base_s + f.queue_ns as f64 / 1e9) * PS_PER_S) as u64,
        };
        Some(self.take_turn(vm, pkt.flow, budget, whole, idle, now))
    }

    /// Turns (`turns`, module docstring) at an ACK of connection `flow` of VM `vm`: while the VM's
    /// live connections outnumber the segments of its host-queue cap (`b.segs`), the ACK keeps
    /// `flow`'s window `whole` only if a place is free (fewer than that many of the VM's other
    /// connections hold one) and no one waits; else `flow` waits (window 0) and the free places go
    /// to the longest waiting connections. Returns the window for `flow`.
    fn take_turn(&mut self, vm: u32, flow: u32, b: Budget, whole: u64, idle: u64, now: u64) -> u64 {
        let Some(c) = self.conns.get_mut(&flow) else {
            return whole;
        };
        if c.waiting.is_some() {
            return 0; // an ACK of what it had out before it began to wait
        }
        c.moved = now;
        if b.n <= b.segs {
            // the floors fit: whoever waits gets its turn
            self.give_turns(vm, usize::MAX, now);
            return whole;
        }
        let k = b.segs.floor().max(1.0) as usize;
        // the VM's other connections holding a turn: an ACK or a turn lately and no segment left
        // the host since (its next segment waits in the host queue or is on its way there; one
        // out beyond the host holds no place in the VM's host queue, and at a congested receiver
        // it would hold a turn for many RTTs), and the connections with a window granted at their
        // start and no record yet
        let opening = self
            .opening
            .iter()
            .filter(|(id, (v, _, _))| *v == vm && !self.conns.contains_key(id))
            .count();
        let holding = self
            .conns
            .iter()
            .filter(|(id, c)| {
                c.vm == vm
                    && **id != flow
                    && c.waiting.is_none()
                    && !self.opening.contains_key(id)
                    && c.alive(idle, now)
                    && c.last_sent < c.moved
                    && now < c.moved.saturating_add(b.grace_ps)
            })
            .count()
            + opening;
        let queue = self.vms.get(&vm).map_or(0, |s| s.turns.len());
        if holding < k && queue == 0 {
            return whole;
        }
        let deadline = now
            .saturating_add(b.rotation_ps.saturating_mul(2))
            .saturating_add(b.grace_ps);
        self.wait_turn(vm, flow, deadline, now);
        self.give_turns(vm, k.saturating_sub(holding), now);
        if self.turn_given.contains(&flow) {
            // its own turn came straight back (no one else waited)
            self.turn_given.remove(&flow);
            return whole;
        }
        0
    }

    /// The segments granted at their start to VM `vm`'s connections not acknowledged yet.
    fn granted(&self, vm: u32) -> u64 {
        self.opening
            .values()
            .filter(|(v, _, _)| *v == vm)
            .map(|(_, w, _)| w)
            .sum()
    }

    /// VM `vm`'s port share (bit/s): its share in the last solve, or, not in it, its share in the
    /// optimum of the VMs of the last solve and it.
    fn share_estimate(&self, vm: u32) -> f64 {
        if let Some(s) = self.vms.get(&vm).filter(|_| self.solved.contains(&vm)) {
            return s.share_bps.max(1.0);
        }
        let pairs: Vec<Pair> = self
            .solved
            .iter()
            .chain([&vm])
            .map(|&v| self.pair(v))
            .collect();
        let x = self.shares(&pairs);
        x.last().copied().unwrap_or(self.port_bps).max(1.0)
    }

    /// Gives up to `m` of VM `vm`'s waiting connections their turn now, longest waiting first.
    fn give_turns(&mut self, vm: u32, m: usize, now: u64) {
        for _ in 0..m {
            let Some(h) = self.vms.get_mut(&vm).and_then(|s| s.turns.pop_front()) else {
                return;
            };
            self.end_wait(vm, h, now);
            self.turn_given.insert(h);
            self.reopen.push((h, now));
        }
    }

    /// Connection `flow` of VM `vm` waits for its turn behind a zero window, until `deadline` at
    /// the latest (the engine looks at it again then).
    fn wait_turn(&mut self, vm: u32, flow: u32, deadline: u64, now: u64) {
        match self.conns.get_mut(&flow) {
            Some(c) => c.waiting = Some(deadline),
            // waiting from its start, before it has a record
            None => {
                self.open_waiting.insert(flow, (vm, deadline));
            }
        }
        self.vm(vm, now).turns.push_back(flow);
        self.reopen.push((flow, deadline));
    }

    /// Connection `flow` of VM `vm` stops waiting at `now`: its window opens (one segment).
    fn end_wait(&mut self, vm: u32, flow: u32, now: u64) {
        if let Some(c) = self.conns.get_mut(&flow) {
            c.waiting = None;
            c.moved = now;
            c.turn_at = now;
        } else if self.open_waiting.remove(&flow).is_some() {
            // a connection that waited from its start: its first segment is a grant
            self.opening.insert(flow, (vm, 1, now));
        }
    }

    /// The law in time (`fluid`) after an ACK of connection `flow` of VM `vm`, `marked` or not:
    /// while the VM is `paced` (one of its connections below one segment), its pacer serves its
    /// connections in turn and each gets an ACK every few RTTs; the VM's ACKs then drive all its
    /// connections (each advanced by the time since the VM's previous ACK, with the VM's marked
    /// share), as one entity. Otherwise each connection's own ACKs drive it (connections through
    /// different bottlenecks see different marks).
    #[allow(clippy::too_many_arguments)]
    fn advance(
        &mut self,
        vm: u32,
        flow: u32,
        step: Step,
        marked: bool,
        paced: bool,
        idle: u64,
        now: u64,
    ) {
        let cap = |c: &ConnState| c.cap.max(1.0);
        let Some(s) = self.vms.get_mut(&vm) else {
            return;
        };
        let since = if s.last_ack > 0 {
            now.saturating_sub(s.last_ack).min(idle)
        } else {
            0
        };
        s.last_ack = now;
        // the VM's window in effect (segments per RTT): pooled, its ACKs come about 1 / X RTTs apart
        let (x_vm, law_rate) = self
            .conns
            .values()
            .filter(|c| c.vm == vm && c.alive(idle, now))
            .fold((0.0, 0.0), |(x, r), c| {
                let per_ps = if c.rtt_ps > 0.0 { c.x / c.rtt_ps } else { 0.0 };
                (x + c.x, r + per_ps)
            });
        // the ACKing connection's interval and what the law did over it (the output's `host_law`)
        let mut stepped = None;
        for (id, c) in self.conns.iter_mut() {
            if c.vm != vm || !(paced || *id == flow) || !c.alive(idle, now) {
                continue;
            }
            let r = c.srtt_ps.max(c.base_ps as f64).max(1.0);
            let own = if paced {
                since
            } else if c.last_ack > 0 {
                now.saturating_sub(c.last_ack).min(idle)
            } else {
                0
            };
            c.last_ack = now;
            // an ACK stands for at most the expected gap between ACKs (at least an RTT): after a
            // silence (the guests waiting for a timeout) the law does not grow over the silence
            let x = if paced { x_vm } else { c.x };
            let rtts = (own as f64 / r).min(1.0 / x.clamp(MIN_LAW_WND, 1.0));
            if marked {
                c.ss = false;
            }
            let used = c.used || c.x < 1.0;
            if *id == flow {
                stepped = Some((own as f64, used));
            }
            c.w = step
                .advance(c.w, rtts, marked, c.ss && used && !marked, used)
                .clamp(MIN_LAW_WND, cap(c));
        }
        if let Some(s) = self.vms.get_mut(&vm) {
            let l = &mut s.law;
            match stepped {
                Some((t, _)) if marked => l.marked_ps += t,
                Some((t, true)) => l.unmarked_ps += t,
                Some((t, false)) => l.unused_ps += t,
                None => {}
            }
            l.law_segments += law_rate * since as f64;
            l.law_ps += since as f64;
        }
    }

    /// `merge` (module docstring): connection `ended`, live until it ended, gives its law window
    /// back to its VM's live connections, in proportion to theirs (the inverse of a join's split).
    /// Without it, the VM lost the window each short connection took at its join: a large
    /// connection halved by a 100 KB one joining it took some 50 RTTs to grow back at omega per
    /// RTT, and the leaf-spine file's VMs, with a large connection and short ones coming and going,
    /// kept the fabric below plain TCP's utilisation.
    fn give_back(&mut self, ended: &ConnState, now: u64) {
        let Some(f) = self
            .p
            .window
            .filter(|f| f.law && f.fluid && f.split && f.merge)
        else {
            return;
        };
        let idle = f.idle_ns.saturating_mul(1000);
        if !ended.alive(idle, now) {
            return;
        }
        let live = |c: &ConnState| c.vm == ended.vm && c.alive(idle, now);
        let sum: f64 = self.conns.values().filter(|c| live(c)).map(|c| c.w).sum();
        if sum <= 0.0 {
            return;
        }
        let grow = (sum + ended.w) / sum;
        for c in self.conns.values_mut().filter(|c| live(c)) {
            c.w *= grow;
        }
    }

    /// A loss at a pooled VM (`pool`): all its connections halve, at most once per RTT `rtt_ps`.
    fn halve(&mut self, vm: u32, rtt_ps: u64, idle: u64, now: u64) {
        let Some(s) = self.vms.get_mut(&vm) else {
            return;
        };
        if s.halved.saturating_add(rtt_ps) > now && s.halved > 0 {
            return;
        }
        s.halved = now;
        for c in self.conns.values_mut() {
            if c.vm == vm && c.alive(idle, now) {
                c.ss = false;
                c.w = (c.w / 2.0).max(MIN_LAW_WND);
            }
        }
    }

    /// The VM's pacer (part 3): while one of its connections has a law window below one segment,
    /// the host releases each of the VM's connections at its law rate (window over RTT), so k
    /// connections at a fabric bottleneck whose fair share is below k segments per RTT together
    /// send what the law gives them, not k segments per RTT (Seawall / EyeQ: a rate limiter per
    /// VM driven by congestion, made of one per connection). Otherwise the windows alone bound
    /// the VM.
    ///
    /// Each connection has its own sub-queue and its own pacer (Seawall's per-destination
    /// tunnels): with one queue per VM, a connection at a congested receiver, paced at a small
    /// fraction of a segment per RTT, held every later connection of its VM to other receivers
    /// behind its one segment (a BE VM of the Clos shuffle kept 100 packets waiting at 66 kb/s).
    /// A connection without an ACK yet is not paced. The pacers together never release less than
    /// the VM's guarantee `theta_bps` (as the port allocation scaled it): the law's floor holds
    /// for each connection (at least theta / n), but connections whose windows were set when the
    /// VM had more of them carry less than theta together until each has had an ACK; their rates
    /// are raised by one factor then.
    fn set_pace(&mut self, vm: u32, theta_bps: f64, seg_bits: f64, idle_ps: u64, now: u64) {
        let mut below = false;
        let mut rate = 0.0;
        let mut gap = 0;
        for c in self.conns.values() {
            if c.vm != vm || !c.alive(idle_ps, now) {
                continue;
            }
            below |= c.x < 1.0;
            if let Some(r) = c.law_rate(seg_bits) {
                rate += r;
                gap = gap.max(c.gap());
            }
        }
        let boost = if rate > 0.0 {
            (theta_bps / rate).max(1.0)
        } else {
            1.0
        };
        let until = now.saturating_add(idle_ps).saturating_add(gap);
        self.vm(vm, now).pace = (below && rate > 0.0).then_some((rate * boost, boost, until));
    }

    /// The VM's pacer at `now`, if it holds: (the VM's rate, its connections' factor).
    fn pacer(&self, vm: u32, now: u64) -> Option<(f64, f64)> {
        self.vms
            .get(&vm)
            .and_then(|s| s.pace)
            .filter(|&(_, _, until)| until > now)
            .map(|(r, b, _)| (r, b))
    }

    /// The VM's pacing rate at `now`, if its pacer holds.
    fn pace_of(&self, vm: u32, now: u64) -> Option<f64> {
        self.pacer(vm, now).map(|(r, _)| r)
    }

    /// When the pacer lets the head of queue `q` leave, if later than `now`.
    fn held_until(&self, q: &VmQueue, now: u64) -> Option<u64> {
        let head = q.fifo.head()?;
        let at = self.conns.get(&head.flow)?.next_send;
        (at > now && self.pacer(q.vm, now).is_some()).then_some(at)
    }

    /// The SFQ tag of queue `q`: its VM's (`per_vm`), else its own.
    fn tag_key(&self, q: &VmQueue) -> (u32, u32) {
        (q.vm, if self.p.per_vm { 0 } else { q.sub })
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
        self.solve(queues, now_ps);
        // start-time fair queueing over the VMs' tags (a tag below the virtual time, as after an
        // idle spell, starts at it: an idle VM banks no credit); within a VM the sub-queue whose
        // head the guest sent first
        let mut best: Option<(f64, u64, usize)> = None;
        for (i, q) in queues.iter().enumerate() {
            if q.fifo.is_empty() || self.held_until(q, now_ps).is_some() {
                continue;
            }
            let tag = self
                .tags
                .get(&self.tag_key(q))
                .map_or(self.vtime, |t| t.max(self.vtime));
            let ts = q.fifo.head().map_or(0, |h| h.ts);
            if best.is_none_or(|(t, s, _)| (tag, ts) < (t, s)) {
                best = Some((tag, ts, i));
            }
        }
        let (tag, _, i) = best?;
        let q = &queues[i];
        let vm = q.vm;
        let x = self.vms.get(&vm).map_or(1.0, |s| s.share_bps);
        if let Some(head) = q.fifo.head() {
            let bits = head.size as f64 * 8.0;
            self.tags.insert(self.tag_key(q), tag + bits / x);
            // a paced connection's next segment waits for its gap at its law rate
            if let (Some(f), Some((_, boost)), Some(c)) = (
                self.p.window,
                self.pacer(vm, now_ps),
                self.conns.get_mut(&head.flow),
            ) {
                if let Some(r) = c.law_rate(f.seg_bits()) {
                    let gap = (bits / (r * boost) * PS_PER_S) as u64;
                    // `pace_credit`: up to one gap of credit (a token bucket one segment deep)
                    let from = if f.pace_credit {
                        now_ps.saturating_sub(gap)
                    } else {
                        now_ps
                    };
                    c.next_send = c.next_send.max(from).saturating_add(gap);
                }
            }
        }
        self.vtime = tag;
        if now_ps >= self.next_tag_prune {
            let v = self.vtime;
            self.tags.retain(|_, t| *t > v);
            self.next_tag_prune = now_ps.saturating_add(self.p.resolve_ps);
        }
        self.serving = Some(vm);
        Some(i)
    }

    fn next_eligible(&self, queues: &[VmQueue], now_ps: u64) -> Option<u64> {
        queues
            .iter()
            .filter(|q| q.sub != ACK_SUB)
            .filter_map(|q| self.held_until(q, now_ps))
            .min()
    }

    fn on_dequeue(&mut self, _idx: usize, pkt: &Pkt, now_ps: u64) {
        let Some(vm) = self.serving.take() else {
            return;
        };
        if pkt.is_ack {
            return;
        }
        let Some(f) = self.p.window else {
            return;
        };
        let idle = f.idle_ns.saturating_mul(1000);
        // a connection that joins a VM with live connections starts at their mean law window (the
        // VM is one entity: opening one more connection does not restart its share at the cap)
        let (n, sum, ss) = self
            .conns
            .values()
            .filter(|c| c.vm == vm && c.alive(idle, now_ps))
            .fold((0u32, 0.0, false), |(n, s, ss), c| {
                (n + 1, s + c.w, ss || c.ss)
            });
        let cap = f.queue_cap().max(2.0);
        let known = self.conns.contains_key(&pkt.flow);
        // the law in time: a join splits the VM's window, it does not add to it (k connections
        // joining one in slow start would multiply the VM's window by k)
        let split = f.fluid && f.split && n > 0 && !known;
        let w0 = if split {
            sum / f64::from(n + 1)
        } else if n > 0 {
            sum / f64::from(n)
        } else {
            cap
        };
        if split {
            let keep = f64::from(n) / f64::from(n + 1);
            for c in self.conns.values_mut() {
                if c.vm == vm && c.alive(idle, now_ps) {
                    c.w *= keep;
                }
            }
        }
        // the VM's first connection: its window is set at its first ACK (`start`)
        let first = n == 0 && f.start;
        // `prio`: a connection of a VM with a guarantee opens at its floor, at the high level
        let theta_pos = f.prio && self.pair(vm).theta_bps > 0.0;
        let c = self.conns.entry(pkt.flow).or_insert_with(|| ConnState {
            vm,
            sent: std::collections::VecDeque::new(),
            hi: 0,
            last_sent: now_ps,
            base_ps: u64::MAX,
            srtt_ps: 0.0,
            w: w0,
            x: w0,
            rtt_ps: 0.0,
            alpha: ALPHA_INIT,
            round_end: 0,
            acks: 0,
            marked: 0,
            round_start: now_ps,
            full: false,
            dither: 0.0,
            opened: !first,
            ss: first || ss,
            lost: false,
            una: pkt.seq,
            last_ack: 0,
            used: false,
            cap: w0,
            next_send: 0,
            waiting: None,
            moved: now_ps,
            turn_at: 0,
            want_high: theta_pos,
            high: false,
            low_hi: 0,
        });
        // a segment below the highest sent is a retransmission: the guest lost one
        if known && pkt.seq < c.hi {
            c.lost = true;
        }
        if c.sent.len() >= MAX_SENT {
            c.sent.pop_front();
        }
        c.sent.push_back((pkt.ts, now_ps));
        c.hi = c.hi.max(pkt.seq + 1);
        c.last_sent = now_ps;
    }

    fn class_of(&mut self, pkt: &Pkt, _now_ps: u64) -> Option<u8> {
        if pkt.is_ack || !self.p.window.is_some_and(|f| f.prio) {
            return None;
        }
        let c = self.conns.get_mut(&pkt.flow)?;
        // up only once nothing it sent at the low level is unacknowledged, so that its high
        // segments never overtake its low ones (its guest would take that for a loss); down at once
        // (a later segment at the low level cannot overtake an earlier one at the high level)
        if c.want_high && (c.high || c.una >= c.low_hi) {
            c.high = true;
            return Some(0);
        }
        c.high = false;
        c.low_hi = c.low_hi.max(pkt.seq + 1);
        Some(1)
    }

    fn on_ack_in(&mut self, pkt: &Pkt, base_ps: u64, now_ps: u64) -> Option<u64> {
        let f = self.p.window?;
        self.window(f, pkt, base_ps, now_ps)
    }

    fn next_reopen(&mut self) -> Option<(u32, u64)> {
        self.reopen.pop()
    }

    fn on_reopen(&mut self, flow: u32, now_ps: u64) -> Option<u64> {
        if self.turn_given.remove(&flow) {
            return Some(1);
        }
        // its deadline: still waiting, it gets its window back anyway
        let (vm, deadline) = match self.open_waiting.get(&flow) {
            Some(&w) => w,
            None => {
                let c = self.conns.get(&flow)?;
                (c.vm, c.waiting?)
            }
        };
        if deadline > now_ps {
            return None;
        }
        if let Some(s) = self.vms.get_mut(&vm) {
            s.turns.retain(|&h| h != flow);
        }
        self.end_wait(vm, flow, now_ps);
        Some(1)
    }

    fn drops_copies(&self) -> bool {
        self.p.window.is_some_and(|f| f.dedup)
    }

    fn stale(&self, pkt: &Pkt) -> bool {
        !pkt.is_ack && self.conns.get(&pkt.flow).is_some_and(|c| pkt.seq < c.una)
    }

    fn wants_acks(&self) -> bool {
        self.p.window.is_some()
    }

    fn law_counters(&self) -> Vec<(u32, LawCounters)> {
        self.vms
            .iter()
            .filter(|(_, s)| s.law.samples > 0 || s.law.law_ps > 0.0)
            .map(|(v, s)| (*v, s.law))
            .collect()
    }

    fn subqueue(&self, pkt: &Pkt) -> u32 {
        // a sub-queue per connection: for its own pacer (the law on) or its own weight (not
        // `per_vm`, ablation); else one queue per VM
        if pkt.is_ack {
            ACK_SUB
        } else if !self.p.per_vm || self.p.window.is_some_and(|f| f.law) {
            pkt.flow
        } else {
            0
        }
    }

    fn recycles_slots(&self) -> bool {
        true
    }

    /// A connection that ended leaves its VM's split at once. Counted until `idle_ns` after its
    /// last segment (the rule for a silent one), a 34 KB connection that had ended held half its
    /// VM's guarantee for a millisecond: the VM's one other connection, 12.5 MB, carried 4.6 Gb/s of
    /// a 5 Gb/s guarantee in that window (leaf-spine file, 80 %, seed 2).
    fn on_flow_end(&mut self, flow: u32, now_ps: u64) {
        self.opening.remove(&flow);
        self.turn_given.remove(&flow);
        // a connection in its VM's turns has a record or waits from its start
        let vm = match self.conns.remove(&flow) {
            Some(c) => {
                self.give_back(&c, now_ps);
                Some(c.vm)
            }
            None => self.open_waiting.remove(&flow).map(|(v, _)| v),
        };
        if let Some(s) = vm.and_then(|v| self.vms.get_mut(&v)) {
            s.turns.retain(|&h| h != flow);
        }
    }

    /// The host-queue cap from a connection's start (before it has an ACK to carry a window): it
    /// may put into its VM's host queue what is left of the VM's part of it (90 %, and `queue_ns`
    /// at the VM's port share) after the packets waiting there and the windows of the VM's other
    /// connections still opening, at least one segment. Without it, 24 connections of a VM
    /// opening at once on a dropping host queue (`host_backpressure = false`) put their initial
    /// windows into it, lost segments there and waited for their timeouts (the generalisation
    /// file's gold at 0.9x).
    fn on_flow_start(
        &mut self,
        queues: &[VmQueue],
        flow: u32,
        vm: u32,
        now_ps: u64,
    ) -> Option<u64> {
        let f = self.p.window?;
        let idle = f.idle_ns.saturating_mul(1000);
        self.opening
            .retain(|_, &mut (_, _, at)| at.saturating_add(idle) > now_ps);
        let waiting: u64 = queues
            .iter()
            .filter(|q| q.vm == vm && q.sub != ACK_SUB)
            .map(|q| q.fifo.len() as u64)
            .sum();
        let opening = self.granted(vm);
        let x = self.share_estimate(vm);
        let budget = f.queue_segs(x).max(1.0);
        if f.law && f.turns {
            // turns from the start: a VM whose host queue already holds its `queue_ns` at its
            // share (a first segment would wait past the guests' initial RTO behind it) opens the
            // connection at a zero window, to wait for its turn
            let held = waiting as f64;
            if held >= budget {
                let rotation = (held + 1.0) * f.seg_bits() / x * PS_PER_S;
                let deadline = now_ps
                    .saturating_add((2.0 * rotation) as u64)
                    .saturating_add(f.queue_ns.saturating_mul(1000));
                self.wait_turn(vm, flow, deadline, now_ps);
                return Some(0);
            }
        }
        // what is left of the VM's host-queue cap: 90 % of its queue, and `queue_ns` at its share
        // (with the 90 % alone, a 58 Mb/s VM's connections opening one after the other each put
        // their initial window of 10 segments into its queue whenever it had drained below its
        // 2.4: the connections waiting for their turn behind those segments waited past their
        // guests' 3 ms initial RTO, held-out file compare-unseen-5host)
        let room = f.queue_cap().min(budget).floor() as u64;
        let w = room.saturating_sub(waiting + opening).max(1);
        self.opening.insert(flow, (vm, w, now_ps));
        Some(w)
    }
}

/// Parses `{"kind": "paccp_host", "vms": {id: {theta_bps, omega, port_bps}}, "alloc", "per_vm",
/// "hold_ns", "resolve_ns", "window": null | {law, queue_pkts, mark_ns, queue_ns, rcos, mss_bytes,
/// idle_ns}}`.
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
    if let Some(f) = cfg.window {
        if f.queue_pkts == 0
            || f.mss_bytes == 0
            || f.idle_ns == 0
            || f.rcos.is_nan()
            || f.rcos <= 1.0
        {
            return Err(EngineError::invalid(
                format!("{field}.window"),
                "needs queue_pkts > 0, mss_bytes > 0, idle_ns > 0 and rcos > 1",
            ));
        }
        if f.prio && !f.law {
            // the law says which connections are at their floor
            return Err(EngineError::invalid(
                format!("{field}.window.prio"),
                "needs law = true",
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
        retag: cfg.retag,
        hold_ps: cfg.hold_ns.saturating_mul(1000),
        resolve_ps: cfg.resolve_ns.saturating_mul(1000),
        window: cfg.window,
    };
    let purchases = Rc::new(purchases);
    Ok(Box::new(move |host| match ports.get(&host) {
        None => AnySelector::RoundRobin(super::RoundRobin::default()),
        Some(&port) => AnySelector::Custom(Box::new(PaccpHost::new(
            p,
            port as f64,
            Rc::clone(&purchases),
        ))),
    }))
}

/// The key of VM `vm`'s packets at a host queue (tests).
#[cfg(test)]
fn key(vm: u32) -> crate::net::QKey {
    crate::net::QKey { class: 0, vm }
}

#[cfg(test)]
mod tests;
