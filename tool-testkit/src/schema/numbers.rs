//! Integers and numbers: values within the bounds, `multipleOf` and the integer formats' ranges, and numbers
//! outside them.

use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

use super::invalid::short;
use super::spread::spread_i128;
use super::{Gen, R, S, Unsupported, keep};
use crate::imports::vocabulary;

/// The number as an integer, when serde_json holds it as one.
fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

/// An integer as a JSON number.
fn int_value(v: i128) -> Value {
    if let Ok(i) = i64::try_from(v) {
        Value::from(i)
    } else if let Ok(u) = u64::try_from(v) {
        Value::from(u)
    } else {
        // Beyond every 64-bit integer: an integral float.
        Number::from_f64(v as f64).map_or(Value::Null, Value::Number)
    }
}

/// A float as a JSON number; `None` for NaN and the infinities.
fn float_value(v: f64) -> Option<Value> {
    Number::from_f64(v).map(Value::Number)
}

/// `a / b` rounded up, for `b > 0`.
fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 { q } else { q + 1 }
}

/// The bounds of an integer schema, as `[lo, hi]` within what a JSON number serde reads holds.
fn integer_bounds(m: &Map<String, Value>) -> (i128, i128) {
    let (mut lo, mut hi) = (i128::from(i64::MIN), i128::from(u64::MAX));
    let num = |k: &str| m.get(k).and_then(Value::as_number);
    let floor =
        |n: &Number| as_i128(n).unwrap_or_else(|| n.as_f64().map_or(0, |f| f.floor().clamp(-1e30, 1e30) as i128));
    let ceil = |n: &Number| as_i128(n).unwrap_or_else(|| n.as_f64().map_or(0, |f| f.ceil().clamp(-1e30, 1e30) as i128));
    let explicit_min = num("minimum").is_some();
    let explicit_max = num("maximum").is_some();
    if let Some(n) = num("minimum") {
        lo = lo.max(ceil(n));
    }
    if let Some(n) = num("exclusiveMinimum") {
        lo = lo.max(floor(n) + 1);
    }
    if let Some(n) = num("maximum") {
        hi = hi.min(floor(n));
    }
    if let Some(n) = num("exclusiveMaximum") {
        hi = hi.min(ceil(n) - 1);
    }
    if let Some((flo, fhi)) = m.get("format").and_then(Value::as_str).and_then(vocabulary::integer_format_range) {
        // The executor adds a format's range only where no bound is stated.
        if !explicit_min {
            lo = lo.max(flo);
        }
        if !explicit_max {
            hi = hi.min(fhi);
        }
    }
    (lo, hi)
}

impl<'a> Gen<'a> {
    /// Integers within the bounds, the format's range and `multipleOf`.
    pub(super) fn integer(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let (lo, hi) = integer_bounds(m);
        if lo > hi {
            return Err(Unsupported::new(pointer, "integer bounds that no value meets"));
        }
        match m.get("multipleOf").and_then(Value::as_number) {
            None => Ok(spread_i128(lo, hi).prop_map(int_value).boxed()),
            Some(step) => match as_i128(step) {
                Some(step) if step > 0 => {
                    let (klo, khi) = (div_ceil(lo, step), hi.div_euclid(step));
                    if klo > khi {
                        return Err(Unsupported::new(pointer, "no multiple of `multipleOf` within the bounds"));
                    }
                    Ok(spread_i128(klo, khi).prop_map(move |k| int_value(k * step)).boxed())
                }
                _ => {
                    let check = self.compile(&json!({"multipleOf": step}), pointer)?;
                    Ok(spread_i128(lo, hi)
                        .prop_map(int_value)
                        .prop_filter("a multiple of `multipleOf`", move |v| check.is_valid(v))
                        .boxed())
                }
            },
        }
    }

    /// Numbers within the bounds (and an `f32`'s range for `format: float`), multiples of `multipleOf` if any.
    pub(super) fn number(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        // A `float` (an `f32`) holds less than a JSON number.
        let cap = if m.get("format").and_then(Value::as_str) == Some("float") { f64::from(f32::MAX) } else { f64::MAX };
        let mut lo = -cap;
        let mut hi = cap;
        if let Some(x) = num("minimum") {
            lo = lo.max(x);
        }
        if let Some(x) = num("exclusiveMinimum") {
            lo = lo.max(x.next_up());
        }
        if let Some(x) = num("maximum") {
            hi = hi.min(x);
        }
        if let Some(x) = num("exclusiveMaximum") {
            hi = hi.min(x.next_down());
        }
        if lo > hi {
            return Err(Unsupported::new(pointer, "number bounds that no value meets"));
        }
        // Sample within a range whose width is finite.
        const WIDE: f64 = 1e12;
        let (slo, shi) = match (lo > -cap, hi < cap) {
            (true, true) => (lo, hi),
            (true, false) => (lo, lo + WIDE.min(f64::MAX - lo.max(0.0))),
            (false, true) => (hi - WIDE.min(f64::MAX + hi.min(0.0)), hi),
            (false, false) => (-WIDE, WIDE),
        };
        let (slo, shi) = (slo.max(-f64::MAX / 4.0).min(hi), shi.min(f64::MAX / 4.0).max(lo));
        if let Some(step) = num("multipleOf") {
            if step <= 0.0 {
                return Err(Unsupported::new(pointer, "a `multipleOf` that is not positive"));
            }
            let (mut klo, mut khi) = ((slo / step).ceil(), (shi / step).floor());
            // A few million multiples are plenty: around zero when the range holds it.
            const SPAN: f64 = 1e6;
            if khi - klo > 2.0 * SPAN {
                if klo < -SPAN && khi > SPAN {
                    (klo, khi) = (-SPAN, SPAN);
                } else if klo >= -SPAN {
                    khi = klo + 2.0 * SPAN;
                } else {
                    klo = khi - 2.0 * SPAN;
                }
            }
            if klo.is_nan() || khi.is_nan() || klo > khi || klo.abs() > 1e15 || khi.abs() > 1e15 {
                return Err(Unsupported::new(pointer, "multiples of `multipleOf` within the bounds"));
            }
            let check = self.compile(
                &Value::Object(keep(m, &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"])),
                pointer,
            )?;
            return Ok(spread_i128(klo as i128, khi as i128)
                .prop_filter_map("a multiple of `multipleOf`", move |k| {
                    let v = float_value(k as f64 * step)?;
                    check.is_valid(&v).then_some(v)
                })
                .boxed());
        }
        let mut edges: Vec<f64> = vec![lo, hi, 0.0, 1.0, -1.0, 0.5, -2.5]
            .into_iter()
            .filter(|v| (lo..=hi).contains(v) && v.abs() < cap)
            .collect();
        if edges.is_empty() {
            edges.push(slo);
        }
        let integral = if slo.ceil() <= shi.floor() && shi.floor() - slo.ceil() < 1e15 {
            spread_i128(slo.ceil() as i128, shi.floor() as i128).prop_map(int_value).boxed()
        } else {
            Just(float_value(slo).unwrap_or(Value::Null)).boxed()
        };
        Ok(prop_oneof![
            2 => proptest::sample::select(edges).prop_filter_map("a finite number", float_value),
            3 => integral,
            4 => (slo..=shi).prop_filter_map("a finite number", float_value),
        ]
        .boxed())
    }
}

/// Numbers outside the bounds of `m`: for an integer-only schema, integers.
pub(super) fn numeric_breaks(m: &Map<String, Value>, integer: bool) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    let n = |k: &str| m.get(k).and_then(Value::as_number).cloned();
    let below = |x: &Number| -> Option<Value> {
        match as_i128(x) {
            Some(i) if i > i128::from(i64::MIN) => Some(int_value(i - 1)),
            Some(_) => float_value(-1e19),
            None => {
                let f = x.as_f64()?;
                if integer { Some(int_value((f.ceil() as i128).saturating_sub(1))) } else { float_value(f - 1.0) }
            }
        }
    };
    let above = |x: &Number| -> Option<Value> {
        match as_i128(x) {
            Some(i) if i < i128::from(u64::MAX) => Some(int_value(i + 1)),
            Some(_) => float_value(4e19),
            None => {
                let f = x.as_f64()?;
                if integer { Some(int_value((f.floor() as i128).saturating_add(1))) } else { float_value(f + 1.0) }
            }
        }
    };
    let mut push = |v: Option<Value>, why: String| {
        if let Some(v) = v {
            let text = format!("{} {why}", short(&v));
            out.push((v, text));
        }
    };
    let format = m.get("format").and_then(Value::as_str).and_then(vocabulary::integer_format_range);
    match (n("minimum"), format) {
        (Some(min), _) => push(below(&min), format!("is below minimum {min}")),
        (None, Some((lo, _))) => {
            let v = if lo == i128::from(i64::MIN) { float_value(-1e19) } else { Some(int_value(lo - 1)) };
            push(v, format!("is below the range of its format (from {lo})"));
        }
        _ => {}
    }
    match (n("maximum"), format) {
        (Some(max), _) => push(above(&max), format!("is above maximum {max}")),
        (None, Some((_, hi))) => {
            let v = if hi == i128::from(u64::MAX) { float_value(4e19) } else { Some(int_value(hi + 1)) };
            push(v, format!("is above the range of its format (up to {hi})"));
        }
        _ => {}
    }
    if let Some(x) = n("exclusiveMinimum") {
        push(Some(Value::Number(x.clone())), format!("is not above exclusiveMinimum {x}"));
    }
    if let Some(x) = n("exclusiveMaximum") {
        push(Some(Value::Number(x.clone())), format!("is not below exclusiveMaximum {x}"));
    }
    if let Some(step) = n("multipleOf") {
        match as_i128(&step) {
            Some(s) if s >= 2 => push(Some(int_value(s + 1)), format!("is not a multiple of {s}")),
            Some(_) if !integer => push(float_value(0.5), format!("is not a multiple of {step}")),
            Some(_) => {}
            None => push(step.as_f64().and_then(|f| float_value(f * 1.5)), format!("is not a multiple of {step}")),
        }
    }
    out
}
