//! Arrivals of finite flows: Poisson generators with a size CDF, a destination rule and a class rule.
//! Each generator draws from its own named streams (`arrivals/<i>/gap`, `size`, `src`, `dst`, `cos`).
use crate::config::{ArrivalCfg, CosRule, DestRule, TopologyCfg};
use crate::error::{EngineError, Result};
use crate::rng::stream;
use crate::topo::Network;
use crate::units::Ps;
use rand::Rng;
use rand_pcg::Pcg64Mcg;

/// One generator with its streams.
pub(crate) struct ArrivalGen {
    pub(crate) cfg: ArrivalCfg,
    pub(crate) sources: Vec<u32>,
    pub(crate) count: u64,
    gap: Pcg64Mcg,
    size: Pcg64Mcg,
    src: Pcg64Mcg,
    dst: Pcg64Mcg,
    cos: Pcg64Mcg,
}

/// The class an arriving flow gets.
pub(crate) enum DrawnCos {
    /// The VM on the source host (BE (0, 1) if none).
    ByVm,
    /// A class of a `mix` rule.
    Class {
        label: String,
        theta_bps: u64,
        omega: f64,
    },
}

/// One arrival.
pub(crate) struct Drawn {
    pub(crate) id: String,
    pub(crate) src: u32,
    pub(crate) dst: u32,
    pub(crate) size: u64,
    pub(crate) cos: DrawnCos,
    /// The time of the next arrival, if any.
    pub(crate) next: Option<u64>,
}

pub(crate) fn positive(field: String, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(EngineError::invalid(
            field,
            format!("must be a finite number > 0 (got {v})"),
        ))
    }
}

pub(crate) fn host_of(net: &Network, name: &str, field: String) -> Result<u32> {
    let n = net
        .node(name)
        .ok_or_else(|| EngineError::invalid(field.clone(), format!("unknown node '{name}'")))?;
    if !net.is_host(n) {
        return Err(EngineError::invalid(
            field,
            format!("node '{name}' is not a host"),
        ));
    }
    Ok(n)
}

fn check_cdf(field: &str, cdf: &[(f64, f64)]) -> Result<()> {
    if cdf.len() < 2 {
        return Err(EngineError::invalid(field, "needs at least two points"));
    }
    for (i, w) in cdf.windows(2).enumerate() {
        if !(w[1].0 >= w[0].0 && w[1].1 >= w[0].1) {
            return Err(EngineError::invalid(
                format!("{field}[{}]", i + 1),
                "points must be non-decreasing",
            ));
        }
    }
    let (first, last) = (cdf[0], cdf[cdf.len() - 1]);
    if first.0 < 0.0 || first.1 < 0.0 || (last.1 - 1.0).abs() > 1e-6 || !last.0.is_finite() {
        return Err(EngineError::invalid(
            field,
            "sizes must be >= 0, probabilities in [0, 1] ending at 1",
        ));
    }
    Ok(())
}

/// Piecewise-linear inverse CDF at `u` in [0, 1), at least 1 byte.
pub(crate) fn sample_cdf(cdf: &[(f64, f64)], u: f64) -> u64 {
    let mut v = cdf[cdf.len() - 1].0;
    if u < cdf[0].1 {
        v = cdf[0].0;
    } else {
        for w in cdf.windows(2) {
            let ((x0, p0), (x1, p1)) = (w[0], w[1]);
            if u < p1 {
                v = if p1 > p0 {
                    x0 + (x1 - x0) * (u - p0) / (p1 - p0)
                } else {
                    x0
                };
                break;
            }
        }
    }
    (v.round() as u64).max(1)
}

/// An exponential gap with mean 1 / rate seconds, in picoseconds (at least 1).
fn exp_gap_ps(rng: &mut Pcg64Mcg, rate_per_s: f64) -> u64 {
    let u: f64 = rng.gen();
    let secs = -(1.0 - u).ln() / rate_per_s;
    ((secs * 1e12) as u64).max(1)
}

impl ArrivalGen {
    /// Validates generator `i` and builds it; returns it with the time of its first arrival, if any.
    pub(crate) fn new(
        i: usize,
        a: &ArrivalCfg,
        seed: u64,
        net: &Network,
        topology: &TopologyCfg,
        n_hosts: usize,
    ) -> Result<(ArrivalGen, Option<u64>)> {
        let f = format!("arrivals[{i}]");
        positive(format!("{f}.rate_per_s"), a.rate_per_s)?;
        if a.stop_ns < a.start_ns {
            return Err(EngineError::invalid(
                format!("{f}.stop_ns"),
                "must be >= start_ns",
            ));
        }
        if a.sources.is_empty() {
            return Err(EngineError::invalid(format!("{f}.sources"), "is empty"));
        }
        let mut sources = Vec::new();
        for (j, s) in a.sources.iter().enumerate() {
            sources.push(host_of(net, s, format!("{f}.sources[{j}]"))?);
        }
        check_cdf(&format!("{f}.size_cdf"), &a.size_cdf)?;
        if n_hosts < 2 {
            return Err(EngineError::invalid(
                format!("{f}.destination"),
                "needs at least two hosts",
            ));
        }
        if a.destination == DestRule::OtherLeaf && net.leaf_spine.is_some_and(|(l, _, _)| l < 2) {
            return Err(EngineError::invalid(
                format!("{f}.destination"),
                "other_leaf needs at least two leaves",
            ));
        }
        if a.destination == DestRule::OtherLeaf
            && !matches!(topology, TopologyCfg::LeafSpine { .. })
        {
            return Err(EngineError::invalid(
                format!("{f}.destination"),
                "other_leaf needs a leaf_spine topology",
            ));
        }
        if let CosRule::Mix { classes } = &a.cos {
            if classes.is_empty() {
                return Err(EngineError::invalid(format!("{f}.cos.classes"), "is empty"));
            }
            let mut sum = 0.0;
            for (j, c) in classes.iter().enumerate() {
                positive(format!("{f}.cos.classes[{j}].omega"), c.omega)?;
                if !(c.prob.is_finite() && c.prob >= 0.0) {
                    return Err(EngineError::invalid(
                        format!("{f}.cos.classes[{j}].prob"),
                        "must be >= 0",
                    ));
                }
                sum += c.prob;
            }
            if (sum - 1.0).abs() > 1e-6 {
                return Err(EngineError::invalid(
                    format!("{f}.cos.classes"),
                    format!("probabilities sum to {sum}, not 1"),
                ));
            }
        }
        let name = |s: &str| stream(seed, &format!("arrivals/{i}/{s}"));
        let mut g = ArrivalGen {
            cfg: a.clone(),
            sources,
            count: 0,
            gap: name("gap"),
            size: name("size"),
            src: name("src"),
            dst: name("dst"),
            cos: name("cos"),
        };
        let first = Ps::from_ns(a.start_ns)
            .0
            .saturating_add(exp_gap_ps(&mut g.gap, a.rate_per_s));
        let ok = first < Ps::from_ns(a.stop_ns).0 && a.max_flows != Some(0);
        Ok((g, ok.then_some(first)))
    }

    /// Draws the arrival happening at `now` (source, destination, size, class, next arrival time).
    pub(crate) fn draw(&mut self, now: u64, hosts: &[u32], net: &Network) -> Drawn {
        self.count += 1;
        let n = self.count;
        let src = self.sources[self.src.gen_range(0..self.sources.len())];
        let dst = match self.cfg.destination {
            DestRule::AnyOtherHost => {
                let k = self.dst.gen_range(0..hosts.len() - 1);
                let h = hosts[k];
                if h >= src {
                    hosts[k + 1]
                } else {
                    h
                }
            }
            DestRule::OtherLeaf => {
                let (_, _, hpl) = net.leaf_spine.unwrap_or((1, 1, 1));
                let sl = net.host_group[src as usize].unwrap_or(0);
                let nh = hosts.len() as u32;
                let k = self.dst.gen_range(0..nh - hpl);
                let first = sl * hpl;
                if k >= first {
                    k + hpl
                } else {
                    k
                }
            }
        };
        let size = sample_cdf(&self.cfg.size_cdf, self.size.gen::<f64>());
        let cos = match &self.cfg.cos {
            CosRule::ByVm => DrawnCos::ByVm,
            CosRule::Mix { classes } => {
                let u: f64 = self.cos.gen();
                let mut acc = 0.0;
                let mut pick = &classes[classes.len() - 1];
                for c in classes {
                    acc += c.prob;
                    if u < acc {
                        pick = c;
                        break;
                    }
                }
                DrawnCos::Class {
                    label: pick.label.clone(),
                    theta_bps: pick.theta_bps,
                    omega: pick.omega,
                }
            }
        };
        let id = format!("{}{}", self.cfg.id_prefix, n - 1);
        let gap = exp_gap_ps(&mut self.gap, self.cfg.rate_per_s);
        let stop = Ps::from_ns(self.cfg.stop_ns).0;
        let more = self.cfg.max_flows.is_none_or(|m| n < m);
        let t = now.saturating_add(gap);
        Drawn {
            id,
            src,
            dst,
            size,
            cos,
            next: (more && t < stop).then_some(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_sampling_interpolates() {
        let cdf = [(100.0, 0.0), (200.0, 0.5), (1000.0, 1.0)];
        assert_eq!(sample_cdf(&cdf, 0.0), 100);
        assert_eq!(sample_cdf(&cdf, 0.25), 150);
        assert_eq!(sample_cdf(&cdf, 0.75), 600);
        assert_eq!(sample_cdf(&[(0.0, 0.0), (10.0, 1.0)], 0.01), 1);
    }
}
