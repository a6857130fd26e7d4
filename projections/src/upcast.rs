//! Turns a stored payload of any format this build can read into the current [`EventBody`].
//!
//! Format history (also in `schema/events.md`):
//! - 1: the first format. Payloads are the JSON objects documented in `schema/events.md`.
//!
//! When a payload's shape changes, bump [`CURRENT_FORMAT`], add a step here that rewrites the
//! old JSON into the new shape, and keep a log written by the old build in `fixtures/logs/`.

use crate::event::{DecodeError, EventBody};

/// The format version this build writes.
pub const CURRENT_FORMAT: u16 = 1;

/// Why a stored event cannot be read by this build.
#[derive(Debug, thiserror::Error)]
pub enum UpcastError {
    /// Written by a newer build.
    #[error("event format {0} is newer than this build's {CURRENT_FORMAT}")]
    TooNew(u16),
    /// A format no build ever wrote.
    #[error("event format {0} was never written by byre")]
    Unknown(u16),
    /// Its payload does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Upcasts and decodes one stored payload.
/// # Errors
/// [`UpcastError::TooNew`] for a format above [`CURRENT_FORMAT`]; [`UpcastError::Decode`] for
/// an unknown kind or a payload that does not fit its kind.
pub fn upcast(format: u16, kind: &str, payload: &str) -> Result<EventBody, UpcastError> {
    match format {
        1..=CURRENT_FORMAT => Ok(EventBody::from_parts(kind, payload)?),
        0 => Err(UpcastError::Unknown(0)),
        newer => Err(UpcastError::TooNew(newer)),
    }
}
