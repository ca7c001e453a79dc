//! Building a [`Registry`](crate::Registry) by hand ([`RegistryBuilder`]) and narrowing it to the
//! [`ToolView`](crate::ToolView) of a run or turn ([`ViewBuilder`]), with what each can report: [`RegistryError`],
//! [`UnknownTools`], and the listings [`ToolList`] and [`ToolDescriptions`].
//!
//! The files: `tools.rs` is the registry of every linked tool and its builder; `view.rs` is a view of it, what one
//! run or turn allows and the model is shown.

pub(crate) mod tools;
pub(crate) mod view;

pub use tools::{RegistryBuilder, RegistryError, RegistryProblem};
pub use view::{ExecutorEntry, ToolDescriptions, ToolList, UnknownTools, ViewBuilder};
