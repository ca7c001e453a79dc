//! Arrays: valid ones (`items`, `prefixItems`, lengths, `uniqueItems`) and broken ones.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::types::any_value;
use super::{At, Broken, Gen, MAX_ITEMS, R, S, Unsupported, show};
use crate::imports::vocabulary;

impl<'a> Gen<'a> {
    /// Arrays of valid items within the lengths, unique if `uniqueItems` says so.
    pub(super) fn array(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        if min > MAX_ITEMS {
            return Err(Unsupported::new(pointer, format!("a `minItems` above {MAX_ITEMS}")));
        }
        let max = m.get("maxItems").and_then(Value::as_u64).map(|n| n as usize);
        if max.is_some_and(|max| max < min) {
            return Err(Unsupported::new(pointer, "array lengths that no value meets"));
        }
        let prefix: &[Value] = match m.get("prefixItems") {
            None => &[],
            Some(Value::Array(p)) => p,
            Some(_) => return Err(Unsupported::new(pointer, "`prefixItems` that is not a list")),
        };
        let items = m.get("items");
        let closed = items == Some(&Value::Bool(false));
        // How many prefix items, and how many after them.
        let used = prefix.len().min(max.unwrap_or(usize::MAX));
        let mut fixed = Vec::with_capacity(used);
        for (i, p) in prefix.iter().take(used).enumerate() {
            fixed.push(self.valid(p, &format!("{pointer}/prefixItems/{i}"), at.child())?);
        }
        let rest_min = min.saturating_sub(used);
        let rest_max = if closed {
            0
        } else if at.soft() {
            rest_min
        } else {
            max.map_or(rest_min + 4, |max| max.saturating_sub(used)).min(rest_min + 5)
        };
        if closed && rest_min > 0 {
            return Err(Unsupported::new(pointer, "`minItems` beyond the closed tuple"));
        }
        let rest: BoxedStrategy<Vec<Value>> = if rest_max == 0 {
            Just(Vec::new()).boxed()
        } else {
            let item = match items {
                None => any_value(at.child()),
                Some(schema) => self.valid(schema, &format!("{pointer}/items"), at.child())?,
            };
            proptest::collection::vec(item, rest_min..=rest_max).boxed()
        };
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let strategy = (fixed, rest).prop_map(|(mut a, b)| {
            a.extend(b);
            a
        });
        if unique {
            Ok(strategy
                .prop_filter("unique items", |a| {
                    a.iter().enumerate().all(|(i, x)| a[..i].iter().all(|y| !vocabulary::json_equal(x, y)))
                })
                .prop_map(Value::Array)
                .boxed())
        } else {
            Ok(strategy.prop_map(Value::Array).boxed())
        }
    }

    /// Arrays `m` refuses: too short, too long, an item too many for a closed tuple, an item twice, one item broken.
    pub(super) fn array_breaks(
        &self,
        m: &'a Map<String, Value>,
        pointer: &str,
        instance: &str,
        at: At,
    ) -> R<Vec<Broken>> {
        let mut out = Vec::new();
        let here = show(instance);
        let item_schema = m.get("items").filter(|i| i.is_object() || **i == Value::Bool(true));
        let prefix: &[Value] = m.get("prefixItems").and_then(Value::as_array).map_or(&[], Vec::as_slice);
        let item = |i: usize| -> R<S> {
            match prefix.get(i) {
                Some(p) => self.valid(p, &format!("{pointer}/prefixItems/{i}"), at.child()),
                None => match item_schema {
                    Some(s) => self.valid(s, &format!("{pointer}/items"), at.child()),
                    None => Ok(Just(json!("x")).boxed()),
                },
            }
        };
        let items = |n: usize| -> R<BoxedStrategy<Vec<Value>>> { Ok((0..n).map(item).collect::<R<Vec<_>>>()?.boxed()) };
        let min = m.get("minItems").and_then(Value::as_u64);
        let max = m.get("maxItems").and_then(Value::as_u64);
        if let Some(n) = min.filter(|n| (1..=64).contains(n)) {
            let broken = format!("{here}: {} items where minItems is {n}", n - 1);
            out.push(items(n as usize - 1)?.prop_map(move |a| (Value::Array(a), broken.clone())).boxed());
        }
        if let Some(n) = max.filter(|n| *n < 64) {
            let broken = format!("{here}: {} items where maxItems is {n}", n + 1);
            out.push(items(n as usize + 1)?.prop_map(move |a| (Value::Array(a), broken.clone())).boxed());
        } else if m.get("items") == Some(&Value::Bool(false)) && !prefix.is_empty() && prefix.len() < 64 {
            let n = prefix.len();
            let broken = format!("{here}: an item after the {n} the tuple holds");
            out.push(
                items(n)?
                    .prop_map(move |mut a| {
                        a.push(json!("x"));
                        (Value::Array(a), broken.clone())
                    })
                    .boxed(),
            );
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|n| n >= 2) && prefix.is_empty() {
            let lo = min.unwrap_or(0).max(2) as usize;
            let broken = format!("{here}: the same item twice where items must be unique");
            out.push(
                items(lo - 1)?
                    .prop_filter("at least one item", |a| !a.is_empty())
                    .prop_map(move |mut a| {
                        a.push(a[0].clone());
                        (Value::Array(a), broken.clone())
                    })
                    .boxed(),
            );
        }
        // One item broken, the others valid, within the length bounds.
        let count = (min.unwrap_or(0) as usize).max(1);
        if count <= 64 && max.is_none_or(|n| n as usize >= count) {
            for i in 0..count.min(prefix.len().max(1)) {
                let schema = match prefix.get(i) {
                    Some(p) => p,
                    None => match m.get("items") {
                        Some(s) if s.is_object() => s,
                        _ => continue,
                    },
                };
                let sub =
                    if i < prefix.len() { format!("{pointer}/prefixItems/{i}") } else { format!("{pointer}/items") };
                for broken_item in self.invalid(schema, &sub, &format!("{instance}/{i}"), at.child(), None)? {
                    let others = items(count)?;
                    out.push(
                        (others, broken_item)
                            .prop_map(move |(mut a, (v, broken))| {
                                a[i] = v;
                                (Value::Array(a), broken)
                            })
                            .boxed(),
                    );
                }
            }
        }
        Ok(out)
    }
}
