//! byre's projections: the event types, the entity models and the pure folds over them.
//!
//! Layout:
//! - [`event`]: the event envelope ([`Event`]) and every event kind ([`EventBody`]), with
//!   [`upcast`] turning stored payloads of older formats into current ones.
//! - [`command`]: what callers ask of the writer ([`Command`]), and [`Rejection`].
//! - [`State`]: every projection, with [`State::apply`] (fold one event, total, infallible) and
//!   [`decide`] (a command and the state in, events or a rejection out).
//! - one module per family ([`users`], [`projects`], [`tasks`], [`blobs`], [`workflows`],
//!   [`runs`], [`focus`], …) holding its models, its part of `decide` and its part of `apply`.
//! - [`agent_memory`]: CodeBolt agents' memory, state, todos and vectors per task, folded
//!   from their requests' `tool.call` events.
//! - [`digest`]: a stable digest of the whole state, so `fold(log) == live` can be checked.
//! - [`persist`]: the state as a projection snapshot stores it, and the fingerprint of this
//!   crate's fold that makes a snapshot from another build unusable.
//!
//! Architecture invariant: no I/O, no clock, no randomness, no async. Every time and id comes
//! from the event (or, in `decide`, from [`DecideCtx`]).
#![warn(missing_docs)]

pub mod agent_memory;
pub mod blobs;
pub mod command;
pub mod digest;
pub mod event;
pub mod finish;
pub mod focus;
pub mod fork;
pub mod ids;
pub mod inbox;
pub mod lead;
pub mod persist;
pub mod projects;
pub mod reviews;
pub mod runs;
pub mod sessions;
pub mod snapshots;
pub mod subagents;
pub mod subtasks;
pub mod tasks;
pub mod terminals;
pub mod tools;
pub mod upcast;
pub mod users;
pub mod workflows;

mod state;
#[cfg(test)]
mod testkit;

pub use command::{Command, DecideCtx, Rejection};
pub use event::{Event, EventBody, NewEvent};
pub use state::{decide, derived_events, State};
