//! A strategy of integers spread over a range (the bounds, small values, any value) that shrinks towards zero.

use proptest::prelude::*;
use proptest::strategy::ValueTree;

/// Values spread over `[lo, hi]`: the bounds, small values, any value; each shrinks towards zero (or the bound
/// nearest to it) by binary search, whichever way it was drawn.
pub(super) fn spread_i128(lo: i128, hi: i128) -> BoxedStrategy<i128> {
    Spread { lo, hi }.boxed()
}

#[derive(Debug, Clone, Copy)]
struct Spread {
    lo: i128,
    hi: i128,
}

impl Strategy for Spread {
    type Tree = Toward;
    type Value = i128;

    fn new_tree(&self, runner: &mut proptest::test_runner::TestRunner) -> proptest::strategy::NewTree<Self> {
        let (lo, hi) = (self.lo, self.hi);
        let target = 0i128.clamp(lo, hi);
        let (slo, shi) = (lo.max(target - 100), hi.min(target + 100));
        let value = match (0u8..10).new_tree(runner)?.current() {
            0 => lo,
            1 => hi,
            2..=5 => (slo..=shi).new_tree(runner)?.current(),
            _ => (lo..=hi).new_tree(runner)?.current(),
        };
        Ok(Toward::new(value, target))
    }
}

/// A binary search from a value towards a target.
#[derive(Debug, Clone, Copy)]
struct Toward {
    target: i128,
    negative: bool,
    /// The distance from the target: the current one, and the bounds of the search.
    curr: u128,
    lo: u128,
    hi: u128,
}

impl Toward {
    fn new(value: i128, target: i128) -> Toward {
        let distance = value.abs_diff(target);
        Toward { target, negative: value < target, curr: distance, lo: 0, hi: distance }
    }

    fn reposition(&mut self) -> bool {
        let mid = self.lo + (self.hi - self.lo) / 2;
        if mid == self.curr {
            false
        } else {
            self.curr = mid;
            true
        }
    }
}

impl ValueTree for Toward {
    type Value = i128;

    fn current(&self) -> i128 {
        // The distance fits: both ends lie within [i64::MIN, u64::MAX].
        let d = self.curr as i128;
        if self.negative { self.target - d } else { self.target + d }
    }

    fn simplify(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.hi = self.curr;
        self.reposition()
    }

    fn complicate(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.lo = self.curr + 1;
        self.reposition()
    }
}
