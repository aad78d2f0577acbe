//! The queue disciplines a scenario names (`queues.host.kind`, `queues.switch.kind`): each a type
//! implementing [`Qdisc`] and a parser here, plus one line in [`builtin`] (or, from outside the crate,
//! [`crate::Registry::register_qdisc`]). A parser checks its object (errors name the field) and returns
//! the maker of one discipline per channel.
use super::build::{check_buf, nonzero};
use crate::config::{DropTailCfg, PerVmCfg, ShapeByCfg, ShaperCfg, StrictPriorityCfg};
use crate::error::{EngineError, Result};
use crate::host::shaper::{Bucket, ShapeBy, Shaper};
use crate::host::{PerVm, VmInfo};
use crate::net::qdisc::{Prio, Qdisc};
use crate::Registry;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;

/// Where a discipline sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QdiscPlace {
    /// A host's NIC queue (the host egress stage).
    Host,
    /// A switch output queue.
    Switch,
}

/// What a discipline's parser may read besides its own object.
pub struct QdiscCx<'a> {
    /// The object's field (`queues.host` or `queues.switch`), for errors.
    pub field: &'a str,
    /// Where the discipline sits.
    pub place: QdiscPlace,
    /// The scenario's seed (random streams are named from it).
    pub seed: u64,
    /// The scenario's VMs.
    pub vms: &'a [VmInfo],
    /// VM id -> engine index.
    pub vm_ids: &'a HashMap<String, u32>,
    /// The registry (a discipline may hold a registered part, e.g. a packet selector).
    pub reg: &'a Registry,
}

/// Makes the discipline of one channel (argument: the node index it leaves; `None`: FIFO drop-tail).
pub type QdiscMaker = Box<dyn Fn(u32) -> Option<Box<dyn Qdisc>>>;

/// Reads a discipline's object (`kind` included); errors name the field.
pub type QdiscParser = fn(&QdiscCx<'_>, &Value) -> Result<QdiscMaker>;

/// The built-in disciplines: `(kind, parser)`. One line per discipline.
pub fn builtin() -> Vec<(&'static str, QdiscParser)> {
    vec![
        ("drop_tail", drop_tail),
        ("strict_priority", strict_priority),
        ("per_vm", per_vm),
        ("shaper", shaper),
    ]
}

fn read<T: DeserializeOwned>(cx: &QdiscCx<'_>, v: &Value) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| EngineError::invalid(cx.field, e.to_string()))
}

fn host_only(cx: &QdiscCx<'_>, kind: &str) -> Result<()> {
    if cx.place == QdiscPlace::Switch {
        return Err(EngineError::invalid(
            format!("{}.kind", cx.field),
            format!("{kind} is a host egress stage (queues.host only)"),
        ));
    }
    Ok(())
}

fn drop_tail(cx: &QdiscCx<'_>, v: &Value) -> Result<QdiscMaker> {
    let _: DropTailCfg = read(cx, v)?;
    Ok(Box::new(|_| None))
}

fn strict_priority(cx: &QdiscCx<'_>, v: &Value) -> Result<QdiscMaker> {
    let StrictPriorityCfg {
        levels,
        red,
        ce_ns,
        shared_buffer,
        ..
    } = read(cx, v)?;
    let field = cx.field;
    if levels.is_empty() || levels.len() > 256 {
        return Err(EngineError::invalid(
            format!("{field}.levels"),
            "needs 1 to 256 levels",
        ));
    }
    for (i, b) in levels.iter().enumerate() {
        check_buf(&format!("{field}.levels[{i}]"), b)?;
    }
    if ce_ns == Some(0) {
        return Err(EngineError::invalid(
            format!("{field}.ce_ns"),
            "must be positive (absent: no marking)",
        ));
    }
    let ce = ce_ns.unwrap_or(0);
    let Some(red) = red else {
        let p = Prio::new(&levels).with_ce(ce, shared_buffer);
        return Ok(Box::new(move |_| Some(Box::new(p.clone()))));
    };
    red.check()
        .map_err(|e| EngineError::invalid(format!("{field}.red"), e))?;
    // one random stream per channel, numbered in the (fixed) order channels are built
    let (made, seed, name) = (std::cell::Cell::new(0u32), cx.seed, field.to_string());
    Ok(Box::new(move |_| {
        let k = made.replace(made.get() + 1);
        let p = Prio::with_red(&levels, red, seed, &format!("{name}.red/{k}"))
            .with_ce(ce, shared_buffer);
        Some(Box::new(p))
    }))
}

fn per_vm(cx: &QdiscCx<'_>, v: &Value) -> Result<QdiscMaker> {
    host_only(cx, "per_vm")?;
    let PerVmCfg {
        buffer, selector, ..
    } = read(cx, v)?;
    check_buf(&format!("{}.buffer", cx.field), &buffer)?;
    let make = cx
        .reg
        .selector_maker(&format!("{}.selector", cx.field), &selector, cx.vms)?;
    Ok(Box::new(move |host| {
        Some(Box::new(PerVm::new(buffer, make(host))))
    }))
}

fn shaper(cx: &QdiscCx<'_>, v: &Value) -> Result<QdiscMaker> {
    host_only(cx, "shaper")?;
    let ShaperCfg {
        by,
        buckets,
        unshaped_buffer,
        priority,
        ..
    } = read(cx, v)?;
    let field = cx.field;
    check_buf(&format!("{field}.unshaped_buffer"), &unshaped_buffer)?;
    let by = match by {
        ShapeByCfg::Class => ShapeBy::Class,
        ShapeByCfg::Vm => ShapeBy::Vm,
    };
    let mut made = Vec::new();
    for (i, b) in buckets.iter().enumerate() {
        let f = format!("{field}.buckets[{i}]");
        nonzero(&format!("{f}.rate_bps"), b.rate_bps)?;
        nonzero(&format!("{f}.burst_bytes"), b.burst_bytes)?;
        check_buf(&format!("{f}.buffer"), &b.buffer)?;
        let key = match (by, b.class, &b.vm) {
            (ShapeBy::Class, Some(c), None) => c as u32,
            (ShapeBy::Vm, None, Some(v)) => *cx.vm_ids.get(v).ok_or_else(|| {
                EngineError::invalid(format!("{f}.vm"), format!("unknown vm '{v}'"))
            })?,
            _ => {
                return Err(EngineError::invalid(
                    f,
                    "needs exactly the key of `by` (class or vm)",
                ))
            }
        };
        made.push(Bucket::new(key, b.rate_bps, b.burst_bytes, b.buffer));
    }
    let s = Shaper::new(by, made, unshaped_buffer, priority);
    Ok(Box::new(move |_| Some(Box::new(s.clone()))))
}
