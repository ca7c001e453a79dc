//! An allocator that counts, per thread, the bytes held and the most held at once, for tests that show an input is
//! refused before it is parsed. A test binary installs it with
//! `#[global_allocator] static ALLOCATOR: keel_tests::alloc::Counting = keel_tests::alloc::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards to `System`, counting what each thread holds.
pub struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    // `try_with`: a thread being torn down has no counters left; its allocations are not measured.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every method forwards to `System` unchanged; the counters only read the layout's size.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Starts a measurement on this thread: returns what it holds now, and sets its peak to that.
pub fn start() -> isize {
    let before = HELD.with(Cell::get);
    PEAK.with(|p| p.set(before));
    before
}

/// The most bytes this thread held at once since [`start`] returned `before`, beyond `before`.
pub fn peak_since(before: isize) -> usize {
    (PEAK.with(Cell::get) - before).max(0) as usize
}

/// The most bytes this thread held at once while `f` ran, beyond what it held before.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = start();
    let out = f();
    (out, peak_since(before))
}
