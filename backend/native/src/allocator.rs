//! mimalloc's options, set at run time.
//!
//! By default mimalloc gives freed memory back to the operating system 10 ms after it is freed.
//! A training step frees and reallocates gigabytes of activations every step, and on a virtual
//! machine whose host reclaims returned pages, touching them again costs about 8 µs per 4 KiB
//! page: measured on SmolLM2-135M, more time than the arithmetic. A trainer keeps its memory.

use std::ffi::{c_int, c_long};

use libmimalloc_sys as _;

/// mimalloc's `mi_option_purge_delay` (its position in `mi_option_t`, stable since v2.1).
const MI_OPTION_PURGE_DELAY: c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_option_get(option: c_int) -> c_long;
}

/// Freed memory stays with the process for reuse instead of going back to the system. Only
/// effective when mimalloc is the global allocator (the `lachesis` binary's).
pub fn keep_freed_memory() {
    // SAFETY: mi_option_set only stores an integer in mimalloc's option table; any value is
    // valid for the purge delay (-1 means never) and the call is thread-safe.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// mimalloc's current purge delay in milliseconds (-1: never).
pub fn purge_delay_ms() -> c_long {
    // SAFETY: reads one entry of mimalloc's option table; no pointer is involved.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeping_freed_memory_sets_mimallocs_purge_delay_to_never() {
        assert_ne!(super::purge_delay_ms(), -1, "mimalloc's default purges");
        super::keep_freed_memory();
        assert_eq!(super::purge_delay_ms(), -1);
    }
}
