//! A stable digest of the whole state: SHA-256 over its canonical JSON (ordered maps), so that
//! a rebuild from the log and the live server can be compared (DESIGN.md invariant 2).
//!
//! The digest changes whenever the state's shape changes (a new field); old-log fixtures keep
//! the digest of the build that wrote them, per digest version ([`DIGEST_VERSION`]).

use sha2::{Digest, Sha256};

use crate::State;

/// Bumped whenever the serialized shape of [`State`] changes, or what an existing event folds
/// into (2: CodeBolt store writes fold into `agent_stores`; 3: a session's `streamed`, from
/// `agent.streamed`).
pub const DIGEST_VERSION: u32 = 3;

/// `sha256:` followed by 64 lowercase hex digits.
pub fn digest(state: &State) -> String {
    // The state is plain data with ordered maps: serializing it cannot fail.
    digest_json(&serde_json::to_vec(state).expect("state serializes"))
}

/// The digest of a state already serialized (`serde_json::to_vec(&state)`, as
/// [`crate::persist::encode`] does): the same string [`digest`] gives for that state.
pub fn digest_json(state_json: &[u8]) -> String {
    let hash = Sha256::digest(state_json);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
