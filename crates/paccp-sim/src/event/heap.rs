//! A 4-ary min-heap of [`Entry`] stored in 128-byte aligned blocks, so that a node's four children are
//! one block (two cache lines, not three). The event queue keeps one for the events of the current
//! time bucket and one for the events beyond its ring of buckets ([`super::EventQueue`]).
use super::{Entry, Ev};

/// Children per heap node.
const ARITY: usize = 4;

/// Four heap slots on their own two cache lines: node `k` lives at position `k + 3`, so the children
/// of node `k` (nodes `4k+1 ..= 4k+4`, positions `4k+4 ..= 4k+7`) are exactly block `k + 1`. A sift
/// step then reads one aligned 128-byte block instead of 128 bytes straddling three lines.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(128))]
struct Block([Entry; ARITY]);

/// An unused slot: never before any event, so a sift step may compare all four slots of a block.
const EMPTY: Entry = Entry {
    t: u64::MAX,
    from: u64::MAX,
    seq: u64::MAX,
    ev: Ev::Sample,
};

/// A min-heap of entries by (time, from, seq).
#[derive(Debug, Default)]
pub(crate) struct Heap {
    /// Blocks of four slots (see [`Block`]); slots at or past `len` are [`EMPTY`].
    heap: Vec<Block>,
    /// Number of entries.
    len: usize,
}

impl Heap {
    #[inline(always)]
    fn at(&self, node: usize) -> &Entry {
        let p = node + ARITY - 1;
        &self.heap[p / ARITY].0[p % ARITY]
    }

    #[inline(always)]
    fn set(&mut self, node: usize, e: Entry) {
        let p = node + ARITY - 1;
        self.heap[p / ARITY].0[p % ARITY] = e;
    }

    /// Number of entries.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The earliest entry.
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<&Entry> {
        (self.len > 0).then(|| self.at(0))
    }

    /// The entries in heap order.
    #[inline]
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        (0..self.len).map(|k| self.at(k))
    }

    /// Adds an entry.
    pub(crate) fn push(&mut self, e: Entry) {
        let mut i = self.len;
        self.len += 1;
        let pos = i + ARITY - 1; // node i's position (see `Block`)
        if pos / ARITY >= self.heap.len() {
            self.heap.push(Block([EMPTY; ARITY]));
        }
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pe = *self.at(parent);
            if !e.before(&pe) {
                break;
            }
            self.set(i, pe);
            i = parent;
        }
        self.set(i, e);
    }

    /// Removes and returns the earliest entry.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let last = *self.at(self.len);
        self.set(self.len, EMPTY);
        if self.len == 0 {
            return Some(last);
        }
        let top = *self.at(0);
        self.sift_down(last);
        Some(top)
    }

    /// Removes every entry into `out`, in no particular order.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<Entry>) {
        for k in 0..self.len {
            out.push(*self.at(k));
            self.set(k, EMPTY);
        }
        self.len = 0;
    }

    /// Puts `e` at the root's place and moves it down to where it belongs.
    #[inline]
    fn sift_down(&mut self, e: Entry) {
        let n = self.len;
        let mut i = 0;
        loop {
            if ARITY * i + 1 >= n {
                break;
            }
            // Node i's children are block i + 1; unused slots are EMPTY and never win.
            let b = &self.heap[i + 1].0;
            let mut best = 0;
            for c in 1..ARITY {
                if b[c].before(&b[best]) {
                    best = c;
                }
            }
            if !b[best].before(&e) {
                break;
            }
            let child = ARITY * i + 1 + best;
            let be = b[best];
            self.set(i, be);
            i = child;
        }
        self.set(i, e);
    }
}
