//! A channel's pipe: the packets it accepted and has not delivered, in FIFO order, in a ring buffer
//! of a power-of-two size. A `VecDeque` does the same in 32 bytes of the channel; this one takes 24
//! (the boxed buffer, a 32-bit head and a 32-bit length), which lets everything a hop reads of a
//! channel fit in one cache line ([`super::channel::Channel`]).
use super::channel::InPipe;

/// A FIFO ring of [`InPipe`] entries.
#[derive(Debug, Default)]
pub(crate) struct Pipe {
    /// The ring (its length a power of two, or 0 before the first packet).
    buf: Box<[InPipe]>,
    head: u32,
    len: u32,
}

impl Pipe {
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head as usize + i) & (self.buf.len().wrapping_sub(1))
    }

    /// Packets in the pipe.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th packet from the front.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> Option<&InPipe> {
        if i < self.len as usize {
            self.buf.get(self.slot(i))
        } else {
            None
        }
    }

    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&InPipe> {
        self.get(0)
    }

    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<InPipe> {
        let p = *self.front()?;
        self.head = self.slot(1) as u32;
        self.len -= 1;
        Some(p)
    }

    #[inline(always)]
    pub(crate) fn push_back(&mut self, p: InPipe) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let s = self.slot(self.len as usize);
        self.buf[s] = p;
        self.len += 1;
    }

    /// Doubles the capacity (at least 8 entries), moving the packets to the front of the new buffer.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(8);
        assert!(cap <= 1 << 31, "a channel's pipe outgrew 2^31 packets");
        let mut buf = vec![InPipe::EMPTY; cap].into_boxed_slice();
        for (i, b) in buf.iter_mut().take(self.len as usize).enumerate() {
            *b = self.buf[self.slot(i)];
        }
        self.buf = buf;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_a_fifo_across_wraps_and_growth() {
        let mut p = Pipe::default();
        let mut model = std::collections::VecDeque::new();
        let mut x: u64 = 3;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (x >> 40) % 5 < 3 || model.is_empty() {
                p.push_back(InPipe {
                    done: step,
                    ..InPipe::EMPTY
                });
                model.push_back(step);
            } else {
                assert_eq!(p.pop_front().map(|e| e.done), model.pop_front());
            }
            assert_eq!(p.len(), model.len());
            assert_eq!(p.front().map(|e| e.done), model.front().copied());
            let k = model.len() / 2;
            assert_eq!(p.get(k).map(|e| e.done), model.get(k).copied());
        }
    }
}
