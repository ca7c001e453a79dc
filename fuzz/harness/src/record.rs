//! What handlers and the policy record, keyed by the call's tenant (unique per checked call).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use keel_tools_core::CallContext;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    Allow,
    Approval,
    Deny,
}

#[derive(Debug, Default)]
pub struct Record {
    /// `(tool, decision, whether the arguments the policy saw were valid)`.
    pub policy: Vec<(String, Decided, bool)>,
    /// `(tool, Some(problem))` when a dynamic handler found its arguments invalid; `None` when they were valid or
    /// the handler is compiled (its arguments were deserialized into typed parameters).
    pub invoked: Vec<(String, Option<String>)>,
    /// A record whose call had no tenant (never happens in the harness; counted to prove it).
    pub untracked: bool,
}

fn records() -> &'static Mutex<HashMap<String, Record>> {
    static RECORDS: OnceLock<Mutex<HashMap<String, Record>>> = OnceLock::new();
    RECORDS.get_or_init(Default::default)
}

pub(crate) fn with_record<R>(tenant: Option<&str>, f: impl FnOnce(&mut Record) -> R) -> R {
    let mut map = records().lock().unwrap_or_else(|p| p.into_inner());
    match tenant {
        Some(t) => f(map.entry(t.to_owned()).or_default()),
        None => {
            let r = map.entry(String::new()).or_default();
            r.untracked = true;
            f(r)
        }
    }
}

pub(crate) fn take_record(tenant: &str) -> Record {
    records().lock().unwrap_or_else(|p| p.into_inner()).remove(tenant).unwrap_or_default()
}

/// Records that a handler ran; `problem` is what a dynamic handler found wrong with its arguments.
pub(crate) fn invoked(ctx: &CallContext, problem: Option<String>) {
    with_record(ctx.tenant(), |r| r.invoked.push((ctx.tool_name().to_owned(), problem)));
}

/// Handler invocations recorded for calls without a tenant (must stay 0).
pub fn untracked_invocations() -> usize {
    let map = records().lock().unwrap_or_else(|p| p.into_inner());
    map.get("").map_or(0, |r| r.invoked.len())
}
