//! The verdict alone, for the shapes plain Rust types give: a [`Fast`] form lowered, node by node, to a plan that
//! holds only what decides validity, each node one of a few kinds (a closed or open object with its properties, an
//! array with its items, a string among listed values, a scalar with its type and bounds, an `anyOf`).
//!
//! [`Verdict::lower`] answers `None` unless every node reached lowers: anything else (a `$ref` beside other
//! keywords, a `oneOf` that is not a list of distinct string constants, recursive `$ref`s, more than
//! [`MAX_PROPERTIES`] properties, `required` names outside `properties`, an object or array schema without its
//! `type`) keeps jsonschema's verdict. What lowers is what a `#[derive(JsonSchema)]` struct of strings, numbers,
//! booleans, unit-variant enums, options, lists and nested such structs gives.
//!
//! The walk follows the plan, which is acyclic and at most [`MAX_PLAN_DEPTH`] deep, so it never recurses deeper
//! than that whatever the instance: a value too deep for the plan is answered at the plan's leaf (a type check).
//! Its verdicts are jsonschema's (`super::tests::agrees_with_jsonschema` compares them on generated schemas and
//! instances).

use std::collections::HashMap;

use serde_json::{Number, Value};

use crate::text::same;

use super::{
    ARRAY, Additional, Bound, Fast, Node, NodeId, OBJECT, STRING, Size, has_type, integer_of, number_cmp, size_holds,
};

/// Most properties of one object plan; larger objects keep jsonschema's verdict (its lookup is indexed).
pub(in crate::validate) const MAX_PROPERTIES: usize = 16;

/// Deepest plan (nested properties, items and branches) that is lowered.
pub(in crate::validate) const MAX_PLAN_DEPTH: usize = 32;

type PlanId = u32;

/// A schema's verdict plan; see the module docs.
#[derive(Debug)]
pub(in crate::validate) struct Verdict {
    plans: Box<[Plan]>,
}

// An explicit tag: the walk's `match` reads one byte, where a niche-packed tag is decoded from the fields.
#[derive(Debug)]
#[repr(u8)]
enum Plan {
    /// Every value.
    Any,
    /// No value (the `false` schema).
    Never,
    /// A `type` (0: any) with numeric bounds and sizes, and nothing else. When every bound is an integer,
    /// `integers` is the range they leave an integer (both ends included), which is checked instead.
    Leaf { types: u8, bounds: Box<[(Bound, Number)]>, integers: Option<(i128, i128)>, sizes: Box<[(Size, u64)]> },
    /// A string equal to one of these.
    Strings(Box<[Box<str>]>),
    /// An object: each member against its property's plan (or `additional`), every required property present.
    Object { properties: Box<[Property]>, required: usize, additional: Extra, sizes: Box<[(Size, u64)]> },
    /// An array: each item against `items`.
    Array { items: Check, sizes: Box<[(Size, u64)]> },
    /// At least one of the branches.
    AnyOf(Box<[PlanId]>),
}

/// One property of an object plan.
#[derive(Debug)]
struct Property {
    name: Box<str>,
    check: Check,
    required: bool,
}

/// What a member (or item) is checked against: a type alone is checked in place, without a call.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// A value of these types (0: any).
    Type(u8),
    Plan(PlanId),
}

/// Members that are not among an object's properties.
#[derive(Debug, Clone, Copy)]
enum Extra {
    Any,
    Closed,
    Check(Check),
}

impl Verdict {
    /// The plan of `fast`, or `None` when some node reached does not lower (see the module docs).
    pub(in crate::validate) fn lower(fast: &Fast) -> Option<Verdict> {
        let mut lowering = Lowering { fast, plans: Vec::new(), done: HashMap::new(), open: Vec::new() };
        let root = lowering.lower(0, 0)?;
        debug_assert_eq!(root, 0, "the root is lowered first");
        Some(Verdict { plans: lowering.plans.into_boxed_slice() })
    }

    /// Whether `instance` is valid.
    #[inline]
    pub(in crate::validate) fn is_valid(&self, instance: &Value) -> bool {
        self.valid(0, instance)
    }

    #[inline(always)]
    fn check(&self, check: Check, v: &Value) -> bool {
        match check {
            Check::Type(types) => types == 0 || has_type(types, v),
            Check::Plan(plan) => self.valid(plan, v),
        }
    }

    fn valid(&self, id: PlanId, v: &Value) -> bool {
        match &self.plans[id as usize] {
            Plan::Any => true,
            Plan::Never => false,
            Plan::Leaf { types, bounds, integers, sizes } => {
                if *types != 0 && !has_type(*types, v) {
                    return false;
                }
                if let Value::Number(n) = v {
                    let within = match (integers, integer_of(n)) {
                        (Some((low, high)), Some(i)) => *low <= i && i <= *high,
                        _ => bounds.iter().all(|(bound, limit)| bound.holds(number_cmp(n, limit))),
                    };
                    if !within {
                        return false;
                    }
                }
                sizes.iter().all(|&(size, limit)| size_holds(size, limit, v))
            }
            Plan::Strings(values) => match v {
                Value::String(s) => values.iter().any(|value| same(value, s)),
                _ => false,
            },
            Plan::Object { properties, required, additional, sizes } => {
                let Value::Object(members) = v else { return false };
                if !sizes.iter().all(|&(size, limit)| size_holds(size, limit, v)) {
                    return false;
                }
                // Members usually come in the schema's order: try the one after the last match first.
                let (mut present, mut next) = (0, 0);
                for (name, value) in members {
                    let at = match properties.get(next) {
                        Some(p) if same(&p.name, name) => Some(next),
                        _ => properties.iter().position(|p| same(&p.name, name)),
                    };
                    let check = match at {
                        Some(i) => {
                            let property = &properties[i];
                            present += usize::from(property.required);
                            next = i + 1;
                            property.check
                        }
                        None => match additional {
                            Extra::Any => continue,
                            Extra::Closed => return false,
                            Extra::Check(check) => *check,
                        },
                    };
                    if !self.check(check, value) {
                        return false;
                    }
                }
                present == *required
            }
            Plan::Array { items, sizes } => {
                let Value::Array(values) = v else { return false };
                if !sizes.iter().all(|&(size, limit)| size_holds(size, limit, v)) {
                    return false;
                }
                values.iter().all(|item| self.check(*items, item))
            }
            Plan::AnyOf(branches) => branches.iter().any(|&branch| self.valid(branch, v)),
        }
    }
}

struct Lowering<'f> {
    fast: &'f Fast,
    plans: Vec<Plan>,
    /// The plan of each node lowered so far (shared `$defs` are lowered once).
    done: HashMap<NodeId, PlanId>,
    /// The nodes being lowered: meeting one again is a recursive `$ref`, which does not lower.
    open: Vec<NodeId>,
}

impl Lowering<'_> {
    fn lower(&mut self, id: NodeId, depth: usize) -> Option<PlanId> {
        if let Some(&plan) = self.done.get(&id) {
            return Some(plan);
        }
        if depth > MAX_PLAN_DEPTH || self.open.contains(&id) {
            return None;
        }
        let fast = self.fast;
        let node = &fast.nodes[id];
        // A `$ref` with only annotations beside it is its target.
        if let Some(target) = node.reference {
            if !only_reference(node) {
                return None;
            }
            self.open.push(id);
            let plan = self.lower(target, depth + 1);
            self.open.pop();
            let plan = plan?;
            self.done.insert(id, plan);
            return Some(plan);
        }
        // Reserve the slot first, so the root is plan 0 and a parent precedes its children.
        let at = PlanId::try_from(self.plans.len()).ok()?;
        self.plans.push(Plan::Any);
        self.open.push(id);
        let plan = self.plan(node, depth);
        self.open.pop();
        self.plans[at as usize] = plan?;
        self.done.insert(id, at);
        Some(at)
    }

    /// The check of a child node: its type alone when that is all it asserts, else its plan.
    fn check(&mut self, child: NodeId, depth: usize) -> Option<Check> {
        let plan = self.lower(child, depth + 1)?;
        Some(match &self.plans[plan as usize] {
            Plan::Any => Check::Type(0),
            Plan::Leaf { types, bounds, sizes, .. } if *types != 0 && bounds.is_empty() && sizes.is_empty() => {
                Check::Type(*types)
            }
            _ => Check::Plan(plan),
        })
    }

    fn plan(&mut self, node: &Node, depth: usize) -> Option<Plan> {
        if node.nothing {
            return Some(Plan::Never);
        }
        if !node.more {
            return Some(if node.types == 0 {
                Plan::Any
            } else {
                Plan::Leaf { types: node.types, bounds: [].into(), integers: None, sizes: [].into() }
            });
        }
        let no_values = node.constant.is_none() && node.one_of_values.is_none();
        let no_object = no_object(node);
        let no_unions = node.any_of.is_empty() && node.one_of.is_empty();
        let sizes = || -> Box<[(Size, u64)]> { node.sizes.iter().map(|(size, limit, _)| (*size, *limit)).collect() };

        // A string among listed values: `enum`, `const`, or a `oneOf` of distinct string constants (what schemars
        // gives a unit-variant enum whose variants have doc comments).
        if let Some(values) = self.strings(node) {
            return Some(Plan::Strings(values));
        }
        if !no_values {
            return None;
        }
        if node.types == OBJECT && no_unions && node.items.is_none() && node.bounds.is_empty() {
            if node.properties.len() > MAX_PROPERTIES || node.property_index.is_some() {
                return None;
            }
            if !node.required_elsewhere.is_empty() {
                return None;
            }
            let mut properties = Vec::with_capacity(node.properties.len());
            for (name, child, required) in &node.properties {
                properties.push(Property {
                    name: name.as_str().into(),
                    check: self.check(*child, depth)?,
                    required: *required,
                });
            }
            let additional = match node.additional {
                Additional::Any => Extra::Any,
                Additional::Closed => Extra::Closed,
                Additional::Schema(child) => Extra::Check(self.check(child, depth)?),
            };
            return Some(Plan::Object {
                properties: properties.into(),
                required: node.required_properties,
                additional,
                sizes: sizes(),
            });
        }
        if node.types == ARRAY && no_unions && no_object && node.bounds.is_empty() {
            let items = match node.items {
                Some(child) => self.check(child, depth)?,
                None => Check::Type(0),
            };
            return Some(Plan::Array { items, sizes: sizes() });
        }
        if no_object && no_unions && node.items.is_none() && node.types & (OBJECT | ARRAY) == 0 {
            let bounds: Box<[(Bound, Number)]> =
                node.bounds.iter().map(|(bound, limit, _)| (*bound, limit.clone())).collect();
            let integers = integer_range(&bounds);
            return Some(Plan::Leaf { types: node.types, bounds, integers, sizes: sizes() });
        }
        if node.types == 0
            && node.one_of.is_empty()
            && !node.any_of.is_empty()
            && no_object
            && node.items.is_none()
            && node.bounds.is_empty()
            && node.sizes.is_empty()
        {
            let mut branches = Vec::with_capacity(node.any_of.len());
            for branch in &node.any_of {
                branches.push(self.lower(*branch, depth + 1)?);
            }
            return Some(Plan::AnyOf(branches.into()));
        }
        None
    }

    /// The values of a node that admits exactly a list of strings, and asserts nothing else.
    fn strings(&self, node: &Node) -> Option<Box<[Box<str>]>> {
        let only_values = node.types & !STRING == 0
            && node.bounds.is_empty()
            && node.sizes.is_empty()
            && no_object(node)
            && node.items.is_none()
            && node.any_of.is_empty()
            && node.reference.is_none();
        if !only_values {
            return None;
        }
        let as_str = |v: &Value| v.as_str().map(Box::<str>::from);
        match (&node.constant, &node.one_of_values, node.one_of.is_empty()) {
            (Some((c, _)), None, true) => Some([as_str(c)?].into()),
            (None, Some((values, _)), true) => values.iter().map(as_str).collect(),
            (None, None, false) => {
                let mut values: Vec<Box<str>> = Vec::with_capacity(node.one_of.len());
                for &branch in &node.one_of {
                    // Each branch is one string constant, and asserts nothing else.
                    let b = &self.fast.nodes[branch];
                    let value = match (&b.constant, self.strings(b)) {
                        (Some(_), Some(one)) => one.into_vec().pop()?,
                        _ => return None,
                    };
                    // `oneOf` asks for exactly one match: only distinct constants make it "any of".
                    if values.contains(&value) {
                        return None;
                    }
                    values.push(value);
                }
                Some(values.into())
            }
            _ => None,
        }
    }
}

/// The integers within `bounds` (both ends included), when every bound is an integer: an exclusive bound `n` is the
/// inclusive `n ± 1`. Integers of JSON numbers are within `i64`/`u64`, so the `i128` ends never overflow.
fn integer_range(bounds: &[(Bound, Number)]) -> Option<(i128, i128)> {
    if bounds.is_empty() {
        return None;
    }
    let (mut low, mut high) = (i128::MIN, i128::MAX);
    for (bound, limit) in bounds {
        let n = integer_of(limit)?;
        match bound {
            Bound::Minimum => low = low.max(n),
            Bound::ExclusiveMinimum => low = low.max(n + 1),
            Bound::Maximum => high = high.min(n),
            Bound::ExclusiveMaximum => high = high.min(n - 1),
        }
    }
    Some((low, high))
}

/// Whether a node with a `$ref` asserts nothing else.
fn only_reference(node: &Node) -> bool {
    !node.nothing
        && node.types == 0
        && node.constant.is_none()
        && node.one_of_values.is_none()
        && node.bounds.is_empty()
        && node.sizes.is_empty()
        && no_object(node)
        && node.items.is_none()
        && node.any_of.is_empty()
        && node.one_of.is_empty()
}

/// Whether a node asserts nothing about an object's members (no `required`, `properties` or
/// `additionalProperties`).
fn no_object(node: &Node) -> bool {
    node.required.is_empty() && node.properties.is_empty() && matches!(node.additional, Additional::Any)
}
