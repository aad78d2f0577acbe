//! The engine's input, parsed from the JSON of docs/engine-contract.md (unknown keys are errors).
use schemars::JsonSchema;
use serde::Deserialize;

/// One fully resolved scenario.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Master seed of every random stream.
    pub seed: u64,
    /// Simulated duration in ns.
    pub duration_ns: u64,
    /// Packet sizes.
    pub packet: PacketCfg,
    /// TCP parameters.
    pub transport: TransportCfg,
    /// Congestion control: an object with a `kind` (`reno`, `paccp`, or a registered scheme) and that
    /// scheme's parameters, read by the scheme's own parser (`crate::cc`).
    pub cc: serde_json::Value,
    /// The network.
    pub topology: TopologyCfg,
    /// Path selection.
    pub routing: RoutingCfg,
    /// Virtual machines (VBP pairs).
    #[serde(default)]
    pub vms: Vec<VmCfg>,
    /// Fixed flows.
    #[serde(default)]
    pub flows: Vec<FlowCfg>,
    /// Generators of finite flows.
    #[serde(default)]
    pub arrivals: Vec<ArrivalCfg>,
    /// What to sample.
    pub sampling: SamplingCfg,
    /// Queue disciplines (optional; absent = FIFO drop-tail everywhere, as before they existed).
    #[serde(default)]
    pub queues: QueuesCfg,
    /// Multipath connections over fixed flows (optional; `crate::transport::conn`).
    #[serde(default)]
    pub connections: Vec<ConnCfg>,
}

/// A connection: one byte stream over several subflows (fixed flows with `size_bytes` null).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnCfg {
    /// Unique id.
    pub id: String,
    /// Its subflows in order (the first is the master subflow, BG-first's BG subflow).
    pub subflows: Vec<SubflowCfg>,
    /// Bytes of the stream; `null` = unlimited.
    pub size_bytes: Option<u64>,
    /// The subflow scheduler: `{"kind": "least_rtt"}`, `{"kind": "bg_first"}` or a registered one.
    pub scheduler: serde_json::Value,
    /// Connection-level receive buffer (bytes; with `dynamic_beta`, the floor of the dynamic size).
    pub receive_buffer_bytes: u64,
    /// Dynamic receive buffer B >= beta * max RTT_i * sum BW_i with this beta (>= 1); null = fixed.
    #[serde(default)]
    pub dynamic_beta: Option<f64>,
    /// Linux MPTCP's penalisation and reinjection when the receive window blocks (default true).
    #[serde(default = "yes")]
    pub penalize: bool,
    /// From this time on the connection hands out no new data (its stream ends at what was handed
    /// out; what is in flight is still delivered). Null: never.
    #[serde(default)]
    pub stop_ns: Option<u64>,
}

/// One subflow of a connection.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubflowCfg {
    /// The id of its fixed flow.
    pub flow: String,
    /// One-way delay added to its data packets after the host NIC (netem-like), from the start.
    #[serde(default)]
    pub extra_delay_ns: u64,
    /// Later values of that delay, in time order.
    #[serde(default)]
    pub delay_steps: Vec<DelayStepCfg>,
}

/// A change of a subflow's extra delay.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelayStepCfg {
    /// When it takes effect.
    pub at_ns: u64,
    /// The new extra delay.
    pub delay_ns: u64,
}

/// Queue disciplines of the host NIC channels and of the switch output channels: objects with a `kind`
/// (`drop_tail`, `strict_priority`, `per_vm`, `shaper` or one registered with
/// [`crate::Registry::register_qdisc`]), read by the discipline's parser (the built-in ones below).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueuesCfg {
    /// Every host's NIC queue (the host egress stage).
    #[serde(default = "drop_tail")]
    pub host: serde_json::Value,
    /// Every switch output queue.
    #[serde(default = "drop_tail")]
    pub switch: serde_json::Value,
}

impl Default for QueuesCfg {
    fn default() -> Self {
        QueuesCfg {
            host: drop_tail(),
            switch: drop_tail(),
        }
    }
}

fn drop_tail() -> serde_json::Value {
    serde_json::json!({"kind": "drop_tail"})
}

/// FIFO drop-tail with the link's (or the NIC's) buffer (`kind = "drop_tail"`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DropTailCfg {
    /// `"drop_tail"`.
    pub kind: String,
}

/// Strict priority (`kind = "strict_priority"`): a packet of class k goes to level min(k, N-1); level 0
/// is served first.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrictPriorityCfg {
    /// `"strict_priority"`.
    pub kind: String,
    /// Drop-tail limit of each level (level 0 first).
    pub levels: Vec<BufCfg>,
    /// RED early drop in front of every level ([`crate::net::red`]; none: drop-tail only).
    #[serde(default)]
    pub red: Option<crate::net::red::RedCfg>,
    /// CE threshold: a packet that finds more than this backlog (all levels, at the channel's
    /// rate) is marked CE, and its ACK echoes it (none: no marking).
    #[serde(default)]
    pub ce_ns: Option<u64>,
    /// The levels share the channel's own buffer (its link's `buffer`): a packet is admitted while
    /// all levels together hold less than it; `levels` then gives only their number.
    #[serde(default)]
    pub shared_buffer: bool,
}

/// One queue per VM (flows without a VM share one), served by a packet selector (`kind = "per_vm"`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerVmCfg {
    /// `"per_vm"`.
    pub kind: String,
    /// Drop-tail limit of each VM's queue.
    pub buffer: BufCfg,
    /// The selector: `{"kind": "round_robin"}` or a registered one.
    pub selector: serde_json::Value,
}

/// Token-bucket rate limiters per class or per VM; other traffic unshaped (`kind = "shaper"`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShaperCfg {
    /// `"shaper"`.
    pub kind: String,
    /// What the buckets are keyed by.
    pub by: ShapeByCfg,
    /// The buckets.
    pub buckets: Vec<BucketCfg>,
    /// Drop-tail limit of the unshaped traffic's FIFO.
    pub unshaped_buffer: BufCfg,
    /// Serve eligible buckets in their listed order before unshaped traffic (default false:
    /// round-robin between every eligible queue).
    #[serde(default)]
    pub priority: bool,
}

/// What shaper buckets are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShapeByCfg {
    /// The packet's class (the flow's `class`).
    Class,
    /// The flow's VM.
    Vm,
}

/// One token bucket.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketCfg {
    /// The class it shapes (with `by = "class"`).
    #[serde(default)]
    pub class: Option<u8>,
    /// The VM it shapes (with `by = "vm"`).
    #[serde(default)]
    pub vm: Option<String>,
    /// Token rate.
    pub rate_bps: u64,
    /// Bucket depth (the largest burst).
    pub burst_bytes: u64,
    /// Drop-tail limit of its queue.
    pub buffer: BufCfg,
}

/// Packet sizes.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PacketCfg {
    /// Size of a full data packet on the wire.
    pub mtu_bytes: u64,
    /// Header bytes of a data packet (MSS = mtu - header).
    pub header_bytes: u64,
    /// Size of an ACK on the wire.
    pub ack_bytes: u64,
}

/// TCP parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransportCfg {
    /// Initial congestion window (segments).
    pub init_cwnd_pkts: f64,
    /// Lower bound of the RTO.
    pub min_rto_ns: u64,
    /// RTO before the first RTT sample.
    pub initial_rto_ns: u64,
    /// Upper bound of the RTO (after backoff).
    pub max_rto_ns: u64,
    /// Acknowledge every second in-order segment (or on timeout).
    pub delayed_ack: bool,
    /// Delayed-ACK timeout.
    pub delayed_ack_timeout_ns: u64,
    /// Duplicate ACKs that trigger fast retransmit.
    pub dupack_threshold: u32,
    /// Selective acknowledgements (RFC 2018 blocks, RFC 6675 recovery; false = NewReno recovery).
    pub sack: bool,
    /// Host backpressure: a sender does not put a new data segment into its
    /// full NIC queue but waits until the NIC dequeues a packet (like Linux TCP small queues), and host
    /// NIC queues never drop: ACKs and fast retransmissions are always accepted (they may exceed the
    /// limit by a few packets).
    pub host_backpressure: bool,
    /// Host fair queuing (0 = off): a flow may hold at most this many data packets in
    /// its host's NIC queue; it sends more only as its own packets are serialised. With several
    /// backlogged flows the NIC then serves them round-robin, this many packets each, and a new flow's
    /// packet waits behind at most that many packets of every other flow of the host (an approximation of
    /// Linux's per-flow qdiscs, fq / fq_codel, over a byte-limited NIC ring; without it the host NIC is one
    /// FIFO shared by all of the host's flows).
    pub host_fq_pkts: u32,
    /// NewReno (`sack` false): Proportional Rate Reduction (RFC 6937, as Linux and ns-3) bounds what a
    /// recovery sends, with limited transmit (RFC 3042) before it; false = RFC 6582 window inflation.
    /// No effect with SACK. Optional, default true (the scenario schema's default too).
    #[serde(default = "yes")]
    pub prr: bool,
    /// SACK (`sack` true): in a recovery, mark losses as Linux's RACK does there (a segment is lost once
    /// a segment sent after it has arrived: one SACKed segment above a hole, and the segments above the
    /// highest SACKed one once a later-sent retransmission is delivered) instead of RFC 6675's IsLost
    /// alone, which never marks a flow's lost last segments. Entering a recovery is unchanged. No
    /// effect without SACK. Optional, default false (the scenario schema's default too).
    #[serde(default)]
    pub rack: bool,
    /// Receiver processing delay (0 = none, the default): every ACK leaves after a delay drawn from
    /// an exponential distribution with this mean, and ACKs that fall due meanwhile are merged into it
    /// (the receiver acknowledges what it holds when it gets to run), as a busy host's kernel does.
    /// Optional; the draws come from the stream `ack_delay/<flow id>`.
    #[serde(default)]
    pub ack_delay_mean_ns: u64,
    /// TCP three-way handshake before the data (`crate::transport::handshake`). Optional: absent or
    /// null = none (the scenario schema's default, `handshake = false`), every flow sends its data at
    /// its start.
    #[serde(default)]
    pub handshake: Option<HandshakeCfg>,
}

/// The TCP three-way handshake (all fields required; the scenario schema has the defaults).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandshakeCfg {
    /// Wire size of a SYN and of a SYN-ACK (bytes).
    pub syn_bytes: u64,
    /// Wait for the SYN-ACK before the first SYN retransmission (doubled before each further one).
    pub connect_timeout_ns: u64,
    /// SYN retransmissions before giving up (Linux `tcp_syn_retries`; ns-3's `ConnCount` - 1).
    pub syn_retries: u32,
}

fn yes() -> bool {
    true
}

fn one() -> f64 {
    1.0
}

/// A queue limit.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BufCfg {
    /// At most this many packets (including the one being serialised).
    Packets(u64),
    /// At most this many bytes (including the packet being serialised).
    Bytes(u64),
}

/// A full-duplex link's parameters.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkCfg {
    /// Rate of each direction.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay_ns: u64,
    /// Output queue of each direction.
    pub buffer: BufCfg,
}

/// A node of an explicit topology.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeCfg {
    /// Unique name.
    pub name: String,
    /// `host` or `switch`.
    pub kind: NodeKind,
}

/// Kind of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// An end host (sends and receives; never forwards).
    Host,
    /// A switch (forwards).
    Switch,
}

/// A link of an explicit topology.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplicitLinkCfg {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Rate of each direction.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay_ns: u64,
    /// Output queue of each direction.
    pub buffer: BufCfg,
}

/// The network.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologyCfg {
    /// Two-tier leaf-spine.
    LeafSpine {
        /// Number of leaves.
        leaves: u32,
        /// Number of spines.
        spines: u32,
        /// Hosts under each leaf.
        hosts_per_leaf: u32,
        /// Host-leaf links.
        host_link: LinkCfg,
        /// Leaf-spine links.
        fabric_link: LinkCfg,
        /// Host NIC queue.
        nic_buffer: BufCfg,
    },
    /// Dumbbell: left hosts - left router - right router - right hosts.
    Dumbbell {
        /// Hosts on the left.
        left_hosts: u32,
        /// Hosts on the right.
        right_hosts: u32,
        /// Host-router links.
        access_link: LinkCfg,
        /// Router-router link.
        bottleneck_link: LinkCfg,
        /// Host NIC queue.
        nic_buffer: BufCfg,
    },
    /// Any graph of hosts and switches.
    Explicit {
        /// Nodes.
        nodes: Vec<NodeCfg>,
        /// Links.
        links: Vec<ExplicitLinkCfg>,
        /// Host NIC queue.
        nic_buffer: BufCfg,
    },
}

/// Path selection.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RoutingCfg {
    /// Per-flow ECMP over hop-count shortest paths.
    Ecmp,
    /// Leaf s to leaf d through spine ((d - s) mod L) - 1 (leaf-spine only).
    LeafSpinePaper,
}

/// A virtual machine with a VBP pair.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VmCfg {
    /// Unique id.
    pub id: String,
    /// Host it runs on.
    pub host: String,
    /// Class label.
    pub label: String,
    /// Minimum rate of the whole VM.
    pub theta_bps: u64,
    /// Weight of the whole VM.
    pub omega: f64,
}

/// A scheduled FBP change.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeCfg {
    /// When it takes effect.
    pub at_ns: u64,
    /// New minimum rate.
    pub theta_bps: u64,
    /// New weight.
    pub omega: f64,
}

/// A fixed flow.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowCfg {
    /// Unique id.
    pub id: String,
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Bytes to send; `null` = unlimited.
    pub size_bytes: Option<u64>,
    /// Start time.
    pub start_ns: u64,
    /// Minimum rate (FBP).
    #[serde(default)]
    pub theta_bps: u64,
    /// Weight (FBP).
    #[serde(default = "one")]
    pub omega: f64,
    /// VM whose pair it shares (VBP), or null.
    #[serde(default)]
    pub vm: Option<String>,
    /// Free-text class label (required: the schema's default depends on the class).
    pub label: String,
    /// Scheduled FBP changes.
    #[serde(default)]
    pub changes: Vec<ChangeCfg>,
    /// Class / mark of its packets (optional, default 0): the level of a strict-priority queue, the
    /// key of a class shaper.
    #[serde(default)]
    pub class: u8,
    /// Its own congestion control (a `cc` object), instead of the scenario's (e.g. a subflow's).
    #[serde(default)]
    pub cc: Option<serde_json::Value>,
    /// Take the routes of this earlier flow instead of an ECMP draw (a subflow on its sibling's path).
    #[serde(default)]
    pub same_path_as: Option<String>,
    /// A constant-bit-rate (UDP-like) flow at this rate instead of TCP.
    #[serde(default)]
    pub cbr_bps: Option<u64>,
    /// From this time on the flow takes no new data (a connection's subflow: null, the connection
    /// has the stop time).
    #[serde(default)]
    pub stop_ns: Option<u64>,
    /// The k-th of the equal-cost paths instead of an ECMP draw (k = 0 .. M - 1 disjoint on a
    /// leaf-spine or Clos: one WC subflow per path).
    #[serde(default)]
    pub path: Option<u32>,
}

/// Destination rule of an arrival generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DestRule {
    /// Uniform over hosts under another leaf.
    OtherLeaf,
    /// Uniform over every other host.
    AnyOtherHost,
}

/// One class of a `mix` CoS rule.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CosClass {
    /// Label.
    pub label: String,
    /// Probability.
    pub prob: f64,
    /// Minimum rate.
    pub theta_bps: u64,
    /// Weight.
    pub omega: f64,
}

/// How an arriving flow gets its class.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CosRule {
    /// The VM on the source host (BE (0, 1) if none).
    ByVm,
    /// Drawn from a distribution of classes.
    Mix {
        /// The classes.
        classes: Vec<CosClass>,
    },
}

/// Arrival generator kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalKind {
    /// Exponential gaps.
    Poisson,
}

/// A generator of finite flows.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArrivalCfg {
    /// Kind (only `poisson`).
    pub kind: ArrivalKind,
    /// Prefix of generated flow ids.
    pub id_prefix: String,
    /// Mean arrivals per second.
    pub rate_per_s: f64,
    /// First possible arrival.
    pub start_ns: u64,
    /// No arrival at or after this time.
    pub stop_ns: u64,
    /// Cap on the number of flows.
    #[serde(default)]
    pub max_flows: Option<u64>,
    /// Source hosts.
    pub sources: Vec<String>,
    /// Destination rule.
    pub destination: DestRule,
    /// Size CDF: (bytes, cumulative probability) points.
    pub size_cdf: Vec<(f64, f64)>,
    /// Class rule.
    pub cos: CosRule,
}

/// Which flows are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SampleFlows {
    /// None.
    None,
    /// Flows with unlimited size.
    LongLived,
    /// Every flow.
    All,
}

/// Sampling.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SamplingCfg {
    /// Sampling period.
    pub interval_ns: u64,
    /// Flows to sample.
    pub flows: SampleFlows,
    /// Also sample cwnd and Wmin.
    #[serde(default)]
    pub cwnd: bool,
}
