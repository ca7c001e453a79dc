//! The size and depth checks of untrusted values against their [`Limits`], made before a value is validated or, from
//! text, before it is parsed ([`check_limits`], [`check_limits_scan`]).

use std::fmt::{self, Write as _};

use serde_json::Value;

use super::{Violation, push_escaped_segment, shorten_pointer};
use crate::limits::Limits;

/// Checks `v` against `limits`, never recursing deeper than `max_depth` (at most [`MAX_RECURSIVE_DEPTH`] frames;
/// above that an explicit stack is used) and without allocating.
///
/// A first pass checks the depth exactly and sums an *upper bound* of the compact JSON size (strings and keys as if
/// every byte were escaped, integers by digit count); only when that bound exceeds `max_bytes` is the size counted
/// exactly. Typical arguments are far below the limits, so the exact count (number formatting, escape scan) is
/// skipped; the verdict is always the exact one.
///
/// # Errors
///
/// The first limit exceeded, as a [`Violation`]: for depth, the pointer is the container that is one level too
/// deep; for size, the pointer is the root (`""`).
pub fn check_limits(v: &Value, limits: &Limits) -> Result<(), Violation> {
    check_limits_scan(v, limits).map(|_| ())
}

/// [`check_limits`], also answering whether `v` may hold a `null` anywhere (learnt on the same walk; `true` when
/// the exact walk had to decide, which does not look).
pub fn check_limits_scan(v: &Value, limits: &Limits) -> Result<bool, Violation> {
    if limits.max_depth <= MAX_RECURSIVE_DEPTH {
        let mut scan = Scan::default();
        if size_bound(v, 0, limits.max_depth, &mut scan) && scan.upper <= limits.max_bytes {
            return Ok(scan.null);
        }
    }
    // Too deep, or possibly too big: the exact walk says which, with its violation.
    check_limits_exact(v, limits).map(|()| true)
}

/// Above this `max_depth`, `check_limits` goes straight to its explicit-stack walk.
pub const MAX_RECURSIVE_DEPTH: usize = 128;

/// What the first pass of `check_limits` learns: an upper bound of the compact JSON size, and whether a `null`
/// was seen.
#[derive(Default)]
pub(super) struct Scan {
    pub(super) upper: usize,
    pub(super) null: bool,
}

impl Scan {
    #[inline(always)]
    pub(super) fn add(&mut self, n: usize) {
        self.upper = self.upper.saturating_add(n);
    }

    /// Adds a scalar's bound (members and items that are scalars are measured here, without a call).
    #[inline(always)]
    pub(super) fn scalar(&mut self, v: &Value) {
        fn digits(n: u64) -> usize {
            n.checked_ilog10().map_or(1, |d| d as usize + 1)
        }
        match v {
            Value::Null => {
                self.null = true;
                self.add(4);
            }
            Value::Bool(true) => self.add(4),
            Value::Bool(false) => self.add(5),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => self.add(digits(u)),
                (None, Some(i)) => self.add(digits(i.unsigned_abs()) + 1),
                // Floats (rare in arguments) are measured exactly.
                _ => self.add(float_len(n)),
            },
            // At most 6 bytes (`\u00XX`) per byte, plus the quotes.
            Value::String(s) => self.add(s.len().saturating_mul(6).saturating_add(2)),
            // Containers are walked by `size_bound`.
            Value::Array(_) | Value::Object(_) => {}
        }
    }
}

#[inline(never)]
pub(super) fn float_len(n: &serde_json::Number) -> usize {
    let mut counter = CountingWriter(0);
    let _ = write!(counter, "{n}");
    counter.0
}

/// Adds an upper bound of `v`'s compact JSON size to `scan`; false when `v` nests deeper than `max_depth`.
/// Recursion depth is at most `max_depth + 1`.
pub(super) fn size_bound(v: &Value, depth: usize, max_depth: usize, scan: &mut Scan) -> bool {
    match v {
        Value::Array(a) => {
            if depth >= max_depth {
                return false;
            }
            scan.add(2 + a.len().saturating_sub(1));
            for x in a {
                if matches!(x, Value::Array(_) | Value::Object(_)) {
                    if !size_bound(x, depth + 1, max_depth, scan) {
                        return false;
                    }
                } else {
                    scan.scalar(x);
                }
            }
        }
        Value::Object(o) => {
            if depth >= max_depth {
                return false;
            }
            scan.add(2 + o.len().saturating_sub(1));
            for (k, x) in o {
                // The key, quoted, and the colon.
                scan.add(k.len().saturating_mul(6).saturating_add(3));
                if matches!(x, Value::Array(_) | Value::Object(_)) {
                    if !size_bound(x, depth + 1, max_depth, scan) {
                        return false;
                    }
                } else {
                    scan.scalar(x);
                }
            }
        }
        scalar => scan.scalar(scalar),
    }
    true
}

/// The exact walk behind `check_limits`: no recursion (an explicit stack, at most `max_depth` frames), no
/// allocation on values that contain no array or object.
pub(super) fn check_limits_exact(v: &Value, limits: &Limits) -> Result<(), Violation> {
    enum Frame<'a> {
        Array(std::iter::Enumerate<std::slice::Iter<'a, Value>>, usize),
        Object(serde_json::map::Iter<'a>, &'a str),
    }

    struct Budget {
        used: usize,
        max: usize,
    }
    impl Budget {
        #[inline]
        fn add(&mut self, n: usize) -> Result<(), Violation> {
            self.used = self.used.saturating_add(n);
            if self.used > self.max {
                Err(Violation::new(
                    "",
                    format!("at most {} bytes of JSON", self.max),
                    format!("more than {} bytes", self.max),
                ))
            } else {
                Ok(())
            }
        }
        /// Bytes of a scalar, or of the brackets and commas of a container (its elements are added as visited).
        #[inline]
        fn add_value(&mut self, v: &Value) -> Result<(), Violation> {
            match v {
                Value::Null => self.add(4),
                Value::Bool(b) => self.add(if *b { 4 } else { 5 }),
                Value::Number(n) => {
                    let mut counter = CountingWriter(0);
                    let _ = write!(counter, "{n}");
                    self.add(counter.0)
                }
                Value::String(s) => self.add_str(s),
                Value::Array(a) => self.add(2 + a.len().saturating_sub(1)),
                Value::Object(o) => self.add(2 + o.len().saturating_sub(1)),
            }
        }
        #[inline]
        fn add_str(&mut self, s: &str) -> Result<(), Violation> {
            // Unescaped length first: if that already exceeds the budget, skip the scan.
            self.add(s.len() + 2)?;
            let extra: usize = s
                .bytes()
                .map(|b| match b {
                    b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                    0..=0x1f => 5,
                    _ => 0,
                })
                .sum();
            self.add(extra)
        }
    }

    fn depth_violation(stack: &[Frame<'_>], max_depth: usize) -> Violation {
        let mut pointer = String::new();
        for frame in stack {
            pointer.push('/');
            match frame {
                Frame::Array(_, i) => {
                    let _ = write!(pointer, "{i}");
                }
                Frame::Object(_, k) => push_escaped_segment(&mut pointer, k),
            }
        }
        Violation::new(
            shorten_pointer(&pointer),
            format!("at most {max_depth} levels of nested arrays and objects"),
            format!("more than {max_depth} levels"),
        )
    }

    fn open<'a>(v: &'a Value) -> Option<Frame<'a>> {
        match v {
            Value::Array(a) => Some(Frame::Array(a.iter().enumerate(), 0)),
            Value::Object(o) => Some(Frame::Object(o.iter(), "")),
            _ => None,
        }
    }

    let mut budget = Budget { used: 0, max: limits.max_bytes };
    budget.add_value(v)?;
    let Some(root) = open(v) else { return Ok(()) };
    if limits.max_depth == 0 {
        return Err(depth_violation(&[], 0));
    }
    let mut stack: Vec<Frame<'_>> = Vec::new();
    stack.push(root);
    while let Some(top) = stack.last_mut() {
        let child = match top {
            Frame::Array(it, current) => match it.next() {
                Some((i, child)) => {
                    *current = i;
                    child
                }
                None => {
                    stack.pop();
                    continue;
                }
            },
            Frame::Object(it, current) => match it.next() {
                Some((k, child)) => {
                    *current = k.as_str();
                    budget.add_str(k)?;
                    budget.add(1)?; // ':'
                    child
                }
                None => {
                    stack.pop();
                    continue;
                }
            },
        };
        budget.add_value(child)?;
        if let Some(frame) = open(child) {
            if stack.len() >= limits.max_depth {
                return Err(depth_violation(&stack, limits.max_depth));
            }
            stack.push(frame);
        }
    }
    Ok(())
}

/// Counts the bytes written through `fmt::Write`.
pub(super) struct CountingWriter(usize);

impl fmt::Write for CountingWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}
