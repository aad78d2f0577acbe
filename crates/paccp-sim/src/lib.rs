//! PACCP simulation engine: a deterministic packet-level datacenter simulator with the PACCP
//! congestion-control law. Input and output are the JSON documents of `docs/engine-contract.md`.
//!
//! Module map: [`event`] (the clock, the calendar queue, the same-instant order), [`net`] (packets, channels,
//! queue disciplines), [`host`] (the host egress stage: per-VM queues with a packet selector,
//! token-bucket shapers), [`transport`] (TCP sender, receiver, SACK recovery, delayed ACK, RTO),
//! [`cc`] (the congestion-control trait, one file per algorithm), [`workload`] (arrivals),
//! [`metrics`] (samples and output), [`sim`] (the event loop and the flows' life), [`topo`]
//! (topologies and routes), [`config`] (the input), [`contract`] (the input as JSON Schema).
#![warn(missing_docs)]

pub mod cc;
pub mod config;
pub mod contract;
pub mod error;
pub(crate) mod event;
pub mod host;
pub(crate) mod metrics;
pub mod net;
pub(crate) mod prefetch;
pub mod probe;
pub mod rng;
mod sack;
pub mod sim;
pub mod topo;
pub(crate) mod transport;
pub mod units;
pub(crate) mod workload;

use cc::{CcMaker, CcParser};
use host::{SelectorMaker, SelectorParser, VmInfo};
use serde_json::Value;
pub use transport::conn::sched::{SchedulerMaker, SchedulerParser, SubflowScheduler, SubflowView};

pub use error::{EngineError, Result};
pub use net::qdisc::{Pop, Qdisc};
pub use sim::qdiscs::{QdiscCx, QdiscMaker, QdiscParser, QdiscPlace};
pub use sim::{Progress, Simulation};

/// Engine version string.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Hash of the engine's source files (set by `build.rs`): identifies the engine code a result came from.
pub const SOURCE_HASH: &str = env!("PACCP_SIM_SOURCE_HASH");

/// The schemes a scenario may name: congestion controls (`cc.kind`), queue disciplines
/// (`queues.host.kind`, `queues.switch.kind`), host packet selectors (`queues.host.selector.kind`) and
/// subflow schedulers (a connection's `scheduler.kind`). [`Registry::default`] holds the built-in ones; code outside the
/// crate (a test, a binding) registers more without editing the engine.
pub struct Registry {
    cc: Vec<(String, CcParser)>,
    selectors: Vec<(String, SelectorParser)>,
    schedulers: Vec<(String, SchedulerParser)>,
    qdiscs: Vec<(String, QdiscParser)>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            cc: cc::builtin()
                .into_iter()
                .map(|(k, p)| (k.to_string(), p))
                .collect(),
            selectors: host::builtin_selectors()
                .into_iter()
                .map(|(k, p)| (k.to_string(), p))
                .collect(),
            schedulers: transport::conn::sched::builtin()
                .into_iter()
                .map(|(k, p)| (k.to_string(), p))
                .collect(),
            qdiscs: sim::qdiscs::builtin()
                .into_iter()
                .map(|(k, p)| (k.to_string(), p))
                .collect(),
        }
    }
}

fn kind_of<'a>(field: &str, v: &'a Value) -> Result<&'a str> {
    v.get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| EngineError::invalid(format!("{field}.kind"), "missing (a string)"))
}

fn unknown(field: &str, what: &str, kind: &str, known: Vec<&str>) -> EngineError {
    EngineError::invalid(
        format!("{field}.kind"),
        format!("unknown {what} '{kind}' (known: {})", known.join(", ")),
    )
}

impl Registry {
    /// Adds (or replaces) the congestion control `kind`.
    pub fn register_cc(&mut self, kind: &str, parser: CcParser) -> &mut Self {
        self.cc.retain(|(k, _)| k != kind);
        self.cc.push((kind.to_string(), parser));
        self
    }

    /// Adds (or replaces) the host packet selector `kind`.
    pub fn register_selector(&mut self, kind: &str, parser: SelectorParser) -> &mut Self {
        self.selectors.retain(|(k, _)| k != kind);
        self.selectors.push((kind.to_string(), parser));
        self
    }

    /// Adds (or replaces) the subflow scheduler `kind` (of a connection's `scheduler`).
    pub fn register_scheduler(&mut self, kind: &str, parser: SchedulerParser) -> &mut Self {
        self.schedulers.retain(|(k, _)| k != kind);
        self.schedulers.push((kind.to_string(), parser));
        self
    }

    /// Adds (or replaces) the queue discipline `kind` (of `queues.host` / `queues.switch`).
    pub fn register_qdisc(&mut self, kind: &str, parser: QdiscParser) -> &mut Self {
        self.qdiscs.retain(|(k, _)| k != kind);
        self.qdiscs.push((kind.to_string(), parser));
        self
    }

    /// The discipline maker of a queue object (`cx.field`: `queues.host` or `queues.switch`).
    pub fn qdisc_maker(&self, cx: &QdiscCx<'_>, v: &Value) -> Result<QdiscMaker> {
        let kind = kind_of(cx.field, v)?;
        match self.qdiscs.iter().find(|(k, _)| k == kind) {
            Some((_, parse)) => parse(cx, v),
            None => Err(unknown(
                cx.field,
                "queue discipline",
                kind,
                self.qdiscs.iter().map(|(k, _)| k.as_str()).collect(),
            )),
        }
    }

    /// The scheduler maker of a `scheduler` object at `field`.
    pub fn scheduler_maker(&self, field: &str, v: &Value) -> Result<SchedulerMaker> {
        let kind = kind_of(field, v)?;
        match self.schedulers.iter().find(|(k, _)| k == kind) {
            Some((_, parse)) => parse(v).map_err(|e| match e {
                EngineError::Parse(m) => {
                    EngineError::invalid(field, m.trim_start_matches("scheduler: ").to_string())
                }
                e => e,
            }),
            None => Err(unknown(
                field,
                "subflow scheduler",
                kind,
                self.schedulers.iter().map(|(k, _)| k.as_str()).collect(),
            )),
        }
    }

    /// The controller maker of a scenario's `cc` object.
    pub fn cc_maker(&self, v: &Value) -> Result<CcMaker> {
        let kind = kind_of("cc", v)?;
        match self.cc.iter().find(|(k, _)| k == kind) {
            Some((_, parse)) => parse(v),
            None => Err(unknown(
                "cc",
                "congestion control",
                kind,
                self.cc.iter().map(|(k, _)| k.as_str()).collect(),
            )),
        }
    }

    /// The selector maker of a `selector` object at `field`.
    pub fn selector_maker(&self, field: &str, v: &Value, vms: &[VmInfo]) -> Result<SelectorMaker> {
        let kind = kind_of(field, v)?;
        match self.selectors.iter().find(|(k, _)| k == kind) {
            Some((_, parse)) => parse(v, vms),
            None => Err(unknown(
                field,
                "selector",
                kind,
                self.selectors.iter().map(|(k, _)| k.as_str()).collect(),
            )),
        }
    }
}

/// Parses a scenario JSON document.
pub fn parse(scenario_json: &str) -> Result<config::Scenario> {
    serde_json::from_str(scenario_json).map_err(|e| EngineError::Parse(e.to_string()))
}

/// Runs a scenario given as a JSON value tree and returns the output value.
pub fn run_value(
    scenario: config::Scenario,
    progress: Option<Progress<'_>>,
) -> Result<serde_json::Value> {
    Simulation::new(scenario)?.run(progress)
}

/// Runs a scenario JSON document and returns the output JSON document.
pub fn run_json(scenario_json: &str, progress: Option<Progress<'_>>) -> Result<String> {
    run_json_with(&Registry::default(), scenario_json, progress)
}

/// The packet and transport sections of a scenario (`{"packet": ..., "transport": ..., "queues": ...}`,
/// queues optional), checked by the engine's own rules without building anything; errors name the field.
pub fn check_transport_json(doc_json: &str) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Doc {
        packet: config::PacketCfg,
        transport: config::TransportCfg,
        #[serde(default)]
        queues: config::QueuesCfg,
    }
    let d: Doc = serde_json::from_str(doc_json).map_err(|e| EngineError::Parse(e.to_string()))?;
    sim::check_transport(&d.packet, &d.transport, &d.queues.host)
}

/// [`run_json`] with the schemes of `reg`.
pub fn run_json_with(
    reg: &Registry,
    scenario_json: &str,
    progress: Option<Progress<'_>>,
) -> Result<String> {
    let out = Simulation::with_registry(parse(scenario_json)?, reg)?.run(progress)?;
    serde_json::to_string(&out).map_err(|e| EngineError::Parse(e.to_string()))
}
