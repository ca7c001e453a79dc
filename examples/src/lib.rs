//! The domain behind keel's runnable examples, shared with the test suite so that what the demo prints is what
//! the tests assert.
//!
//! - [`desk`]: seed 000's incident desk: `lookup_incident` (read) and `create_ticket` (write).
//! - [`cards`]: seed 004's task-card bureau: `read_task_cards`, `validate_task_card`, `build_status_report`,
//!   `propose_status_update`, and the three batch scenarios (two-calls, stop-after-decision, missing-file).
//! - [`status`]: seed 001's `get_service_status` and `search_incidents`, for the catalogue demo.

pub mod cards;
pub mod desk;
pub mod status;
