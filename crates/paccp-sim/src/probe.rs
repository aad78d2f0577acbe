//! A probe of the machine, not of the simulation: the latency of a dependent load by working-set size.
//!
//! The engine's cost per event on a large fabric is set by where its live state (packets in flight,
//! channels, flows) falls on this curve, so `paccp bench` records it next to its scale figures, and
//! `examples/memlat.rs` prints it.
use std::time::Instant;

/// The working-set sizes (KiB) of the curve that `examples/memlat.rs` prints and `paccp bench` records:
/// 256 KiB (in L2) to 128 MiB (far past any L3 share of this project's machines).
pub const SIZES_KIB: [usize; 8] = [
    256,
    1 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
];

/// Words per 64-byte line.
const LINE_WORDS: usize = 8;

/// A buffer of `lines` cache lines whose first words form a single random cycle through every line
/// (Sattolo's shuffle, a fixed xorshift seed): following `p = buf[p]` from 0 visits each line once
/// per lap, in an order the hardware prefetchers cannot guess.
fn cycle(lines: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lines).collect();
    let mut x: u64 = 88_172_645_463_325_252;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize; // j < i: one cycle, not any permutation
        order.swap(i, j);
    }
    let mut buf = vec![0usize; lines * LINE_WORDS];
    for (k, &line) in order.iter().enumerate() {
        buf[line * LINE_WORDS] = order[(k + 1) % lines] * LINE_WORDS;
    }
    buf
}

/// Mean nanoseconds of one load that depends on the previous one, over `loads` loads chasing a random
/// cycle through a buffer of `bytes` (rounded down to whole 64-byte lines, at least one). The buffer is
/// walked once before the clock starts, so the figure is the steady state, not the first touch.
pub fn memory_latency_ns(bytes: usize, loads: u64) -> f64 {
    let lines = (bytes / (LINE_WORDS * std::mem::size_of::<usize>())).max(1);
    let buf = cycle(lines);
    let mut p = 0usize;
    for _ in 0..lines {
        p = buf[p];
    }
    let t0 = Instant::now();
    for _ in 0..loads {
        p = buf[p];
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / loads.max(1) as f64;
    // Without a use of `p` the chase could be optimised away.
    std::hint::black_box(p);
    ns
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_chase_visits_every_line_once_per_lap() {
        for lines in [1usize, 2, 3, 64, 1000] {
            let buf = super::cycle(lines);
            let mut seen = vec![false; lines];
            let mut p = 0;
            for _ in 0..lines {
                let line = p / super::LINE_WORDS;
                assert!(!seen[line], "line {line} visited twice in a lap of {lines}");
                seen[line] = true;
                p = buf[p];
            }
            assert_eq!(p, 0, "the chase is not one cycle over {lines} lines");
        }
    }

    #[test]
    fn the_latency_is_a_positive_finite_time() {
        let ns = super::memory_latency_ns(64 * 1024, 10_000);
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }
}
