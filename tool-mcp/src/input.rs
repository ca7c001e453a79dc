//! A call's requests to its client ([`ClientInput`]), in both protocol eras.
//!
//! * [`SessionInput`]: a session (up to 2025-11-25) sends `elicitation/create`, `sampling/createMessage` and
//!   `roots/list` to the client and waits for the answer.
//! * [`StatelessInput`]: a stateless request (2026-07-28) cannot. A request whose answer the retry carries returns
//!   it; any other one is recorded and fails with [`InputError::Pending`]; the server then answers the call with an
//!   input-required result: the recorded requests, and a `requestState` sealed with the server's key
//!   (HMAC-SHA256, bound to the tool, its canonical arguments, and the call's tenant and principal when it has
//!   them, with an expiry) that carries every answer so far and the handler's round state. The retry opens it (a
//!   tampered, expired or foreign state, or one replayed by another tenant or principal, is refused before the
//!   handler runs) and runs the handler again from the start.
//!
//! A `requestState` is signed, not encrypted: the client can read all of it (the answers, the handler's round
//! state). It cannot change it, or use it for another call or caller. Never put a secret in
//! [`set_round_state`](keel_tools_core::CallContext::set_round_state).

#![allow(deprecated)] // Sampling and roots are deprecated by SEP-2577 from 2026-07-28 on, and still served.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use keel_tools_core::context::{ClientInput, InputError, InputFuture, InputKind, InputRequest};
use rmcp::model::{ClientCapabilities, ClientResult, InputRequests, RequestStateCodec, SealOptions, ServerRequest};
use rmcp::{Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How long a sealed `requestState` stays valid: the time a user has to answer.
pub(crate) const REQUEST_STATE_TTL: Duration = Duration::from_secs(15 * 60);
/// The largest sealed `requestState` the server issues (every answer so far rides in it).
const MAX_REQUEST_STATE: usize = 256 * 1024;

/// A request as JSON-RPC `{"method", "params"}`.
pub(crate) fn wire(request: &InputRequest) -> Value {
    match request {
        InputRequest::Elicit { message, schema } => json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": schema},
        }),
        InputRequest::Sample(params) => json!({"method": "sampling/createMessage", "params": params}),
        InputRequest::Roots => json!({"method": "roots/list"}),
        _ => json!({}),
    }
}

pub(crate) fn supports(capabilities: &ClientCapabilities, kind: InputKind) -> bool {
    match kind {
        InputKind::Elicitation => capabilities.elicitation.is_some(),
        InputKind::Sampling => capabilities.sampling.is_some(),
        InputKind::Roots => capabilities.roots.is_some(),
        _ => false,
    }
}

/// The capability a kind of request needs, as `-32021`'s `requiredCapabilities` names it.
pub(crate) fn required(kind: InputKind) -> ClientCapabilities {
    let builder = ClientCapabilities::builder();
    match kind {
        InputKind::Elicitation => builder.enable_elicitation().build(),
        InputKind::Sampling => builder.enable_sampling().build(),
        InputKind::Roots => builder.enable_roots().build(),
        _ => builder.build(),
    }
}

/// Asks a session's client directly.
pub(crate) struct SessionInput {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) capabilities: ClientCapabilities,
}

impl ClientInput for SessionInput {
    fn supports(&self, kind: InputKind) -> bool {
        supports(&self.capabilities, kind)
    }

    fn request(&self, _key: &str, request: InputRequest) -> InputFuture<'_> {
        Box::pin(async move {
            if !self.supports(request.kind()) {
                return Err(InputError::Unsupported(request.kind()));
            }
            let request: ServerRequest = serde_json::from_value(wire(&request))
                .map_err(|e| InputError::Failed(format!("the request is not a valid MCP request: {e}")))?;
            let answer: ClientResult =
                self.peer.send_request(request).await.map_err(|e| InputError::Failed(e.to_string()))?;
            serde_json::to_value(answer).map_err(|e| InputError::Failed(e.to_string()))
        })
    }
}

/// What a sealed `requestState` carries from one round of a call to the next.
#[derive(Serialize, Deserialize, Default)]
pub(crate) struct RoundState {
    /// Every answer so far, by key.
    #[serde(default)]
    pub(crate) answers: BTreeMap<String, Value>,
    /// The handler's own state ([`keel_tools_core::CallContext::set_round_state`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<Value>,
    /// What keeps the rounds of a call made for a principal one call: its first round's stream and call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) call: Option<RoundCall>,
    /// Where the person's approval of the call stands (`crate::server::ApprovalRules::elicit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<ApprovalRound>,
}

/// Where a stateless call's approval stands, from one round to the next.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalRound {
    /// The person was asked (the retry carries the answer).
    Asked,
    /// The person accepted: the call runs approved in this round and every later one.
    Accepted,
}

/// The stream and call id of a call's first round, which its idempotency key is derived with in every round.
#[derive(Serialize, Deserialize, Clone)]
pub(crate) struct RoundCall {
    pub(crate) stream: String,
    pub(crate) id: String,
}

/// Answers from the retry, requests recorded for the next round.
pub(crate) struct StatelessInput {
    capabilities: ClientCapabilities,
    answers: BTreeMap<String, Value>,
    state_in: Option<Value>,
    state_out: Mutex<Option<Value>>,
    call: Option<RoundCall>,
    pending: Mutex<InputRequests>,
    missing: Mutex<Option<InputKind>>,
    approval: Mutex<Option<ApprovalRound>>,
}

impl StatelessInput {
    pub(crate) fn new(capabilities: ClientCapabilities, round: RoundState, responses: BTreeMap<String, Value>) -> Self {
        let mut answers = round.answers;
        // An answer that is not an object (an `ElicitResult`, `CreateMessageResult`, `ListRootsResult`) is no
        // answer: its request is asked again.
        answers.extend(responses.into_iter().filter(|(_, v)| v.is_object()));
        StatelessInput {
            capabilities,
            answers,
            state_out: Mutex::new(round.state.clone()),
            state_in: round.state,
            call: round.call,
            pending: Mutex::new(InputRequests::new()),
            missing: Mutex::new(None),
            approval: Mutex::new(round.approval),
        }
    }

    /// Where the call's approval stands in this round.
    pub(crate) fn approval(&self) -> Option<ApprovalRound> {
        *self.approval.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records where the call's approval stands, for the next round.
    pub(crate) fn set_approval(&self, approval: Option<ApprovalRound>) {
        *self.approval.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = approval;
    }

    /// Asks the person for the call's approval in the next round, under `key` (it is the only request: the call
    /// stopped before its handler ran).
    pub(crate) fn ask_approval(&self, key: &str, request: &InputRequest) -> Result<(), String> {
        let request = serde_json::from_value(wire(request))
            .map_err(|e| format!("the approval is not a valid MCP input request: {e}"))?;
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.clear();
        pending.insert(key.to_owned(), request);
        self.set_approval(Some(ApprovalRound::Asked));
        Ok(())
    }

    /// The first capability a request needed and the client lacked.
    pub(crate) fn missing(&self) -> Option<InputKind> {
        *self.missing.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The requests of this round that had no answer.
    pub(crate) fn take_pending(&self) -> InputRequests {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// What the next round needs: every answer so far and the handler's state.
    pub(crate) fn next_round(&self) -> RoundState {
        RoundState {
            answers: self.answers.clone(),
            state: self.state_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
            call: self.call.clone(),
            approval: self.approval(),
        }
    }
}

impl ClientInput for StatelessInput {
    fn supports(&self, kind: InputKind) -> bool {
        supports(&self.capabilities, kind)
    }

    fn request(&self, key: &str, request: InputRequest) -> InputFuture<'_> {
        let key = key.to_owned();
        Box::pin(async move {
            if let Some(answer) = self.answers.get(&key) {
                return Ok(answer.clone());
            }
            let kind = request.kind();
            if !self.supports(kind) {
                self.missing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(kind);
                return Err(InputError::Unsupported(kind));
            }
            let request = serde_json::from_value(wire(&request))
                .map_err(|e| InputError::Failed(format!("the request is not a valid MCP input request: {e}")))?;
            self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, request);
            Err(InputError::Pending)
        })
    }

    fn state(&self) -> Option<Value> {
        self.state_in.clone()
    }

    fn set_state(&self, state: Value) {
        *self.state_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(state);
    }
}

/// What binds a sealed state to one call and its caller: the tenant and the principal (each with whether it is
/// there), the tool and its canonical arguments, each length-prefixed so that no two calls write the same bytes.
pub(crate) fn binding(tenant: Option<&str>, principal: Option<&str>, tool: &str, arguments: &Value) -> Vec<u8> {
    fn part(aad: &mut Vec<u8>, part: &[u8]) {
        aad.extend_from_slice(&(part.len() as u64).to_le_bytes());
        aad.extend_from_slice(part);
    }
    let arguments = keel_tools_core::schema::canonical::canonical_json(arguments);
    let mut aad = Vec::with_capacity(tool.len() + arguments.len() + 96);
    aad.extend_from_slice(b"keel/tools/call/2\0");
    for who in [tenant, principal] {
        aad.push(u8::from(who.is_some()));
        part(&mut aad, who.unwrap_or("").as_bytes());
    }
    part(&mut aad, tool.as_bytes());
    part(&mut aad, arguments.as_bytes());
    aad
}

/// Seals the next round's state.
pub(crate) fn seal(codec: &RequestStateCodec, round: &RoundState, binding: &[u8]) -> Result<String, String> {
    let options = SealOptions::new().associated_data(binding).ttl(REQUEST_STATE_TTL);
    let sealed = codec.seal_json_with(round, &options).map_err(|e| e.to_string())?;
    if sealed.len() > MAX_REQUEST_STATE {
        return Err(format!("the call's request state would take {} bytes, over {MAX_REQUEST_STATE}", sealed.len()));
    }
    Ok(sealed)
}

/// Opens a retry's state; `Err` when it was tampered with, expired, or sealed for another call.
pub(crate) fn open(codec: &RequestStateCodec, sealed: &str, binding: &[u8]) -> Result<RoundState, String> {
    codec.open_json_with(sealed, binding).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_its_caller() {
        let args = json!({"b": 1, "a": [true]});
        let anonymous = binding(None, None, "t", &args);
        assert_eq!(anonymous, binding(None, None, "t", &json!({"a": [true], "b": 1})));
        assert_ne!(anonymous, binding(Some("acme"), None, "t", &args));
        assert_ne!(binding(Some("acme"), None, "t", &args), binding(Some("globex"), None, "t", &args));
        assert_ne!(binding(Some("acme"), Some("alice"), "t", &args), binding(Some("acme"), Some("bob"), "t", &args));
        // Whose is which: a tenant is not a principal of the same text, and an empty one is not none.
        assert_ne!(binding(Some("x"), None, "t", &args), binding(None, Some("x"), "t", &args));
        assert_ne!(binding(Some(""), None, "t", &args), anonymous);
        assert_ne!(binding(None, None, "t", &args), binding(None, None, "u", &args));
    }
}
