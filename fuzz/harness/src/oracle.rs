//! The oracle: an independent validator for the schema subset the tools use.

use keel_tools_core::definition::{Handler, ToolDefinition};
use keel_tools_core::schema::vocabulary;
use serde_json::{Value, json};

/// The executor's default argument limits (`Limits::DEFAULT`), restated.
pub const MAX_DEPTH: usize = 64;
pub const MAX_BYTES: usize = 1024 * 1024;

/// Validates values against one root schema (with its `$defs`).
pub struct Oracle<'a> {
    root: &'a Value,
    /// Compiled tools deserialize into typed parameters: an integral float (`5.0`) passes `"type": "integer"` but
    /// not serde's integer types, so it is treated as invalid (the executor answers `invalid_arguments` without
    /// running the handler in both cases).
    serde_integers: bool,
}

pub(crate) fn integer_range(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// An exact numeric value: an integer, or a finite float.
#[derive(Clone, Copy)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

pub(crate) fn num(n: &serde_json::Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i.into())
    } else if let Some(u) = n.as_u64() {
        Num::Int(u.into())
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Exact comparison of two numbers (no rounding of large integers through `f64`).
fn cmp_num(a: Num, b: Num) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    const LIMIT: f64 = 1.7e38; // below 2^127
    fn float_vs_int(x: f64, n: i128) -> std::cmp::Ordering {
        if x >= LIMIT {
            return Greater;
        }
        if x <= -LIMIT {
            return Less;
        }
        let f = x.floor();
        let fi = f as i128;
        match fi.cmp(&n) {
            Less => Less, // x < f + 1 <= n
            Greater => Greater,
            Equal if x > f => Greater,
            Equal => Equal,
        }
    }
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Int(y)) => float_vs_int(x, y),
        (Num::Int(x), Num::Float(y)) => float_vs_int(y, x).reverse(),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Equal),
    }
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl<'a> Oracle<'a> {
    pub fn new(root: &'a Value, serde_integers: bool) -> Oracle<'a> {
        Oracle { root, serde_integers }
    }

    /// The oracle for a tool's own (model-facing) input schema.
    pub fn for_tool(def: &'a ToolDefinition) -> Oracle<'a> {
        Oracle::new(def.input_schema(), !matches!(def.handler(), Handler::Dynamic(_)))
    }

    /// The schema a local `$ref` points to.
    pub(crate) fn resolve(&self, reference: &Value) -> &'a Value {
        let r = reference.as_str().unwrap_or_else(|| panic!("`$ref` is not a string: {reference}"));
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("the oracle resolves local references only: {r}"));
        self.root.pointer(pointer).unwrap_or_else(|| panic!("dangling reference {r}"))
    }

    /// Valid against the schema, within the executor's limits, as the executor validates: in canonical form
    /// ([`Oracle::canonical`]).
    pub fn valid(&self, v: &Value) -> bool {
        self.cleaned(v).is_some()
    }

    /// The arguments as the handler and the policy see them, if they are valid.
    pub fn cleaned(&self, v: &Value) -> Option<Value> {
        if !within_limits(v) {
            return None;
        }
        let c = self.canonical(v);
        if self.check(self.root, &c, 0).is_ok() { Some(c) } else { None }
    }

    /// `v` in the executor's canonical form: optional properties whose value means "absent" (a `null` the
    /// property does not accept; a `null` where the default is `null` or unstated; the stated default) removed.
    pub fn canonical(&self, v: &Value) -> Value {
        let mut c = v.clone();
        self.clean(self.root, &mut c, 0);
        c
    }

    /// Valid against the schema as it is (no null removal, no limits).
    pub fn valid_strict(&self, v: &Value) -> bool {
        self.check(self.root, v, 0).is_ok()
    }

    /// What is wrong with `v`, for a handler's record (`None`: valid).
    pub fn problem(&self, v: &Value) -> Option<String> {
        self.check(self.root, v, 0).err()
    }

    fn check(&self, schema: &'a Value, v: &Value, depth: usize) -> Result<(), String> {
        if depth > 200 {
            return Err("schema nesting".into());
        }
        let s = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err("false schema".into()),
            Value::Object(s) => s,
            other => panic!("not a schema: {other}"),
        };
        for (key, kv) in s {
            let fail = |what: &str| Err(format!("{key}: {what}"));
            match key.as_str() {
                // Keywords that assert nothing, as the one vocabulary classifies them.
                k if vocabulary::asserts_nothing(k) => {}
                "$ref" => self.check(self.resolve(kv), v, depth + 1)?,
                "type" => {
                    let ok = match kv {
                        Value::String(t) => self.has_type(v, t),
                        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| self.has_type(v, t)),
                        other => panic!("type: {other}"),
                    };
                    if !ok {
                        return fail(&format!("{} is not {kv}", json_type(v)));
                    }
                }
                "enum" => {
                    if !kv.as_array().is_some_and(|e| e.iter().any(|c| json_equal(c, v))) {
                        return fail("not listed");
                    }
                }
                "const" => {
                    if !json_equal(kv, v) {
                        return fail("not the constant");
                    }
                }
                "properties" => {
                    if let (Value::Object(o), Some(props)) = (v, kv.as_object()) {
                        for (name, ps) in props {
                            if let Some(pv) = o.get(name) {
                                self.check(ps, pv, depth + 1).map_err(|e| format!("/{name}: {e}"))?;
                            }
                        }
                    }
                }
                "required" => {
                    if let Value::Object(o) = v {
                        for name in kv.as_array().into_iter().flatten().filter_map(Value::as_str) {
                            if !o.contains_key(name) {
                                return fail(&format!("missing {name}"));
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Value::Object(o) = v {
                        let props = s.get("properties").and_then(Value::as_object);
                        for (name, pv) in o {
                            if props.is_none_or(|p| !p.contains_key(name)) {
                                self.check(kv, pv, depth + 1).map_err(|e| format!("/{name} (extra): {e}"))?;
                            }
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = v {
                        for (i, item) in items.iter().enumerate() {
                            self.check(kv, item, depth + 1).map_err(|e| format!("/{i}: {e}"))?;
                        }
                    }
                }
                "minItems" | "maxItems" => {
                    if let Value::Array(items) = v {
                        let bound = kv.as_u64().unwrap_or_else(|| panic!("{key}: {kv}")) as usize;
                        if (key == "minItems" && items.len() < bound) || (key == "maxItems" && items.len() > bound) {
                            return fail(&format!("{} items", items.len()));
                        }
                    }
                }
                "minLength" | "maxLength" => {
                    if let Value::String(text) = v {
                        let bound = kv.as_u64().unwrap_or_else(|| panic!("{key}: {kv}")) as usize;
                        let n = text.chars().count();
                        if (key == "minLength" && n < bound) || (key == "maxLength" && n > bound) {
                            return fail(&format!("{n} characters"));
                        }
                    }
                }
                "minimum" | "maximum" => {
                    if let (Value::Number(n), Value::Number(b)) = (v, kv) {
                        let ord = cmp_num(num(n), num(b));
                        if (key == "minimum" && ord.is_lt()) || (key == "maximum" && ord.is_gt()) {
                            return fail(&format!("{n} is out of bounds"));
                        }
                    }
                }
                "format" => {
                    let f = kv.as_str().unwrap_or_default();
                    match integer_range(f) {
                        Some((lo, hi)) => {
                            if let Value::Number(n) = v {
                                let n = num(n);
                                if cmp_num(n, Num::Int(lo)).is_lt() || cmp_num(n, Num::Int(hi)).is_gt() {
                                    return fail(&format!("out of the range of {f}"));
                                }
                            }
                        }
                        None if f == "double" || f == "float" => {}
                        None => panic!("the oracle does not know the format `{f}`"),
                    }
                }
                "anyOf" | "oneOf" | "allOf" => {
                    let branches = kv.as_array().unwrap_or_else(|| panic!("{key}: {kv}"));
                    let passing = branches.iter().filter(|b| self.check(b, v, depth + 1).is_ok()).count();
                    let ok = match key.as_str() {
                        "anyOf" => passing >= 1,
                        "oneOf" => passing == 1,
                        _ => passing == branches.len(),
                    };
                    if !ok {
                        return fail(&format!("{passing} of {} branches match", branches.len()));
                    }
                }
                other => panic!("the oracle does not support the keyword `{other}` (in {schema})"),
            }
        }
        Ok(())
    }

    fn has_type(&self, v: &Value, t: &str) -> bool {
        match (t, v) {
            ("null", Value::Null)
            | ("boolean", Value::Bool(_))
            | ("string", Value::String(_))
            | ("array", Value::Array(_))
            | ("object", Value::Object(_))
            | ("number", Value::Number(_)) => true,
            ("integer", Value::Number(n)) => {
                n.is_i64()
                    || n.is_u64()
                    || (!self.serde_integers && n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0))
            }
            (
                "null" | "boolean" | "string" | "array" | "object" | "number" | "integer",
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) | Value::Object(_),
            ) => false,
            (other, _) => panic!("unknown type {other}"),
        }
    }

    /// Follows `$ref`s (their sibling keywords are annotations in the harness schemas).
    fn deref(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..32 {
            match schema.get("$ref") {
                Some(r) => schema = self.resolve(r),
                None => break,
            }
        }
        schema
    }

    /// Removes the optional properties whose value means "absent" ([`Oracle::canonical`]); returns how many.
    fn clean(&self, schema: &'a Value, v: &mut Value, depth: usize) -> usize {
        if depth > 64 {
            return 0;
        }
        let schema = self.deref(schema);
        let Value::Object(s) = schema else { return 0 };
        let mut removed = 0;
        match v {
            Value::Object(o) => {
                let props = s.get("properties").and_then(Value::as_object);
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let extra = s.get("additionalProperties").filter(|e| e.is_object());
                let keys: Vec<String> = o.keys().cloned().collect();
                for key in keys {
                    match props.and_then(|p| p.get(&key)) {
                        Some(ps) if !required.contains(&key.as_str()) && self.means_absent(ps, &o[&key], depth) => {
                            o.remove(&key);
                            removed += 1;
                        }
                        Some(ps) => removed += self.clean(ps, o.get_mut(&key).expect("present"), depth + 1),
                        None => {
                            if let Some(extra) = extra {
                                removed += self.clean(extra, o.get_mut(&key).expect("present"), depth + 1);
                            }
                        }
                    }
                }
                for keyword in ["anyOf", "oneOf", "allOf"] {
                    for branch in s.get(keyword).and_then(Value::as_array).into_iter().flatten() {
                        if keyword == "allOf" || self.branch_matches(branch, v) {
                            removed += self.clean(branch, v, depth + 1);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.get("items") {
                    for item in items {
                        removed += self.clean(item_schema, item, depth + 1);
                    }
                }
            }
            _ => {}
        }
        removed
    }

    /// Whether an optional property's value stands for "absent".
    fn means_absent(&self, ps: &'a Value, v: &Value, depth: usize) -> bool {
        let default = ps.get("default").or_else(|| self.deref(ps).get("default"));
        match (v, default) {
            (Value::Null, None | Some(Value::Null)) => true,
            (Value::Null, Some(_)) => self.check(ps, &Value::Null, depth + 1).is_err(),
            (v, Some(d)) => same_value(v, d),
            (_, None) => false,
        }
    }

    /// A union branch that describes this object: its required keys are present and its fixed values match.
    fn branch_matches(&self, branch: &'a Value, v: &Value) -> bool {
        let branch = self.deref(branch);
        let (Some(props), Value::Object(o)) = (branch.get("properties").and_then(Value::as_object), v) else {
            return false;
        };
        let required = branch.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        let fixed_match = props.iter().all(|(name, ps)| {
            let ps = self.deref(ps);
            let fixed =
                ps.get("const").or_else(|| ps.get("enum").and_then(Value::as_array).filter(|e| e.len() == 1)?.first());
            match (fixed, o.get(name)) {
                (Some(f), Some(actual)) => f == actual,
                _ => true,
            }
        });
        required.into_iter().all(|k| o.contains_key(k)) && fixed_match
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`), as JSON Schema's `enum` and `const` do.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_num(num(x), num(y)).is_eq(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

/// Nesting depth as the executor's limits count it: a scalar is 0, `{}` is 1.
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A lower bound of the compact JSON size of `v` that reads no string's bytes (so a huge string costs nothing).
fn size_lower_bound(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(size_lower_bound).sum::<usize>() + 2,
        Value::Object(o) => o.iter().map(|(k, v)| k.len() + 3 + size_lower_bound(v)).sum::<usize>() + 2,
        _ => 1,
    }
}

/// Within the executor's default argument limits (depth 64, 1 MiB of compact JSON).
pub fn within_limits(v: &Value) -> bool {
    if depth(v) > MAX_DEPTH || size_lower_bound(v) > MAX_BYTES {
        return false;
    }
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut bytes = Count(0);
    depth(v) <= MAX_DEPTH && serde_json::to_writer(&mut bytes, v).is_ok() && bytes.0 <= MAX_BYTES
}

/// Panics unless every keyword of `schema` is one the oracle and the generator understand.
pub fn assert_supported(name: &str, schema: &Value) {
    let oracle = Oracle::new(schema, false);
    // Checking a few values of every JSON type walks every keyword reachable from the root.
    for v in [json!(null), json!(true), json!(1), json!(0.5), json!("s"), json!([]), json!({})] {
        let _ = oracle.check(schema, &v, 0);
    }
    let mut stack = vec![schema];
    while let Some(s) = stack.pop() {
        if let Value::Object(m) = s {
            for (k, v) in m {
                assert!(
                    vocabulary::asserts_nothing(k)
                        || [
                            "$ref",
                            "type",
                            "enum",
                            "const",
                            "properties",
                            "required",
                            "additionalProperties",
                            "items",
                            "minItems",
                            "maxItems",
                            "minLength",
                            "maxLength",
                            "minimum",
                            "maximum",
                            "format",
                            "anyOf",
                            "oneOf",
                            "allOf",
                        ]
                        .contains(&k.as_str()),
                    "tool `{name}`: keyword `{k}` is outside the harness subset"
                );
                match k.as_str() {
                    "properties" | "$defs" => stack.extend(v.as_object().into_iter().flat_map(|o| o.values())),
                    "anyOf" | "oneOf" | "allOf" => stack.extend(v.as_array().into_iter().flatten()),
                    "items" | "additionalProperties" => stack.push(v),
                    _ => {}
                }
            }
        }
    }
}

/// The same JSON value, numbers compared by their value (`1` and `1.0` are equal).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i128(), y.as_i128()) {
            (Some(a), Some(b)) => a == b,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same_value(a, b)))
        }
        _ => a == b,
    }
}
