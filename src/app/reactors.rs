//! Reactors: effects that follow committed events. Each records its intent's outcome as an
//! event, is idempotent (it may see an event twice after a restart), and at start-up
//! reconciles what the projections say should exist with what does.

pub mod finish;
pub mod previews;
pub mod reviews;
pub mod runs;
pub mod snapshots;
pub mod worktrees;
