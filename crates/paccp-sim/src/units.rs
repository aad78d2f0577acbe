//! Unit newtypes: integer picoseconds, bytes and bit/s.

/// Simulated time in picoseconds (internal resolution; the interface uses nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ps(pub u64);

impl Ps {
    /// Picoseconds per nanosecond.
    pub const PER_NS: u64 = 1000;
    /// Converts nanoseconds to picoseconds, saturating.
    pub fn from_ns(ns: u64) -> Ps {
        Ps(ns.saturating_mul(Self::PER_NS))
    }
    /// Whole nanoseconds (truncated).
    pub fn as_ns(self) -> u64 {
        self.0 / Self::PER_NS
    }
    /// Adds a duration, saturating.
    pub fn saturating_add(self, d: Ps) -> Ps {
        Ps(self.0.saturating_add(d.0))
    }
}

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

/// A rate in bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bps(pub u64);

impl Bps {
    /// Serialisation time of `size` at this rate, rounded up to the next picosecond.
    /// The rate must be non-zero (checked at configuration time).
    pub fn tx_time(self, size: Bytes) -> Ps {
        let num = size.0 as u128 * 8 * 1_000_000_000_000u128;
        let r = self.0.max(1) as u128;
        Ps(num.div_ceil(r) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_is_exact_at_40g() {
        assert_eq!(Bps(40_000_000_000).tx_time(Bytes(1500)), Ps(300_000));
        assert_eq!(Bps(10_000_000_000).tx_time(Bytes(1500)), Ps(1_200_000));
        assert_eq!(Bps(3).tx_time(Bytes(1)), Ps(2_666_666_666_667));
    }
}
