//! The slot each request is served under (its session's call slot, or a stateless one), and the refusals of the
//! caps.

use std::sync::Arc;

use hyper::header::RETRY_AFTER;
use hyper::{Response, StatusCode};
use tokio::sync::OwnedSemaphorePermit;

use super::admission::{InFlight, RequestSlot};
use super::envelope::Envelope;
use super::responses::text_response;
use super::{McpHttpService, PROTOCOL_HEADER, ResponseBody, SESSION_HEADER};

/// A request's slot before its body is read.
pub(super) enum Pending {
    /// Taken.
    Held(RequestSlot),
    /// Its session is at its cap of calls in flight: what its body is decides.
    SessionFull,
}

/// The cap that refused a request.
#[derive(Debug, Clone, Copy)]
pub(super) enum AtCap {
    /// The calls in flight on its session (`429`).
    Session,
    /// The requests in flight without a session (`503`).
    Stateless,
    /// The open sessions, for an `initialize` (`503`).
    Sessions,
}

impl McpHttpService {
    /// The slot a `POST` is to be served under, as far as its headers tell: its session's call slot when it names
    /// an open session in a revision with sessions, and the SDK serves sessions; else a stateless slot, whatever
    /// session header it carries (the SDK serves a request of 2026-07-28 without a session whatever that header
    /// says, and answers an unknown session at once). A session at its cap is decided once the body is read.
    pub(super) fn slot_before_body(&self, headers: &hyper::HeaderMap) -> Result<Pending, AtCap> {
        if let Some(in_flight) = self.session_of(headers) {
            return Ok(match in_flight.enter(self.limits.max_calls_per_session) {
                Some(slot) => Pending::Held(RequestSlot::Session(slot)),
                None => Pending::SessionFull,
            });
        }
        self.stateless_slot().map(|permit| Pending::Held(RequestSlot::Stateless(permit)))
    }

    /// The rest of the slot's decision, with the body read: a request that names its revision in `_meta` may be
    /// served without a session whatever its headers say, and takes a stateless slot instead of its session's; at
    /// a session's cap, a new request is refused and an answer or notification (part of what was already admitted)
    /// passes without a slot; and an `initialize` without a session is refused while every session is taken.
    pub(super) fn slot_after_body(
        &self,
        pending: Pending,
        headers: &hyper::HeaderMap,
        body: &Envelope<'_>,
    ) -> Result<Option<RequestSlot>, AtCap> {
        match pending {
            Pending::Held(RequestSlot::Session(slot)) => {
                if body.may_name_its_revision() && body.names_its_revision() {
                    drop(slot);
                    return self.stateless_slot().map(|permit| Some(RequestSlot::Stateless(permit)));
                }
                Ok(Some(RequestSlot::Session(slot)))
            }
            Pending::SessionFull => {
                if body.names_its_revision() {
                    self.stateless_slot().map(|permit| Some(RequestSlot::Stateless(permit)))
                } else if body.is_request() {
                    Err(AtCap::Session)
                } else {
                    Ok(None)
                }
            }
            Pending::Held(stateless) => {
                if !headers.contains_key(&SESSION_HEADER) && self.sessions.full() && body.is_initialize() {
                    // Refused here, with no session made and nothing logged as an error.
                    return Err(AtCap::Sessions);
                }
                Ok(Some(stateless))
            }
        }
    }

    /// The in-flight count of the open session a request names, when the SDK serves it in that session as far as
    /// its headers tell: sessions are on, and its `MCP-Protocol-Version` is absent or names a revision with
    /// sessions (before 2026-07-28).
    pub(super) fn session_of(&self, headers: &hyper::HeaderMap) -> Option<Arc<InFlight>> {
        if !self.inner.config.legacy_session_mode {
            return None;
        }
        let id = headers.get(&SESSION_HEADER)?.to_str().ok()?;
        let with_sessions = match headers.get(&PROTOCOL_HEADER) {
            None => true,
            Some(version) => version.to_str().is_ok_and(|v| v < rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str()),
        };
        if with_sessions { self.sessions.in_flight(id) } else { None }
    }

    /// A stateless slot, or the refusal.
    pub(super) fn stateless_slot(&self) -> Result<OwnedSemaphorePermit, AtCap> {
        self.limits.stateless.clone().try_acquire_owned().map_err(|_| AtCap::Stateless)
    }

    /// The refusal of a cap.
    pub(super) fn at_cap(&self, cap: AtCap) -> Response<ResponseBody> {
        match cap {
            AtCap::Session => self.session_busy(),
            AtCap::Stateless => self.stateless_busy(),
            AtCap::Sessions => self.refused(),
        }
    }

    /// A refusal of a cap: `status`, the text, and `Retry-After`.
    pub(super) fn busy(&self, status: StatusCode, text: String) -> Response<ResponseBody> {
        let mut response = text_response(status, text);
        response.headers_mut().insert(RETRY_AFTER, self.limits.retry_after.clone());
        response
    }

    pub(super) fn refused(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server has reached its limit of {} open sessions; retry later\n",
                self.sessions.max
            ),
        )
    }

    pub(super) fn session_busy(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Too Many Requests: this session has {} requests in flight; retry later\n",
                self.limits.max_calls_per_session
            ),
        )
    }

    pub(super) fn stateless_busy(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server has {} requests without a session in flight; retry later\n",
                self.limits.max_stateless_requests
            ),
        )
    }
}
