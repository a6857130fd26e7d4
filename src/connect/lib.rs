//! byre-connect: what both ends of `connectClient` share — the server's machines registry
//! and `byre client` on the user's machine — so that neither needs the other's code.
//!
//! - [`CLOSE_REPLACED`]: the close code of a connection replaced by a newer one.
//! - [`archive`]: the transfers' gzipped tars, packed and safely unpacked on both sides.

#![warn(missing_docs)]

pub mod archive;

/// The WebSocket close code of a connection replaced by a newer one from the same host and
/// login (its reason says so). `byre client` stops rather than reconnect on it.
pub const CLOSE_REPLACED: u16 = 4001;
