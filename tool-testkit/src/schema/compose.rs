//! `allOf`, `anyOf` and `oneOf`: one branch of a union, or one object merged from the schemas that all apply.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value};

use super::keywords::{asserts_beside, is_assertion};
use super::objects::{Additional, ObjectSpec};
use super::{At, Gen, R, S, Unsupported, join};

impl<'a> Gen<'a> {
    /// Values of a node with `allOf`, `anyOf` or `oneOf` (or a `$ref` beside other keywords).
    pub(super) fn composed(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let list = |k: &str| -> R<Option<&'a Vec<Value>>> {
            match m.get(k) {
                None => Ok(None),
                Some(Value::Array(a)) if !a.is_empty() => Ok(Some(a)),
                Some(_) => Err(Unsupported::new(pointer, format!("`{k}` is not a non-empty list"))),
            }
        };
        let all_of = list("allOf")?;
        let any_of = list("anyOf")?;
        let one_of = list("oneOf")?;
        let own = asserts_beside(m, &["allOf", "anyOf", "oneOf"]);
        match (own, all_of, any_of, one_of) {
            (false, Some(parts), None, None) if parts.len() == 1 => {
                self.valid(&parts[0], &format!("{pointer}/allOf/0"), at.child())
            }
            (false, None, Some(branches), None) => self.union(branches, &format!("{pointer}/anyOf"), at, false),
            (false, None, None, Some(branches)) => self.union(branches, &format!("{pointer}/oneOf"), at, true),
            _ => self.merged_object(m, pointer, at, all_of, any_of.or(one_of), one_of.is_some()),
        }
    }

    /// One branch of `branches`; for `oneOf`, only values no other branch accepts.
    fn union(&self, branches: &'a [Value], pointer: &str, at: At, exclusive: bool) -> R<S> {
        let mut built: Vec<(usize, S, bool)> = Vec::new();
        let mut errors = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let before = self.refs_followed.get();
            match self.valid(branch, &format!("{pointer}/{i}"), at.child()) {
                Ok(s) => built.push((i, s, self.refs_followed.get() == before)),
                Err(e) => errors.push((i, e)),
            }
        }
        if built.is_empty() {
            return Err(errors.into_iter().next().map_or_else(|| Unsupported::new(pointer, "no branch"), |(_, e)| e));
        }
        for (i, e) in &errors {
            self.leave_out(format!("the branch `{pointer}/{i}`"), e);
        }
        if at.soft() && built.iter().any(|(_, _, flat)| *flat) {
            built.retain(|(_, _, flat)| *flat);
        }
        let strategies: Vec<S> = if exclusive && branches.len() > 1 {
            let validators = branches
                .iter()
                .enumerate()
                .map(|(i, b)| self.compile(b, &format!("{pointer}/{i}")))
                .collect::<R<Vec<_>>>()?;
            let validators = Arc::new(validators);
            built
                .into_iter()
                .map(|(i, s, _)| {
                    let validators = Arc::clone(&validators);
                    s.prop_filter("a oneOf value must match exactly one branch", move |v| {
                        validators.iter().enumerate().all(|(j, c)| j == i || !c.is_valid(v))
                    })
                    .boxed()
                })
                .collect()
        } else {
            built.into_iter().map(|(_, s, _)| s).collect()
        };
        Ok(Union::new(strategies).boxed())
    }

    /// An object whose properties are spread over the node itself, `allOf` parts and one of `branches`.
    fn merged_object(
        &self,
        m: &'a Map<String, Value>,
        pointer: &str,
        at: At,
        all_of: Option<&'a Vec<Value>>,
        branches: Option<&'a Vec<Value>>,
        exclusive: bool,
    ) -> R<S> {
        let not_merge = || Unsupported::new(pointer, "a composition that is not a merge of object schemas");
        let mut parts: Vec<(&'a Map<String, Value>, String)> = vec![(m, pointer.to_owned())];
        if let Some(reference) = m.get("$ref") {
            let (target, p) = self.resolve(reference, pointer)?;
            let (target, p) = self.resolve_chain(target, p)?;
            parts.push((target.as_object().ok_or_else(not_merge)?, p));
        }
        for (i, part) in all_of.into_iter().flatten().enumerate() {
            let (part, p) = self.resolve_chain(part, format!("{pointer}/allOf/{i}"))?;
            parts.push((part.as_object().ok_or_else(not_merge)?, p));
        }
        let mut alternatives: Vec<Option<(&'a Map<String, Value>, String)>> = vec![None];
        if let Some(branches) = branches {
            let keyword = if exclusive { "oneOf" } else { "anyOf" };
            alternatives = branches
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let (b, p) = self.resolve_chain(b, format!("{pointer}/{keyword}/{i}"))?;
                    Ok(Some((b.as_object().ok_or_else(not_merge)?, p)))
                })
                .collect::<R<_>>()?;
        }
        let mut strategies = Vec::new();
        let mut errors = Vec::new();
        for alternative in &alternatives {
            let mut all = parts.clone();
            all.extend(alternative.clone());
            match self.merge(&all, pointer).and_then(|spec| self.object(&spec, pointer, at)) {
                Ok(s) => strategies.push(s),
                Err(e) => errors.push((alternative.as_ref().map(|(_, p)| p.clone()), e)),
            }
        }
        if strategies.is_empty() {
            return Err(errors.into_iter().next().map_or_else(not_merge, |(_, e)| e));
        }
        for (branch, e) in &errors {
            self.leave_out(format!("the branch `{}`", branch.as_deref().unwrap_or(pointer)), e);
        }
        let union = Union::new(strategies).boxed();
        if exclusive && let Some(branches) = branches {
            let keyword = format!("{pointer}/oneOf");
            let validators = Arc::new(
                branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| self.compile(b, &format!("{keyword}/{i}")))
                    .collect::<R<Vec<_>>>()?,
            );
            return Ok(union
                .prop_filter("a oneOf value must match exactly one branch", move |v| {
                    validators.iter().filter(|c| c.is_valid(v)).count() == 1
                })
                .boxed());
        }
        Ok(union)
    }

    /// One object description from object schemas that all apply.
    fn merge(&self, parts: &[(&'a Map<String, Value>, String)], pointer: &str) -> R<ObjectSpec<'a>> {
        const OBJECT_KEYS: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "unevaluatedProperties",
            "$ref",
            "allOf",
            "anyOf",
            "oneOf",
        ];
        let mut spec = ObjectSpec::default();
        let mut closed_parts = 0;
        for (part, p) in parts {
            if let Some(k) = part.keys().find(|k| is_assertion(k) && !OBJECT_KEYS.contains(&k.as_str())) {
                return Err(Unsupported::new(p, format!("`{k}` in a merged object schema")));
            }
            self.check_keywords(part, p)?;
            if let Some(t) = part.get("type")
                && t != "object"
            {
                return Err(Unsupported::new(p, "a merged schema that is not an object schema"));
            }
            let nested = part.contains_key("allOf") || part.contains_key("anyOf") || part.contains_key("oneOf");
            if nested && !std::ptr::eq(*part, parts[0].0) {
                return Err(Unsupported::new(p, "a composition nested in a merged object schema"));
            }
            if let Some(Value::Object(props)) = part.get("properties") {
                for (name, schema) in props {
                    match spec.properties.iter().find(|(n, _, _)| n == name) {
                        Some((_, existing, _)) if *existing == schema => {}
                        Some(_) => {
                            return Err(Unsupported::new(
                                p,
                                format!("the property `{name}` is declared twice, differently"),
                            ));
                        }
                        None => spec.properties.push((name.clone(), schema, join(&format!("{p}/properties"), name))),
                    }
                }
            }
            for r in part.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(r) = r.as_str()
                    && !spec.required.iter().any(|x| x == r)
                {
                    spec.required.push(r.to_owned());
                }
            }
            if part.contains_key("additionalProperties") {
                closed_parts += 1;
            }
        }
        if closed_parts > 0 && parts.len() > 1 {
            return Err(Unsupported::new(pointer, "`additionalProperties` in an object merged from several schemas"));
        }
        spec.additional = Additional::Closed;
        Ok(spec)
    }
}
