//! SACK bookkeeping: sets of segment numbers kept as sorted disjoint ranges (the receiver's out-of-order
//! data, the sender's scoreboard) and the compact SACK option an ACK carries.
//!
//! Both sides hold few ranges (one per hole in the window), so a sorted `Vec` with linear scans from
//! the front is cheaper than a tree.

/// A set of segment numbers as sorted, disjoint, non-adjacent half-open ranges `[start, end)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ranges {
    /// Sorted, disjoint, non-adjacent `[start, end)` ranges.
    r: Vec<(u64, u64)>,
}

impl Ranges {
    pub(crate) fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    /// The range containing `x`, if any.
    pub(crate) fn find(&self, x: u64) -> Option<(u64, u64)> {
        self.r.iter().copied().find(|&(s, e)| s <= x && x < e)
    }

    pub(crate) fn contains(&self, x: u64) -> bool {
        self.find(x).is_some()
    }

    /// The smallest number `>= x` not in the set.
    pub(crate) fn next_gap(&self, x: u64) -> u64 {
        self.find(x).map_or(x, |(_, e)| e)
    }

    /// One past the largest number in the set.
    pub(crate) fn end(&self) -> Option<u64> {
        self.r.last().map(|&(_, e)| e)
    }

    /// Adds `[s, e)` (nothing if empty), merging with overlapping or adjacent ranges.
    pub(crate) fn insert(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        // First range that ends at or after s (could merge), and first that starts after e (cannot).
        let i = self.r.partition_point(|&(_, re)| re < s);
        let j = self.r.partition_point(|&(rs, _)| rs <= e);
        if i == j {
            self.r.insert(i, (s, e));
            return;
        }
        let ns = s.min(self.r[i].0);
        let ne = e.max(self.r[j - 1].1);
        self.r.drain(i + 1..j);
        self.r[i] = (ns, ne);
    }

    /// If the first range starts at `x`, removes it and returns its end.
    pub(crate) fn pop_if_starts_at(&mut self, x: u64) -> Option<u64> {
        match self.r.first() {
            Some(&(s, e)) if s == x => {
                self.r.remove(0);
                Some(e)
            }
            _ => None,
        }
    }

    /// Removes every number `< x`.
    pub(crate) fn trim_below(&mut self, x: u64) {
        let k = self.r.partition_point(|&(_, e)| e <= x);
        self.r.drain(..k);
        if let Some(first) = self.r.first_mut() {
            first.0 = first.0.max(x);
        }
    }

    /// Number of elements `< x`.
    pub(crate) fn count_below(&self, x: u64) -> u64 {
        let mut n = 0;
        for &(s, e) in &self.r {
            if s >= x {
                break;
            }
            n += e.min(x) - s;
        }
        n
    }

    /// The `k`-th largest element (k >= 1), if the set has at least `k` elements.
    pub(crate) fn kth_largest(&self, k: u64) -> Option<u64> {
        let mut left = k;
        for &(s, e) in self.r.iter().rev() {
            let n = e - s;
            if left <= n {
                return Some(e - left);
            }
            left -= n;
        }
        None
    }
}

/// Number of SACK blocks an ACK carries (RFC 2018 with timestamps: 3).
pub(crate) const MAX_BLOCKS: usize = 3;

/// The SACK option of an ACK: up to [`MAX_BLOCKS`] blocks `[ack + off, ack + off + len)` relative to the
/// ACK's cumulative sequence number; `len == 0` marks an unused slot. 12 bytes, so a packet stays small.
/// A block more than `u16::MAX` segments above the cumulative ACK is not reported and a longer block is
/// reported truncated (both only lose information, as a full TCP option would when it runs out of room).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SackOpt {
    blk: [(u16, u16); MAX_BLOCKS],
}

impl SackOpt {
    pub(crate) const NONE: SackOpt = SackOpt {
        blk: [(0, 0); MAX_BLOCKS],
    };

    /// Appends block `[s, e)` (with `ack < s < e`) if a slot is free and it fits.
    pub(crate) fn push(&mut self, ack: u64, s: u64, e: u64) {
        let Some(slot) = self.blk.iter_mut().find(|b| b.1 == 0) else {
            return;
        };
        let (Some(off), true) = (s.checked_sub(ack), e > s) else {
            return;
        };
        let Ok(off) = u16::try_from(off) else {
            return;
        };
        *slot = (off, (e - s).min(u16::MAX as u64) as u16);
    }

    /// The blocks as absolute `[start, end)` ranges.
    pub(crate) fn blocks(&self, ack: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.blk
            .iter()
            .filter(|b| b.1 > 0)
            .map(move |&(o, l)| (ack + o as u64, ack + o as u64 + l as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(r: &Ranges) -> Vec<u64> {
        r.r.iter().flat_map(|&(s, e)| s..e).collect()
    }

    #[test]
    fn insert_merges_and_counts() {
        let mut r = Ranges::default();
        r.insert(10, 12);
        r.insert(20, 21);
        r.insert(14, 15);
        assert_eq!(r.r, vec![(10, 12), (14, 15), (20, 21)]);
        r.insert(12, 14); // adjacent on both sides
        assert_eq!(r.r, vec![(10, 15), (20, 21)]);
        r.insert(5, 30); // swallows everything
        assert_eq!(r.r, vec![(5, 30)]);
        r.insert(7, 9); // inside
        assert_eq!(r.r, vec![(5, 30)]);
        r.insert(3, 3); // empty
        assert_eq!(r.r, vec![(5, 30)]);
    }

    #[test]
    fn queries_match_a_plain_set() {
        let mut r = Ranges::default();
        let mut plain = std::collections::BTreeSet::new();
        // A deterministic pseudo-random sequence of insertions.
        let mut x: u64 = 7;
        for _ in 0..300 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = (x >> 33) % 200;
            let len = (x >> 20) % 4;
            r.insert(s, s + len);
            plain.extend(s..s + len);
            assert_eq!(set(&r), plain.iter().copied().collect::<Vec<_>>());
        }
        for q in 0..210 {
            assert_eq!(r.contains(q), plain.contains(&q));
            assert_eq!(r.count_below(q), plain.range(..q).count() as u64);
            let gap = (q..).find(|v| !plain.contains(v)).unwrap();
            assert_eq!(r.next_gap(q), gap);
            let k = q + 1;
            assert_eq!(
                r.kth_largest(k),
                plain.iter().rev().nth(q as usize).copied()
            );
        }
        r.trim_below(57);
        plain = plain.split_off(&57);
        assert_eq!(set(&r), plain.iter().copied().collect::<Vec<_>>());
        let first = *plain.first().unwrap();
        let end = r.pop_if_starts_at(first).unwrap();
        assert!(!r.contains(first) && !r.contains(end - 1));
    }

    #[test]
    fn sack_option_round_trips_and_truncates() {
        let mut o = SackOpt::NONE;
        o.push(100, 105, 108);
        o.push(100, 120, 121);
        o.push(100, 100 + 70_000, 100 + 70_001); // too far: dropped
        o.push(100, 130, 100_000); // truncated length
        o.push(100, 140, 141); // no slot left
        let b: Vec<_> = o.blocks(100).collect();
        assert_eq!(
            b,
            vec![(105, 108), (120, 121), (130, 130 + u16::MAX as u64)]
        );
        assert_eq!(std::mem::size_of::<SackOpt>(), 12);
    }
}
