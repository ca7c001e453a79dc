//! What the pending-call stores keep of a [`PendingCall`]: its JSON, verbatim, under its key.

use keel_tools_core::runs::PendingCall;

use crate::error::StateError;

/// The key, the record's JSON and its expiry, for a row.
pub(crate) fn encode(pending: &PendingCall) -> (String, String, i64) {
    // A PendingCall is strings, integers and a JSON value: it always serialises.
    let text = serde_json::to_string(pending).unwrap_or_default();
    (pending.key(), text, i64::try_from(pending.expires_at_ms).unwrap_or(i64::MAX))
}

/// The pending call a row of `table` holds under `key`: `corrupt_row` if its record is not a pending call's JSON,
/// or is the record of another key.
pub(crate) fn decode(table: &str, key: &str, text: &str) -> Result<PendingCall, StateError> {
    let pending: PendingCall = serde_json::from_str(text)
        .map_err(|e| StateError::corrupt(table, key, format!("not a pending call: {e}"), Some(Box::new(e))))?;
    if pending.key() != key {
        return Err(StateError::corrupt(
            table,
            key,
            format!("the record is kept under {key} but is the call of key {}", pending.key()),
            None,
        ));
    }
    Ok(pending)
}
