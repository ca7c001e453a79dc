//! The schema rule of local rows: a row's input schema may narrow what the compiled handler's schema accepts, never
//! widen it.
//!
//! [`check_narrows`] is a conservative structural check of "every value the row's schema accepts, the compiled
//! schema accepts". It proves the subset relation keyword by keyword and rejects whatever it cannot prove, so a
//! false "widens" is possible (rewrite the row more plainly, or copy the compiled keyword unchanged) but a widening
//! row is never let through. What it understands:
//!
//! * `type` (a row may accept fewer types; `integer` is within `number`);
//! * `enum` / `const` in the row: each value the row accepts is validated against the compiled schema (exact);
//!   `enum` / `const` in the compiled schema need one in the row;
//! * numeric bounds (`minimum`, `maximum`, their exclusive forms, and the ranges of integer `format`s such as
//!   `uint32`), `multipleOf`, string and array lengths, property counts, `uniqueItems`: the row's must be at least
//!   as tight;
//! * `pattern` and `format`: the row must keep the compiled value;
//! * objects: each property the row lists must be accepted by the compiled schema (as a listed property or
//!   through its `additionalProperties`), each compiled property the row does not list must not be opened by the
//!   row's `additionalProperties`, `required` must include the compiled `required`, and `additionalProperties` may
//!   not be opened;
//! * `items`; `$ref` into `$defs` on both sides (recursive schemas included); `allOf`, `anyOf` and `oneOf` (a
//!   compiled `oneOf` only when its branches are disjoint by type or by a constant tag);
//! * annotations (`title`, `description`, `default`, `examples`, ...) are ignored on both sides.
//!
//! Keywords it does not model (`patternProperties`, `prefixItems`, `contains`, `unevaluatedProperties`, `not`,
//! `if`/`then`/`else`, `propertyNames`, `dependent*`, anything unknown) must appear in the row exactly as compiled.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use keel_tools_core::schema::CompiledSchema;
use serde_json::{Map, Value};

/// How deep the check descends before it gives up (and rejects): the vocabulary's one limit.
use keel_tools_core::schema::vocabulary::MAX_DEPTH;

/// Where and why a row's schema accepts more than the compiled one (or could not be shown not to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    /// JSON pointer into the row's schema (`""` for the root).
    pub pointer: String,
    /// Why, phrased to follow "the row's input_schema at POINTER".
    pub reason: String,
}

impl fmt::Display for Widening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(root)" } else { &self.pointer };
        write!(f, "at {at}: {}", self.reason)
    }
}

/// Checks that `row` (a JSON Schema) accepts no value that `compiled` rejects. Both are whole documents (their
/// `$ref`s point into their own `$defs`).
pub fn check_narrows(row: &Value, compiled: &Value) -> Result<(), Widening> {
    let mut ctx = Ctx { row_root: row, comp_root: compiled, in_progress: HashSet::new() };
    ctx.sub(Node { v: row, ptr: String::new() }, Node { v: compiled, ptr: String::new() }, 0)
}

#[derive(Clone)]
struct Node<'a> {
    v: &'a Value,
    ptr: String,
}

struct Ctx<'a> {
    row_root: &'a Value,
    comp_root: &'a Value,
    /// `$ref` pairs being checked (row pointer, compiled pointer): met again, they are assumed to hold, which is
    /// how recursive schemas are compared.
    in_progress: HashSet<(String, String)>,
}

fn widens(ptr: &str, reason: impl Into<String>) -> Result<(), Widening> {
    Err(Widening { pointer: ptr.to_owned(), reason: reason.into() })
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Keywords that carry no assertion (annotations and core keywords) are ignored on both sides.
fn is_annotation(k: &str) -> bool {
    keel_tools_core::schema::vocabulary::asserts_nothing(k)
}

/// The schema's assertion keywords (annotations dropped).
fn assertions(m: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    m.iter().filter(|(k, _)| !is_annotation(k))
}

fn is_trivially_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => assertions(m).next().is_none(),
        _ => false,
    }
}

/// `v` with annotations removed at every level, for equality checks.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_annotation(k) || *k == "$defs" || *k == "definitions")
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn equal_kw(r: &Map<String, Value>, c: &Map<String, Value>, k: &str) -> bool {
    match (r.get(k), c.get(k)) {
        (None, None) => true,
        (Some(a), Some(b)) => strip(a) == strip(b),
        _ => false,
    }
}

/// Resolves a local `$ref` (`#`, `#/$defs/X`) against `root`: the target and its (decoded) pointer.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<(&'a Value, String)> {
    keel_tools_core::schema::vocabulary::resolve_ref(root, reference)
}

/// The set of JSON types a schema's `type` names (`None`: any type).
fn types_of(m: &Map<String, Value>) -> Result<Option<BTreeSet<String>>, ()> {
    match m.get("type") {
        None => Ok(None),
        Some(Value::String(t)) => Ok(Some([t.clone()].into())),
        Some(Value::Array(a)) => {
            a.iter().map(|t| t.as_str().map(str::to_owned).ok_or(())).collect::<Result<BTreeSet<_>, _>>().map(Some)
        }
        Some(_) => Err(()),
    }
}

/// Whether a value of JSON type `t` is within `allowed` (`integer` is within `number`).
fn type_within(t: &str, allowed: &BTreeSet<String>) -> bool {
    allowed.contains(t) || (t == "integer" && allowed.contains("number"))
}

fn applies(types: &Option<BTreeSet<String>>, family: &[&str]) -> bool {
    types.as_ref().is_none_or(|ts| ts.iter().any(|t| family.contains(&t.as_str())))
}

const NUMERIC: &[&str] = &["integer", "number"];

fn int_format_range(format: &str) -> Option<(f64, f64)> {
    Some(match format {
        "int8" => (i8::MIN as f64, i8::MAX as f64),
        "int16" => (i16::MIN as f64, i16::MAX as f64),
        "int32" => (i32::MIN as f64, i32::MAX as f64),
        "int64" | "int" => (i64::MIN as f64, i64::MAX as f64),
        "uint8" => (0.0, u8::MAX as f64),
        "uint16" => (0.0, u16::MAX as f64),
        "uint32" => (0.0, u32::MAX as f64),
        "uint64" | "uint" => (0.0, u64::MAX as f64),
        _ => return None,
    })
}

#[derive(Clone, Copy)]
struct Bound {
    v: f64,
    exclusive: bool,
}

fn bound(m: &Map<String, Value>, lower: bool) -> Option<Bound> {
    let (incl, excl) = if lower { ("minimum", "exclusiveMinimum") } else { ("maximum", "exclusiveMaximum") };
    let mut candidates = Vec::new();
    if let Some(v) = m.get(incl).and_then(Value::as_f64) {
        candidates.push(Bound { v, exclusive: false });
    }
    if let Some(v) = m.get(excl).and_then(Value::as_f64) {
        candidates.push(Bound { v, exclusive: true });
    }
    if let Some((lo, hi)) = m.get("format").and_then(Value::as_str).and_then(int_format_range) {
        candidates.push(Bound { v: if lower { lo } else { hi }, exclusive: false });
    }
    candidates.into_iter().reduce(|a, b| {
        let b_tighter = if lower { b.v > a.v } else { b.v < a.v };
        if b_tighter || (b.v == a.v && b.exclusive) { b } else { a }
    })
}

/// Whether bound `r` is at least as tight as `c`.
fn at_least_as_tight(r: Option<Bound>, c: Option<Bound>, lower: bool) -> bool {
    let Some(c) = c else { return true };
    let Some(r) = r else { return false };
    let strictly = if lower { r.v > c.v } else { r.v < c.v };
    strictly || (r.v == c.v && (r.exclusive || !c.exclusive))
}

fn count(m: &Map<String, Value>, k: &str) -> Option<u64> {
    m.get(k).and_then(|v| v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)))
}

/// Checks `min*`/`max*` count keywords: the row's minimum at least the compiled one, its maximum at most.
fn counts(r: &Map<String, Value>, c: &Map<String, Value>, ptr: &str, min: &str, max: &str) -> Result<(), Widening> {
    // The vocabulary's subset question, per keyword; a row without a minimum allows 0, without a maximum anything.
    let narrows = |k: &str, row: Option<u64>, compiled: u64| {
        row.is_some_and(|rv| {
            keel_tools_core::schema::vocabulary::constraint_narrows(k, &Value::from(rv), &Value::from(compiled))
                == Some(true)
        })
    };
    if let Some(cm) = count(c, min)
        && !narrows(min, Some(count(r, min).unwrap_or(0)), cm)
    {
        return widens(ptr, format!("allows fewer than `{min}: {cm}`"));
    }
    if let Some(cm) = count(c, max)
        && !narrows(max, count(r, max), cm)
    {
        return widens(ptr, format!("allows more than `{max}: {cm}`"));
    }
    Ok(())
}

/// A standalone copy of `node` whose `#/$defs/...` references still resolve (the root's `$defs` attached), for
/// validating values against it; `None` when it refers elsewhere in its document.
fn standalone(node: &Value, root: &Value) -> Option<Value> {
    fn refs_ok(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().all(|(k, v)| {
                if k == "$ref" {
                    v.as_str().is_some_and(|r| r.starts_with("#/$defs/") || r.starts_with("#/definitions/"))
                } else {
                    refs_ok(v)
                }
            }),
            Value::Array(a) => a.iter().all(refs_ok),
            _ => true,
        }
    }
    let mut out = node.clone();
    if let (Value::Object(out_map), Value::Object(root_map)) = (&mut out, root) {
        for defs in ["$defs", "definitions"] {
            if let Some(d) = root_map.get(defs) {
                if !refs_ok(d) {
                    return None;
                }
                out_map.insert(defs.to_owned(), d.clone());
            }
        }
    }
    refs_ok(&out).then_some(out)
}

/// Two schemas that no value satisfies both of, as far as a cheap look can tell: disjoint types, or a
/// property both require with different constants.
fn disjoint(a: &Value, b: &Value, root: &Value) -> bool {
    let deref = |v: &'_ Value| -> Option<Map<String, Value>> {
        let m = v.as_object()?;
        match m.get("$ref").and_then(Value::as_str) {
            Some(r) => resolve(root, r).and_then(|(t, _)| t.as_object().cloned()),
            None => Some(m.clone()),
        }
    };
    let (Some(a), Some(b)) = (deref(a), deref(b)) else { return false };
    let value_set = |m: &Map<String, Value>| -> Option<Vec<Value>> {
        if let Some(c) = m.get("const") {
            return Some(vec![c.clone()]);
        }
        m.get("enum").and_then(Value::as_array).cloned()
    };
    if let (Some(va), Some(vb)) = (value_set(&a), value_set(&b)) {
        return va.iter().all(|x| !vb.contains(x));
    }
    if let (Ok(Some(ta)), Ok(Some(tb))) = (types_of(&a), types_of(&b))
        && ta.iter().all(|t| !(type_within(t, &tb) || (t == "number" && tb.contains("integer"))))
    {
        return true;
    }
    // A tag: a property required by both whose constants differ.
    let props = |m: &Map<String, Value>| m.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required = |m: &Map<String, Value>| -> BTreeSet<String> {
        m.get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .map(str::to_owned)
            .collect()
    };
    let (pa, pb) = (props(&a), props(&b));
    let (ra, rb) = (required(&a), required(&b));
    ra.intersection(&rb).any(|k| match (pa.get(k), pb.get(k)) {
        (Some(x), Some(y)) => match (x.as_object().and_then(value_set), y.as_object().and_then(value_set)) {
            (Some(vx), Some(vy)) => vx.iter().all(|v| !vy.contains(v)),
            _ => false,
        },
        _ => false,
    })
}

/// Keyword groups whose meaning depends on each other within one schema object.
const GROUPS: &[&[&str]] = &[
    &["properties", "patternProperties", "additionalProperties"],
    &["prefixItems", "items"],
    &["contains", "minContains", "maxContains"],
    &["if", "then", "else"],
];

/// The conjunction of two schema objects as one object, when their keywords are independent (no keyword in both,
/// no dependent group split between them, no `unevaluated*`); `None` otherwise.
fn conjoin(a: &Value, b: &Value) -> Option<Value> {
    let (Value::Object(a), Value::Object(b)) = (a, b) else { return None };
    let keys = |m: &Map<String, Value>| -> BTreeSet<String> { assertions(m).map(|(k, _)| k.clone()).collect() };
    let (ka, kb) = (keys(a), keys(b));
    if ka.intersection(&kb).next().is_some() {
        return None;
    }
    let unevaluated = |k: &BTreeSet<String>| k.iter().any(|k| k.starts_with("unevaluated"));
    if unevaluated(&ka) || unevaluated(&kb) {
        return None;
    }
    for group in GROUPS {
        let in_a = group.iter().any(|k| ka.contains(*k));
        let in_b = group.iter().any(|k| kb.contains(*k));
        if in_a && in_b {
            return None;
        }
    }
    let mut out = a.clone();
    for (k, v) in assertions(b) {
        out.insert(k.clone(), v.clone());
    }
    Some(Value::Object(out))
}

fn without(m: &Map<String, Value>, keys: &[&str]) -> Value {
    Value::Object(m.iter().filter(|(k, _)| !keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// Compiled keywords the check models; any other assertion must appear unchanged in the row.
const MODELLED: &[&str] = &[
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "format",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
];

impl<'a> Ctx<'a> {
    fn sub(&mut self, r: Node<'_>, c: Node<'_>, depth: usize) -> Result<(), Widening> {
        if depth > MAX_DEPTH {
            return widens(&r.ptr, "is nested too deeply to check");
        }
        let cm = match c.v {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                return if r.v == &Value::Bool(false) {
                    Ok(())
                } else {
                    widens(&r.ptr, "accepts values where the compiled schema accepts none")
                };
            }
            Value::Object(m) => m,
            _ => return widens(&r.ptr, "is compared with a compiled value that is not a schema"),
        };
        let rm = match r.v {
            Value::Bool(false) => return Ok(()),
            Value::Bool(true) => {
                return if is_trivially_true(c.v) { Ok(()) } else { widens(&r.ptr, "accepts any value (`true`)") };
            }
            Value::Object(m) => m,
            _ => return widens(&r.ptr, "is not a schema (an object or a boolean)"),
        };
        if assertions(cm).next().is_none() {
            return Ok(());
        }

        // References: the compiled side first (the row must satisfy the target and the rest), then the row's
        // (its target alone is wider than the row, so checking it is enough).
        if let Some(reference) = cm.get("$ref") {
            let Some((target, tptr)) = reference.as_str().and_then(|s| resolve(self.comp_root, s)) else {
                return widens(
                    &r.ptr,
                    format!("is compared with a compiled `$ref` {reference} that cannot be resolved"),
                );
            };
            let key = (r.ptr.clone(), tptr.clone());
            if self.in_progress.insert(key.clone()) {
                let result = self.sub(r.clone(), Node { v: target, ptr: tptr }, depth + 1);
                self.in_progress.remove(&key);
                result?;
            }
            let rest = without(cm, &["$ref"]);
            return self.sub(r, Node { v: &rest, ptr: c.ptr }, depth + 1);
        }
        if let Some(reference) = rm.get("$ref") {
            let Some((target, tptr)) = reference.as_str().and_then(|s| resolve(self.row_root, s)) else {
                return widens(&r.ptr, format!("has a `$ref` {reference} that cannot be resolved in the row's schema"));
            };
            let key = (tptr.clone(), format!("{}\u{0}", c.ptr));
            if !self.in_progress.insert(key.clone()) {
                return Ok(());
            }
            let result = self.sub(Node { v: target, ptr: tptr }, c, depth + 1);
            self.in_progress.remove(&key);
            return result;
        }

        // `unevaluatedProperties`/`unevaluatedItems` depend on every applicator beside them: only an unchanged
        // schema is accepted.
        if cm.keys().any(|k| k.starts_with("unevaluated")) {
            return if strip(r.v) == strip(c.v) {
                Ok(())
            } else {
                widens(
                    &r.ptr,
                    "differs from a compiled schema that uses `unevaluatedProperties`/`unevaluatedItems`; keep it unchanged",
                )
            };
        }

        // The row's unions: each branch (with the rest of the row) must be within the compiled schema.
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = rm.get(union) {
                let Some(branches) = branches.as_array() else {
                    return widens(&r.ptr, format!("has a `{union}` that is not an array"));
                };
                let rest = without(rm, &[union]);
                for (i, b) in branches.iter().enumerate() {
                    let ptr = format!("{}/{union}/{i}", r.ptr);
                    let merged = conjoin(&rest, b);
                    let piece = merged.as_ref().unwrap_or(b);
                    self.sub(Node { v: piece, ptr }, c.clone(), depth + 1)?;
                }
                return Ok(());
            }
        }
        // The row's `allOf`: the whole conjunction when it can be written as one schema, else any one part.
        if let Some(parts) = rm.get("allOf") {
            let Some(parts) = parts.as_array() else {
                return widens(&r.ptr, "has an `allOf` that is not an array");
            };
            let rest = without(rm, &["allOf"]);
            let whole = parts.iter().try_fold(rest.clone(), |acc, p| conjoin(&acc, p));
            if let Some(whole) = whole {
                return self.sub(Node { v: &whole, ptr: r.ptr.clone() }, c, depth + 1);
            }
            let first = self.sub(Node { v: &rest, ptr: r.ptr.clone() }, c.clone(), depth + 1);
            if first.is_ok() {
                return first;
            }
            for (i, p) in parts.iter().enumerate() {
                let ptr = format!("{}/allOf/{i}", r.ptr);
                if self.sub(Node { v: p, ptr }, c.clone(), depth + 1).is_ok() {
                    return Ok(());
                }
            }
            return first;
        }

        // The compiled side's compositions.
        if let Some(parts) = cm.get("allOf") {
            let Some(parts) = parts.as_array() else {
                return widens(&r.ptr, "is compared with a compiled `allOf` that is not an array");
            };
            for (i, p) in parts.iter().enumerate() {
                self.sub(r.clone(), Node { v: p, ptr: format!("{}/allOf/{i}", c.ptr) }, depth + 1)?;
            }
            let rest = without(cm, &["allOf"]);
            return self.sub(r, Node { v: &rest, ptr: c.ptr }, depth + 1);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = cm.get(union) {
                let Some(branches) = branches.as_array() else {
                    return widens(&r.ptr, format!("is compared with a compiled `{union}` that is not an array"));
                };
                if union == "oneOf" && strip(r.v) == strip(c.v) {
                    return Ok(());
                }
                if union == "oneOf" {
                    let pairwise = branches
                        .iter()
                        .enumerate()
                        .all(|(i, a)| branches[i + 1..].iter().all(|b| disjoint(a, b, self.comp_root)));
                    if !pairwise {
                        return widens(
                            &r.ptr,
                            "is compared with a compiled `oneOf` whose branches may overlap; keep it unchanged",
                        );
                    }
                }
                let rest = without(cm, &[union]);
                self.sub(r.clone(), Node { v: &rest, ptr: c.ptr.clone() }, depth + 1)?;
                let mut first_error = None;
                for (i, b) in branches.iter().enumerate() {
                    match self.sub(r.clone(), Node { v: b, ptr: format!("{}/{union}/{i}", c.ptr) }, depth + 1) {
                        Ok(()) => return Ok(()),
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                return Err(first_error.unwrap_or(Widening {
                    pointer: r.ptr.clone(),
                    reason: format!("is compared with an empty compiled `{union}`"),
                }));
            }
        }

        // Keywords the check does not model must be copied unchanged.
        for (k, _) in assertions(cm) {
            if !MODELLED.contains(&k.as_str()) && !equal_kw(rm, cm, k) {
                return widens(
                    &r.ptr,
                    format!("drops or changes `{k}`, which the narrowing check does not model; keep it as compiled"),
                );
            }
        }

        // A finite row (`enum`/`const`): validate each value it accepts against the compiled schema.
        if rm.contains_key("enum") || rm.contains_key("const") {
            return self.values_within(&r, rm, &c);
        }
        if cm.contains_key("enum") || cm.contains_key("const") {
            return widens(&r.ptr, "accepts values outside the compiled `enum`/`const`; list the allowed values");
        }

        let Ok(ct) = types_of(cm) else {
            return widens(&r.ptr, "is compared with a compiled `type` that is not valid");
        };
        let Ok(rt) = types_of(rm) else {
            return widens(&r.ptr, "has a `type` that is not a string or an array of strings");
        };
        if let Some(ct) = &ct {
            match &rt {
                None => {
                    return widens(
                        &r.ptr,
                        format!(
                            "accepts any type; the compiled schema accepts only {}",
                            ct.iter().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    );
                }
                Some(rt) => {
                    if let Some(t) = rt.iter().find(|t| !type_within(t, ct)) {
                        return widens(&r.ptr, format!("accepts type `{t}`, which the compiled schema does not"));
                    }
                }
            }
        }

        if applies(&rt, NUMERIC) {
            self.numbers(&r.ptr, rm, cm)?;
        }
        if applies(&rt, &["string"]) {
            for k in ["pattern"] {
                if cm.contains_key(k) && !equal_kw(rm, cm, k) {
                    return widens(&r.ptr, format!("drops or changes `{k}`; keep the compiled `{k}`"));
                }
            }
            counts(rm, cm, &r.ptr, "minLength", "maxLength")?;
        }
        if let Some(f) = cm.get("format").and_then(Value::as_str)
            && int_format_range(f).is_none()
            && !equal_kw(rm, cm, "format")
        {
            return widens(&r.ptr, format!("drops or changes `format: {f}`; keep it"));
        }
        if applies(&rt, &["array"]) {
            self.arrays(&r, rm, &c, cm, depth)?;
        }
        if applies(&rt, &["object"]) {
            self.objects(&r, rm, &c, cm, depth)?;
        }
        Ok(())
    }

    fn values_within(&mut self, r: &Node<'_>, rm: &Map<String, Value>, c: &Node<'_>) -> Result<(), Widening> {
        let mut values: Vec<Value> = match rm.get("enum") {
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return widens(&r.ptr, "has an `enum` that is not an array"),
            None => Vec::new(),
        };
        if let Some(k) = rm.get("const") {
            if rm.contains_key("enum") {
                values.retain(|v| v == k);
            } else {
                values = vec![k.clone()];
            }
        }
        let cannot = |what: &str| Widening { pointer: r.ptr.clone(), reason: format!("cannot be checked: {what}") };
        let row_schema = standalone(r.v, self.row_root).ok_or_else(|| cannot("the row's `$ref`s leave `$defs`"))?;
        let comp_schema =
            standalone(c.v, self.comp_root).ok_or_else(|| cannot("the compiled schema's `$ref`s leave `$defs`"))?;
        let row = CompiledSchema::compile(&row_schema).map_err(|_| cannot("the row's schema does not compile"))?;
        let comp = CompiledSchema::compile(&comp_schema).map_err(|_| cannot("the compiled schema does not compile"))?;
        for v in values.iter().filter(|v| row.is_valid(v)) {
            if !comp.is_valid(v) {
                let shown: String = v.to_string().chars().take(40).collect();
                return widens(&r.ptr, format!("accepts the value {shown}, which the compiled schema rejects"));
            }
        }
        Ok(())
    }

    fn numbers(&mut self, ptr: &str, rm: &Map<String, Value>, cm: &Map<String, Value>) -> Result<(), Widening> {
        for lower in [true, false] {
            let (cb, rb) = (bound(cm, lower), bound(rm, lower));
            if !at_least_as_tight(rb, cb, lower) {
                let (word, v) = if lower { ("lower", cb.map(|b| b.v)) } else { ("upper", cb.map(|b| b.v)) };
                return widens(
                    ptr,
                    format!(
                        "has a looser {word} bound than the compiled {}",
                        v.map_or_else(String::new, |v| v.to_string())
                    ),
                );
            }
        }
        if let Some(m) = cm.get("multipleOf").and_then(Value::as_f64) {
            let ok = rm.get("multipleOf").and_then(Value::as_f64).is_some_and(|k| {
                let q = k / m;
                q >= 1.0 && (q - q.round()).abs() < 1e-9
            });
            if !ok {
                return widens(ptr, format!("does not keep `multipleOf: {m}` (or a multiple of it)"));
            }
        }
        Ok(())
    }

    fn arrays(
        &mut self,
        r: &Node<'_>,
        rm: &Map<String, Value>,
        c: &Node<'_>,
        cm: &Map<String, Value>,
        depth: usize,
    ) -> Result<(), Widening> {
        if cm.contains_key("prefixItems") || rm.contains_key("prefixItems") {
            if !(equal_kw(rm, cm, "prefixItems") && equal_kw(rm, cm, "items")) {
                return widens(
                    &r.ptr,
                    "changes `prefixItems`/`items`, which the narrowing check compares only unchanged",
                );
            }
        } else if let Some(ci) = cm.get("items") {
            match rm.get("items") {
                Some(ri) => self.sub(
                    Node { v: ri, ptr: format!("{}/items", r.ptr) },
                    Node { v: ci, ptr: format!("{}/items", c.ptr) },
                    depth + 1,
                )?,
                None if is_trivially_true(ci) => {}
                None => return widens(&r.ptr, "accepts items of any shape; the compiled schema constrains `items`"),
            }
        }
        counts(rm, cm, &r.ptr, "minItems", "maxItems")?;
        if cm.get("uniqueItems") == Some(&Value::Bool(true)) && rm.get("uniqueItems") != Some(&Value::Bool(true)) {
            return widens(&r.ptr, "drops `uniqueItems: true`");
        }
        Ok(())
    }

    fn objects(
        &mut self,
        r: &Node<'_>,
        rm: &Map<String, Value>,
        c: &Node<'_>,
        cm: &Map<String, Value>,
        depth: usize,
    ) -> Result<(), Widening> {
        let empty = Map::new();
        let cp = cm.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let rp = rm.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let required = |m: &Map<String, Value>| -> BTreeSet<String> {
            m.get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        let (creq, rreq) = (required(cm), required(rm));
        if let Some(missing) = creq.difference(&rreq).next() {
            return widens(&r.ptr, format!("makes `{missing}` optional; the compiled schema requires it"));
        }
        let true_schema = Value::Bool(true);
        let cap = cm.get("additionalProperties").unwrap_or(&true_schema);
        let rap = rm.get("additionalProperties").unwrap_or(&true_schema);

        for (name, rs) in rp {
            let rptr = format!("{}/properties/{}", r.ptr, escape(name));
            match cp.get(name) {
                Some(cs) => {
                    self.sub(
                        Node { v: rs, ptr: rptr },
                        Node { v: cs, ptr: format!("{}/properties/{}", c.ptr, escape(name)) },
                        depth + 1,
                    )?;
                }
                None => {
                    if cap == &Value::Bool(false) {
                        // A property the row lists but never accepts (`false`, or required-less and unreachable)
                        // would be fine; a listed property that accepts values is not.
                        if rs != &Value::Bool(false) {
                            return widens(
                                &rptr,
                                format!("adds the property `{name}`, which the compiled schema does not accept"),
                            );
                        }
                    } else {
                        self.sub(
                            Node { v: rs, ptr: rptr },
                            Node { v: cap, ptr: format!("{}/additionalProperties", c.ptr) },
                            depth + 1,
                        )?;
                    }
                }
            }
        }
        for (name, cs) in cp {
            if rp.contains_key(name) || rap == &Value::Bool(false) {
                continue;
            }
            let ptr = format!("{}/additionalProperties", r.ptr);
            let checked = self.sub(
                Node { v: rap, ptr: ptr.clone() },
                Node { v: cs, ptr: format!("{}/properties/{}", c.ptr, escape(name)) },
                depth + 1,
            );
            if checked.is_err() {
                return widens(&ptr, format!("accepts the property `{name}` in a shape the compiled schema does not"));
            }
        }
        if rap != &Value::Bool(false) && !is_trivially_true(cap) {
            if cap == &Value::Bool(false) {
                return widens(
                    &r.ptr,
                    "accepts properties the compiled schema does not list (`additionalProperties` is not `false`)",
                );
            }
            self.sub(
                Node { v: rap, ptr: format!("{}/additionalProperties", r.ptr) },
                Node { v: cap, ptr: format!("{}/additionalProperties", c.ptr) },
                depth + 1,
            )?;
        }
        counts(rm, cm, &r.ptr, "minProperties", "maxProperties")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compiled() -> Value {
        json!({
            "type": "object",
            "properties": {
                "service_name": {"type": "string", "description": "The service."},
                "limit": {"type": "integer", "format": "uint32", "minimum": 0},
                "level": {"type": "string", "enum": ["low", "high", "critical"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"anyOf": [{"$ref": "#/$defs/Note"}, {"type": "null"}]}
            },
            "required": ["service_name"],
            "additionalProperties": false,
            "$defs": {"Note": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}}
        })
    }

    fn check(row: Value) -> Result<(), Widening> {
        check_narrows(&row, &compiled())
    }

    #[test]
    fn identical_and_narrower_schemas_pass() {
        check(compiled()).unwrap();
        check(json!({
            "type": "object",
            "properties": {
                "service_name": {"type": "string", "enum": ["auth-api", "payments"], "description": "Which one."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "level": {"enum": ["high"]},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}
            },
            "required": ["service_name", "limit"],
            "additionalProperties": false
        }))
        .unwrap();
        check(json!({"type": "object", "properties": {"service_name": {"const": "auth-api"}}, "required": ["service_name"], "additionalProperties": false})).unwrap();
        // The optional note narrowed to "present, never null", through the row's own $defs.
        check(json!({
            "type": "object",
            "properties": {"service_name": {"type": "string"}, "note": {"$ref": "#/$defs/N"}},
            "required": ["service_name"],
            "additionalProperties": false,
            "$defs": {"N": {"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"], "additionalProperties": false}}
        }))
        .unwrap();
    }

    #[test]
    fn widening_schemas_fail_with_a_pointer() {
        let cases = [
            (json!({"type": "object", "properties": {"service_name": {"type": "string"}}, "required": []}), ""),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "extra": {"type": "string"}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/extra",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": ["string", "null"]}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/service_name",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}}, "required": ["service_name"]}),
                "",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/limit",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "limit": {"type": "number", "minimum": 0, "maximum": 5}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/limit",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "level": {"enum": ["low", "unknown"]}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/level",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "level": {"type": "string"}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/level",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "tags": {"type": "array"}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/tags",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/service_name",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}}, "required": ["service_name"], "additionalProperties": {"type": "string"}}),
                "",
            ),
            (
                json!({"type": "object", "properties": {"service_name": {"type": "string"}, "note": {"type": "object"}}, "required": ["service_name"], "additionalProperties": false}),
                "/properties/note",
            ),
            (json!(true), ""),
        ];
        for (row, pointer) in cases {
            let err = check(row.clone()).expect_err(&row.to_string());
            assert!(err.pointer.starts_with(pointer), "{row}: {err}");
        }
    }

    #[test]
    fn recursive_schemas_terminate() {
        let tree = json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "required": ["root"],
            "additionalProperties": false,
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "additionalProperties": false}}
        });
        check_narrows(&tree, &tree).unwrap();
        let mut wider = tree.clone();
        wider["$defs"]["Node"]["additionalProperties"] = json!(true);
        assert!(check_narrows(&wider, &tree).is_err());
    }

    #[test]
    fn unmodelled_keywords_must_stay() {
        let c = json!({"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false});
        check_narrows(&c, &c).unwrap();
        let mut r = c.clone();
        r["patternProperties"] = json!({"^x": {}});
        assert!(check_narrows(&r, &c).is_err());
    }

    #[test]
    fn tagged_one_of_is_checked_branchwise() {
        let c = json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"], "additionalProperties": false},
            {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"], "additionalProperties": false}
        ]});
        let r = json!({"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer", "minimum": 0}}, "required": ["kind", "x"], "additionalProperties": false});
        check_narrows(&r, &c).unwrap();
        let overlapping = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert!(check_narrows(&json!({"type": "integer", "minimum": 3}), &overlapping).is_err());
    }
}
