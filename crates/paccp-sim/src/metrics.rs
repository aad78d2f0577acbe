//! Sampling and output: per-flow delivered-byte samples (and cwnd / Wmin), flow records, channel
//! counters and run statistics as the columnar JSON of docs/engine-contract.md.
use crate::config::SampleFlows;
use crate::net::channel::Channel;
use crate::net::{NetStats, ROUTE_END};
use crate::topo::Network;
use crate::transport::Flow;
use crate::units::Ps;
use serde_json::{json, Value};

/// Sampled series.
#[derive(Debug)]
pub(crate) struct Sampler {
    pub(crate) interval: u64,
    mode: SampleFlows,
    cwnd: bool,
    flows: Vec<u32>,
    cum: Vec<Vec<u64>>,
    cwnd_v: Vec<Vec<f64>>,
    wmin_v: Vec<Vec<f64>>,
    /// Smoothed RTT (us; 0 before the first sample), with `cwnd`.
    srtt_v: Vec<Vec<f64>>,
    n_ticks: usize,
}

impl Sampler {
    pub(crate) fn new(interval_ps: u64, mode: SampleFlows, cwnd: bool) -> Sampler {
        Sampler {
            interval: interval_ps,
            mode,
            cwnd,
            flows: Vec::new(),
            cum: Vec::new(),
            cwnd_v: Vec::new(),
            wmin_v: Vec::new(),
            srtt_v: Vec::new(),
            n_ticks: 0,
        }
    }

    /// A new flow `idx` (of `size` bytes, `None` = long-lived); zeros before it exists.
    pub(crate) fn add_flow(&mut self, idx: u32, size: Option<u64>) {
        let sampled = match self.mode {
            SampleFlows::None => false,
            SampleFlows::LongLived => size.is_none(),
            SampleFlows::All => true,
        };
        if sampled {
            self.flows.push(idx);
            self.cum.push(vec![0; self.n_ticks]);
            if self.cwnd {
                self.cwnd_v.push(vec![0.0; self.n_ticks]);
                self.wmin_v.push(vec![0.0; self.n_ticks]);
                self.srtt_v.push(vec![0.0; self.n_ticks]);
            }
        }
    }

    /// One tick: records every sampled flow.
    pub(crate) fn tick(&mut self, flows: &[Flow], mss: u64) {
        for (row, &fl) in self.flows.iter().enumerate() {
            let f = &flows[fl as usize];
            self.cum[row].push(f.bytes_acked(mss));
            if self.cwnd {
                self.cwnd_v[row].push(f.snd.win.cwnd);
                self.wmin_v[row].push(f.wmin(mss));
                self.srtt_v[row].push(f.snd.rtt.srtt().unwrap_or(0.0) / 1e3);
            }
        }
        self.n_ticks += 1;
    }

    fn json(&self, flows: &[Flow]) -> Value {
        let acked: Vec<Vec<u64>> = self
            .cum
            .iter()
            .map(|cum| {
                let mut prev = 0;
                cum.iter()
                    .map(|&c| {
                        let d = c - prev;
                        prev = c;
                        d
                    })
                    .collect()
            })
            .collect();
        let mut samples = json!({
            "interval_ns": self.interval / Ps::PER_NS,
            "flow_ids": self.flows.iter().map(|&i| flows[i as usize].info.id.clone()).collect::<Vec<_>>(),
            "acked_bytes": acked,
        });
        if self.cwnd {
            samples["cwnd_pkts"] = json!(self.cwnd_v);
            samples["wmin_pkts"] = json!(self.wmin_v);
            samples["srtt_us"] = json!(self.srtt_v);
        } else {
            samples["cwnd_pkts"] = Value::Null;
            samples["wmin_pkts"] = Value::Null;
            samples["srtt_us"] = Value::Null;
        }
        samples
    }
}

/// Everything the output is made of.
pub(crate) struct OutputParts<'a> {
    pub(crate) flows: &'a [Flow],
    pub(crate) net: &'a Network,
    pub(crate) channels: &'a [Channel],
    pub(crate) routes: &'a [u32],
    pub(crate) vm_names: &'a [String],
    pub(crate) sampler: &'a Sampler,
    pub(crate) stats: &'a NetStats,
    pub(crate) events: u64,
    pub(crate) mss: u64,
    pub(crate) sim_end: u64,
}

/// The output document.
pub(crate) fn output(o: &OutputParts<'_>) -> Value {
    let mss = o.mss;
    let fl = o.flows;
    let name = |n: u32| o.net.names[n as usize].clone();
    let chname = |c: &u32| o.net.channels[*c as usize].name.clone();
    let flows = json!({
        "id": fl.iter().map(|f| f.info.id.clone()).collect::<Vec<_>>(),
        "label": fl.iter().map(|f| f.info.label.clone()).collect::<Vec<_>>(),
        "src": fl.iter().map(|f| name(f.info.src)).collect::<Vec<_>>(),
        "dst": fl.iter().map(|f| name(f.info.dst)).collect::<Vec<_>>(),
        "vm": fl.iter().map(|f| f.info.vm.map(|v| o.vm_names[v as usize].clone())).collect::<Vec<_>>(),
        "size_bytes": fl.iter().map(|f| f.info.size).collect::<Vec<_>>(),
        "start_ns": fl.iter().map(|f| f.info.start / Ps::PER_NS).collect::<Vec<_>>(),
        "finish_ns": fl.iter().map(|f| f.info.finished.map(|t| t / Ps::PER_NS)).collect::<Vec<_>>(),
        "bytes_acked": fl.iter().map(|f| f.bytes_acked(mss)).collect::<Vec<_>>(),
        "theta_bps": fl.iter().map(|f| f.info.theta0).collect::<Vec<_>>(),
        "omega": fl.iter().map(|f| f.info.omega0).collect::<Vec<_>>(),
        "retransmits": fl.iter().map(|f| f.snd.retransmits).collect::<Vec<_>>(),
        "timeouts": fl.iter().map(|f| f.snd.timeouts).collect::<Vec<_>>(),
        "spurious_retransmits": fl.iter().map(|f| f.rcv.spurious).collect::<Vec<_>>(),
        // Subflow delay lines (channels past the network's) are not links: not named.
        "route": fl.iter().map(|f| o.routes[f.info.route_data as usize..].iter().take_while(|&&c| c != ROUTE_END).filter(|&&c| (c as usize) < o.net.channels.len()).map(chname).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "change_acked_bytes": fl.iter().map(|f| f.info.change_acked.clone()).collect::<Vec<_>>(),
    });
    let cs = &o.net.channels;
    let rt = &o.channels[..cs.len()];
    let channels = json!({
        "name": cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "from": cs.iter().map(|c| name(c.from)).collect::<Vec<_>>(),
        "to": cs.iter().map(|c| name(c.to)).collect::<Vec<_>>(),
        "rate_bps": cs.iter().map(|c| c.rate.0).collect::<Vec<_>>(),
        "tx_bytes": rt.iter().map(|c| c.tx_bytes()).collect::<Vec<_>>(),
        "drops": rt.iter().map(|c| c.drops).collect::<Vec<_>>(),
        "drops_ack": rt.iter().map(|c| c.drops_ack).collect::<Vec<_>>(),
        "max_queue_bytes": rt.iter().map(|c| c.max_queue_bytes).collect::<Vec<_>>(),
    });
    let mut out = json!({
        "flows": flows,
        "channels": channels,
        "samples": o.sampler.json(fl),
        "stats": {
            "events": o.events,
            "sim_end_ns": o.sim_end / Ps::PER_NS,
            "packets_sent": o.stats.packets_sent,
            "packets_dropped": o.stats.packets_dropped,
            "peak_packets_in_flight": o.stats.peak_in_flight,
        }
    });
    if let Some(law) = host_law(o) {
        out["host_law"] = law;
    }
    out
}

/// What the hosts' congestion control saw of each VM (`host_law`, only when a host selector counts
/// it: `paccp_host` with its window), one row per VM, in the order of the hosts' channels.
fn host_law(o: &OutputParts<'_>) -> Option<Value> {
    let rows: Vec<(u32, crate::net::qdisc::LawCounters)> = o
        .channels
        .iter()
        .filter_map(|c| c.sched.as_deref())
        .flat_map(|q| q.law_counters())
        .collect();
    if rows.is_empty() {
        return None;
    }
    let col = |f: fn(&crate::net::qdisc::LawCounters) -> f64| {
        rows.iter().map(|(_, l)| f(l) / 1e3).collect::<Vec<_>>()
    };
    Some(json!({
        "vm": rows.iter().map(|(v, _)| o.vm_names.get(*v as usize).cloned()).collect::<Vec<_>>(),
        "samples": rows.iter().map(|(_, l)| l.samples).collect::<Vec<_>>(),
        "delay_ns": col(|l| l.delay_ps),
        "marked_ns": col(|l| l.marked_ps),
        "unmarked_ns": col(|l| l.unmarked_ps),
        "unused_ns": col(|l| l.unused_ps),
        "law_segments": rows.iter().map(|(_, l)| l.law_segments).collect::<Vec<_>>(),
        "law_ns": col(|l| l.law_ps),
    }))
}
