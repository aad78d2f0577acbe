//! Topologies: nodes, full-duplex links as pairs of channels, and per-flow routes.
use crate::config::{BufCfg, NodeKind, RoutingCfg, TopologyCfg};
use crate::error::{EngineError, Result};
use crate::rng::mix64;
use crate::units::{Bps, Ps};
use std::collections::HashMap;

/// One direction of a link: a drop-tail output queue, serialisation and propagation.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    /// `"a->b"`.
    pub name: String,
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// Rate.
    pub rate: Bps,
    /// Propagation delay.
    pub delay: Ps,
    /// Queue limit.
    pub buffer: BufCfg,
}

/// A built network.
#[derive(Debug, Clone)]
pub struct Network {
    /// Node names.
    pub names: Vec<String>,
    /// Node kinds.
    pub kinds: Vec<NodeKind>,
    /// Name -> node index.
    pub by_name: HashMap<String, u32>,
    /// Channels.
    pub channels: Vec<ChannelSpec>,
    /// Outgoing channels of each node.
    pub out: Vec<Vec<u32>>,
    /// Leaf-spine shape (leaves, spines, hosts per leaf) when the topology is a leaf-spine.
    pub leaf_spine: Option<(u32, u32, u32)>,
    /// Leaf index of each host (leaf-spine), or the router side (dumbbell: 0 left, 1 right).
    pub host_group: Vec<Option<u32>>,
}

fn check_buf(field: &str, b: &BufCfg) -> Result<()> {
    match b {
        BufCfg::Packets(0) | BufCfg::Bytes(0) => Err(EngineError::invalid(field, "must be > 0")),
        _ => Ok(()),
    }
}

fn check_link(field: &str, rate: u64, buf: &BufCfg) -> Result<()> {
    if rate == 0 {
        return Err(EngineError::invalid(
            format!("{field}.rate_bps"),
            "must be > 0",
        ));
    }
    check_buf(&format!("{field}.buffer"), buf)
}

struct Builder {
    net: Network,
    nic: BufCfg,
}

impl Builder {
    fn node(
        &mut self,
        name: String,
        kind: NodeKind,
        group: Option<u32>,
        field: &str,
    ) -> Result<u32> {
        if self.net.by_name.contains_key(&name) {
            return Err(EngineError::invalid(
                field,
                format!("duplicate node name '{name}'"),
            ));
        }
        let id = self.net.names.len() as u32;
        self.net.by_name.insert(name.clone(), id);
        self.net.names.push(name);
        self.net.kinds.push(kind);
        self.net.out.push(Vec::new());
        self.net.host_group.push(group);
        Ok(id)
    }

    fn link(&mut self, a: u32, b: u32, rate: u64, delay_ns: u64, buf: BufCfg) {
        for (x, y) in [(a, b), (b, a)] {
            let buffer = if self.net.kinds[x as usize] == NodeKind::Host {
                self.nic
            } else {
                buf
            };
            let id = self.net.channels.len() as u32;
            self.net.channels.push(ChannelSpec {
                name: format!(
                    "{}->{}",
                    self.net.names[x as usize], self.net.names[y as usize]
                ),
                from: x,
                to: y,
                rate: Bps(rate),
                delay: Ps::from_ns(delay_ns),
                buffer,
            });
            self.net.out[x as usize].push(id);
        }
    }
}

impl Network {
    /// Builds the network of a topology description.
    pub fn build(t: &TopologyCfg) -> Result<Network> {
        let empty = Network {
            names: Vec::new(),
            kinds: Vec::new(),
            by_name: HashMap::new(),
            channels: Vec::new(),
            out: Vec::new(),
            leaf_spine: None,
            host_group: Vec::new(),
        };
        match t {
            TopologyCfg::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                host_link,
                fabric_link,
                nic_buffer,
            } => {
                let f = "topology";
                if *leaves == 0 || *spines == 0 || *hosts_per_leaf == 0 {
                    return Err(EngineError::invalid(
                        f,
                        "leaves, spines and hosts_per_leaf must be > 0",
                    ));
                }
                check_link("topology.host_link", host_link.rate_bps, &host_link.buffer)?;
                check_link(
                    "topology.fabric_link",
                    fabric_link.rate_bps,
                    &fabric_link.buffer,
                )?;
                check_buf("topology.nic_buffer", nic_buffer)?;
                let mut b = Builder {
                    net: empty,
                    nic: *nic_buffer,
                };
                let nh = leaves * hosts_per_leaf;
                for i in 0..nh {
                    b.node(format!("h{i}"), NodeKind::Host, Some(i / hosts_per_leaf), f)?;
                }
                for l in 0..*leaves {
                    b.node(format!("leaf{l}"), NodeKind::Switch, None, f)?;
                }
                for s in 0..*spines {
                    b.node(format!("spine{s}"), NodeKind::Switch, None, f)?;
                }
                for i in 0..nh {
                    let leaf = nh + i / hosts_per_leaf;
                    b.link(
                        i,
                        leaf,
                        host_link.rate_bps,
                        host_link.delay_ns,
                        host_link.buffer,
                    );
                }
                for l in 0..*leaves {
                    for s in 0..*spines {
                        b.link(
                            nh + l,
                            nh + leaves + s,
                            fabric_link.rate_bps,
                            fabric_link.delay_ns,
                            fabric_link.buffer,
                        );
                    }
                }
                b.net.leaf_spine = Some((*leaves, *spines, *hosts_per_leaf));
                Ok(b.net)
            }
            TopologyCfg::Dumbbell {
                left_hosts,
                right_hosts,
                access_link,
                bottleneck_link,
                nic_buffer,
            } => {
                let f = "topology";
                if *left_hosts == 0 || *right_hosts == 0 {
                    return Err(EngineError::invalid(
                        f,
                        "left_hosts and right_hosts must be > 0",
                    ));
                }
                check_link(
                    "topology.access_link",
                    access_link.rate_bps,
                    &access_link.buffer,
                )?;
                check_link(
                    "topology.bottleneck_link",
                    bottleneck_link.rate_bps,
                    &bottleneck_link.buffer,
                )?;
                check_buf("topology.nic_buffer", nic_buffer)?;
                let mut b = Builder {
                    net: empty,
                    nic: *nic_buffer,
                };
                let mut left = Vec::new();
                let mut right = Vec::new();
                for i in 0..*left_hosts {
                    left.push(b.node(format!("l{i}"), NodeKind::Host, Some(0), f)?);
                }
                for i in 0..*right_hosts {
                    right.push(b.node(format!("r{i}"), NodeKind::Host, Some(1), f)?);
                }
                let lr = b.node("left".into(), NodeKind::Switch, None, f)?;
                let rr = b.node("right".into(), NodeKind::Switch, None, f)?;
                for h in left {
                    b.link(
                        h,
                        lr,
                        access_link.rate_bps,
                        access_link.delay_ns,
                        access_link.buffer,
                    );
                }
                for h in right {
                    b.link(
                        h,
                        rr,
                        access_link.rate_bps,
                        access_link.delay_ns,
                        access_link.buffer,
                    );
                }
                b.link(
                    lr,
                    rr,
                    bottleneck_link.rate_bps,
                    bottleneck_link.delay_ns,
                    bottleneck_link.buffer,
                );
                Ok(b.net)
            }
            TopologyCfg::Explicit {
                nodes,
                links,
                nic_buffer,
            } => {
                check_buf("topology.nic_buffer", nic_buffer)?;
                let mut b = Builder {
                    net: empty,
                    nic: *nic_buffer,
                };
                for (i, n) in nodes.iter().enumerate() {
                    if n.name.is_empty() {
                        return Err(EngineError::invalid(
                            format!("topology.nodes[{i}].name"),
                            "is empty",
                        ));
                    }
                    b.node(
                        n.name.clone(),
                        n.kind,
                        None,
                        &format!("topology.nodes[{i}].name"),
                    )?;
                }
                for (i, l) in links.iter().enumerate() {
                    let f = format!("topology.links[{i}]");
                    let a = *b.net.by_name.get(&l.a).ok_or_else(|| {
                        EngineError::invalid(format!("{f}.a"), format!("unknown node '{}'", l.a))
                    })?;
                    let c = *b.net.by_name.get(&l.b).ok_or_else(|| {
                        EngineError::invalid(format!("{f}.b"), format!("unknown node '{}'", l.b))
                    })?;
                    if a == c {
                        return Err(EngineError::invalid(f, "a link joins a node to itself"));
                    }
                    check_link(&f, l.rate_bps, &l.buffer)?;
                    b.link(a, c, l.rate_bps, l.delay_ns, l.buffer);
                }
                for (i, n) in nodes.iter().enumerate() {
                    if n.kind == NodeKind::Host && b.net.out[i].len() != 1 {
                        return Err(EngineError::invalid(
                            format!("topology.nodes[{i}]"),
                            format!(
                                "host '{}' must have exactly one link (has {})",
                                n.name,
                                b.net.out[i].len()
                            ),
                        ));
                    }
                }
                Ok(b.net)
            }
        }
    }

    /// Index of the node named `name`.
    pub fn node(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Whether node `n` is a host.
    pub fn is_host(&self, n: u32) -> bool {
        self.kinds[n as usize] == NodeKind::Host
    }

    /// Leaf of host `h` in a leaf-spine (None otherwise).
    pub fn leaf_of(&self, h: u32) -> Option<u32> {
        self.leaf_spine.and(self.host_group[h as usize])
    }

    /// Hop distances to `dst` (u32::MAX = unreachable); paths traverse switches only.
    fn distances_to(&self, dst: u32) -> Vec<u32> {
        let n = self.names.len();
        let mut dist = vec![u32::MAX; n];
        dist[dst as usize] = 0;
        let mut frontier = vec![dst];
        // Incoming neighbours: channels x->y where y is in the frontier. Links are symmetric, so the
        // outgoing channels of y give the neighbours.
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for &y in &frontier {
                if y != dst && self.is_host(y) {
                    continue;
                }
                for &c in &self.out[y as usize] {
                    let x = self.channels[c as usize].to;
                    if dist[x as usize] == u32::MAX {
                        dist[x as usize] = dist[y as usize] + 1;
                        next.push(x);
                    }
                }
            }
            frontier = next;
        }
        dist
    }

    /// Channel from `a` to `b` (first one if parallel links exist).
    fn channel_between(&self, a: u32, b: u32) -> Option<u32> {
        self.out[a as usize]
            .iter()
            .copied()
            .find(|&c| self.channels[c as usize].to == b)
    }
}

/// Computes routes, caching shortest-path distances per destination *attachment*: a host has exactly
/// one link, so its distances are those of its neighbour plus one (itself 0). One table per switch a
/// host hangs off (120 on a 10,000-host leaf-spine) instead of one per destination host (10,000 tables
/// of 10,120 entries, 400 MB, rebuilt by a BFS each).
#[derive(Debug)]
pub struct Router {
    kind: RoutingCfg,
    dist: Vec<Option<Vec<u32>>>,
    /// The far end of each of a node's outgoing channels, in link order: a hop's candidates are read
    /// from one short array, not from the channels' specs (120 of them at a 10,000-host fabric's leaf,
    /// rarely in cache when a flow arrives).
    out_to: Vec<Vec<u32>>,
}

/// Hop distance of `x` to host `dst` whose neighbour's distance table is `via`.
#[inline]
fn dist_to_host(via: &[u32], dst: u32, x: u32) -> u32 {
    if x == dst {
        0
    } else {
        via[x as usize].saturating_add(1)
    }
}

impl Router {
    /// A router for `net`; checks that `leaf_spine_paper` applies.
    pub fn new(kind: RoutingCfg, net: &Network) -> Result<Router> {
        if let RoutingCfg::LeafSpinePaper = kind {
            match net.leaf_spine {
                None => {
                    return Err(EngineError::invalid(
                        "routing.kind",
                        "leaf_spine_paper needs a leaf_spine topology",
                    ))
                }
                Some((l, s, _)) if s + 1 < l => {
                    return Err(EngineError::invalid(
                        "routing.kind",
                        format!(
                            "leaf_spine_paper needs spines >= leaves - 1 (leaves {l}, spines {s})"
                        ),
                    ))
                }
                _ => {}
            }
        }
        let out_to = net
            .out
            .iter()
            .map(|cs| cs.iter().map(|&c| net.channels[c as usize].to).collect())
            .collect();
        Ok(Router {
            kind,
            dist: vec![None; net.names.len()],
            out_to,
        })
    }

    /// The channels from host `src` to host `dst`; `hash` is the flow's ECMP hash. With `path = Some(k)`
    /// every hop with several equal-cost next hops takes the `k mod n`-th of them (in the node's link
    /// order) instead of a hashed one, so k = 0 .. M - 1 are disjoint paths on a leaf-spine or a Clos
    /// (an MPTCP connection's WC subflow k). `leaf_spine_paper` routing has one path and ignores it.
    pub fn route(
        &mut self,
        net: &Network,
        src: u32,
        dst: u32,
        hash: u64,
        path: Option<u32>,
    ) -> Option<Vec<u32>> {
        if let (RoutingCfg::LeafSpinePaper, Some((l, _, h))) = (self.kind, net.leaf_spine) {
            let (s, d) = (net.leaf_of(src)?, net.leaf_of(dst)?);
            let nh = l * h;
            let (ls, ld) = (nh + s, nh + d);
            let mut r = vec![net.channel_between(src, ls)?];
            if s != d {
                let spine = nh + l + ((d + l - s) % l) - 1;
                r.push(net.channel_between(ls, spine)?);
                r.push(net.channel_between(spine, ld)?);
            }
            r.push(net.channel_between(ld, dst)?);
            return Some(r);
        }
        // A host's single neighbour (hosts have exactly one link: built that way or validated).
        let anchor = net.channels[*net.out[dst as usize].first()? as usize].to;
        if self.dist[anchor as usize].is_none() {
            self.dist[anchor as usize] = Some(net.distances_to(anchor));
        }
        let via = self.dist[anchor as usize].as_ref()?;
        let d = |x: u32| dist_to_host(via, dst, x);
        if d(src) == u32::MAX {
            return None;
        }
        let mut r = Vec::new();
        let mut at = src;
        let mut cands: Vec<usize> = Vec::new();
        while at != dst {
            cands.clear();
            let here = d(at);
            for (i, &to) in self.out_to[at as usize].iter().enumerate() {
                if d(to) != u32::MAX && d(to) + 1 == here && (to == dst || !net.is_host(to)) {
                    cands.push(i);
                }
            }
            if cands.is_empty() {
                return None;
            }
            let pick = match path {
                Some(k) => k as usize % cands.len(),
                None => {
                    (mix64(hash ^ (at as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
                        % cands.len() as u64) as usize
                }
            };
            r.push(net.out[at as usize][cands[pick]]);
            at = self.out_to[at as usize][cands[pick]];
        }
        Some(r)
    }
}
