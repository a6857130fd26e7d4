//! The folded state as a projection snapshot holds it (`src/log/snapshot.rs` writes and reads
//! the file; ARCHITECTURE.md "Projection snapshots").
//!
//! A snapshot stores two parts:
//! - the state's JSON, exactly the bytes [`crate::digest`] hashes, so the snapshot's digest is
//!   the checkpoint's and is computed once;
//! - the fold's bookkeeping that this JSON leaves out ([`Bookkeeping`]: the `#[serde(skip)]`
//!   fields that `apply` maintains and the digest deliberately ignores).
//!
//! Decoding both gives back a state equal (`==`) to the one encoded.

use crate::ids::SessionId;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sessions::QueuedInput;
use crate::State;

/// Identifies the fold this build performs: a hash of every source file of this crate, made at
/// build time (`projections/build.rs`), as 16 hex digits. A snapshot made by a build with
/// another fingerprint may hold what this build's fold would not produce (a new field, a
/// changed `apply`, an upcaster), so it is not used: start-up folds from seq 1 instead.
pub const FINGERPRINT: &str = env!("BYRE_PROJECTIONS_FINGERPRINT");

/// A state, encoded.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// `serde_json::to_vec(&state)`: what [`crate::digest::digest`] hashes.
    pub state_json: Vec<u8>,
    /// The [`Bookkeeping`] as JSON.
    pub bookkeeping_json: Vec<u8>,
}

/// The fold's bookkeeping left out of the state's JSON: every `#[serde(skip)]` field that
/// `apply` writes must be carried here (today only a session's running turn), or a state
/// loaded from a snapshot would differ from a fold of the log. `tests::a_decoded_state_equals_
/// the_encoded_one` and the start-up tests compare whole states.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Bookkeeping {
    /// By session id, for sessions with something to keep.
    sessions: BTreeMap<SessionId, TurnBookkeeping>,
}

/// [`crate::sessions::Session`]'s `turn_input` and `turn_answered`.
#[derive(Debug, Serialize, Deserialize)]
struct TurnBookkeeping {
    turn_input: Option<QueuedInput>,
    turn_answered: bool,
}

/// Encodes `state` (both parts).
pub fn encode(state: &State) -> Encoded {
    let bookkeeping = Bookkeeping {
        sessions: state
            .sessions
            .iter()
            .filter(|(_, s)| s.turn_input.is_some() || s.turn_answered)
            .map(|(id, s)| {
                (
                    id.clone(),
                    TurnBookkeeping {
                        turn_input: s.turn_input.clone(),
                        turn_answered: s.turn_answered,
                    },
                )
            })
            .collect(),
    };
    // Plain data with ordered maps and string keys: serializing cannot fail.
    Encoded {
        state_json: serde_json::to_vec(state).expect("state serializes"),
        bookkeeping_json: serde_json::to_vec(&bookkeeping).expect("bookkeeping serializes"),
    }
}

/// Decodes what [`encode`] made.
/// # Errors
/// Either part is not what this build encodes (corrupt, or made by another build).
pub fn decode(state_json: &[u8], bookkeeping_json: &[u8]) -> Result<State, serde_json::Error> {
    let mut state: State = serde_json::from_slice(state_json)?;
    let bookkeeping: Bookkeeping = serde_json::from_slice(bookkeeping_json)?;
    for (id, b) in bookkeeping.sessions {
        if let Some(s) = state.sessions.get_mut(&id) {
            s.turn_input = b.turn_input;
            s.turn_answered = b.turn_answered;
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::World;

    #[test]
    fn a_decoded_state_equals_the_encoded_one() {
        let mut w = World::with_task();
        w.ensure_user("bob", "Bob");
        let sid = w.start("hello");
        crate::testkit::ask(&mut w, &sid, "ctx");
        let session = &w.state.sessions[&sid];
        assert!(
            session.turn_input.is_some() && session.turn_answered,
            "the running turn's bookkeeping is set: the case it is kept for"
        );
        let encoded = encode(&w.state);
        let decoded = decode(&encoded.state_json, &encoded.bookkeeping_json).unwrap();
        assert_eq!(decoded, w.state);
        assert_eq!(
            crate::digest::digest_json(&encoded.state_json),
            crate::digest::digest(&w.state)
        );
    }

    #[test]
    fn a_damaged_encoding_is_an_error_not_a_panic() {
        let w = World::with_task();
        let encoded = encode(&w.state);
        let cut = &encoded.state_json[..encoded.state_json.len() / 2];
        assert!(decode(cut, &encoded.bookkeeping_json).is_err());
        assert!(decode(&encoded.state_json, b"[").is_err());
    }

    #[test]
    fn the_fingerprint_is_sixteen_hex_digits() {
        assert_eq!(FINGERPRINT.len(), 16);
        assert!(FINGERPRINT.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
