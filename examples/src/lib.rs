//! The domain behind keel's runnable examples, shared with the test suite so that what the demo prints is what
//! the tests assert.
//!
//! - [`desk`]: the incident desk: `lookup_incident` (read) and `create_ticket` (write).
//! - [`cards`]: the task-card bureau: `read_task_cards`, `validate_task_card`, `build_status_report`,
//!   `propose_status_update`, and the three batch scenarios (two-calls, stop-after-decision, missing-file).
//! - [`status`]: `get_service_status` and `search_incidents`, for the catalogue demo.
//! - [`replicas`]: replica processes of one PostgreSQL catalogue, driven from the replica demo and its tests.

pub mod cards;
pub mod desk;
pub mod replicas;
pub mod status;
