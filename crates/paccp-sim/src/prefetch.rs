//! Cache prefetch hints of the event loop's look-ahead (no effect on results; no-ops off x86-64).

/// Hints the CPU to load the cache line at `p` (no effect on results; a no-op off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and does not change memory; `p` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (p as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of every cache line of `*p`.
#[inline(always)]
pub(crate) fn prefetch_all<T>(p: &T) {
    let base = (p as *const T).cast::<u8>();
    for off in (0..std::mem::size_of::<T>()).step_by(64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and does not change memory; the address is inside `*p`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                base.wrapping_add(off).cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (base, off);
    }
}
