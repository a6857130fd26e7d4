//! The running turn's streamed text, per live session: what a page that connects mid-turn is
//! sent first (`agent.streaming`), and what byre records when it stops the turn
//! (`agent.streamed`), so neither a reload nor a graceful restart loses it.
//!
//! Every `agent.delta` carries the session's `delta_seq` (1, 2, … for as long as this server
//! runs the session) and `after_seq`: the seq of the session's last logged event that ended
//! the text before it (`agent.text`, `tool.call`, `turn.started`, `turn.ended`), i.e. the
//! text the delta continues streamed after that event. An `agent.streaming` frame carries the
//! whole text since `after_seq` up to and including delta `delta_seq`, so a page knows
//! exactly which deltas it already has (docs/agents.md, "Streamed text").

use std::time::Instant;

use byre_projections::sessions::{AgentStreamed, Usage};

/// Most bytes of streamed text byre keeps per session (also capped at half the event limit,
/// `serve --max-event-bytes`, since a graceful stop records it as one event). Past it the
/// start is dropped, counted in `dropped_bytes`: the text kept always ends with the latest
/// delta, so a page joining mid-turn has no gap before the live deltas.
pub const STREAMED_TEXT_BYTES: usize = 64 * 1024;

/// One session's running turn, as streamed.
#[derive(Debug, Default)]
pub(crate) struct Streaming {
    /// The text since `after_seq`, at most the bound.
    pub text: String,
    /// Bytes of its start dropped over the bound.
    pub dropped_bytes: u64,
    /// The last delta's number.
    pub delta_seq: u64,
    /// The seq of the logged event the text follows.
    pub after_seq: u64,
    /// The turn's tokens so far.
    pub usage: Usage,
    /// When the turn started, as this server saw it.
    pub started: Option<Instant>,
}

impl Streaming {
    /// Appends `text` (one delta), keeping at most `cap` bytes (the end); returns the delta's
    /// number.
    pub fn push(&mut self, text: &str, cap: usize) -> u64 {
        self.delta_seq += 1;
        self.text.push_str(text);
        if self.text.len() > cap {
            let mut cut = self.text.len() - cap;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.dropped_bytes += cut as u64;
        }
        self.delta_seq
    }

    /// The text was logged (or the turn started or ended) at `seq`: what streams next follows
    /// it. A new or ended turn also starts its usage and clock again.
    pub fn logged(&mut self, seq: u64, turn_boundary: bool) {
        self.text.clear();
        self.dropped_bytes = 0;
        self.after_seq = self.after_seq.max(seq);
        if turn_boundary {
            self.usage = Usage::default();
            self.started = Some(Instant::now());
        }
    }

    /// The `agent.streaming` payload.
    pub fn payload(&self) -> serde_json::Value {
        serde_json::json!({
            "text": self.text,
            "dropped_bytes": self.dropped_bytes,
            "delta_seq": self.delta_seq,
            "after_seq": self.after_seq,
            "usage": self.usage,
        })
    }

    /// What to record for turn `turn` when byre stops it.
    pub fn recorded(&self, turn: u32) -> AgentStreamed {
        AgentStreamed {
            turn,
            text: self.text.clone(),
            dropped_bytes: self.dropped_bytes,
            usage: self.usage,
            duration_ms: self
                .started
                .map(|s| s.elapsed().as_millis() as u64)
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Streaming;

    #[test]
    fn the_text_keeps_its_end_within_the_bound_and_counts_what_it_dropped() {
        let mut s = Streaming::default();
        assert_eq!(s.push("héllo ", 8), 1);
        assert_eq!(s.push("wörld", 8), 2);
        assert!(s.text.len() <= 8, "{}", s.text);
        assert!("héllo wörld".ends_with(&s.text));
        assert_eq!(s.dropped_bytes as usize + s.text.len(), "héllo wörld".len());
        s.logged(7, false);
        assert_eq!((s.text.as_str(), s.dropped_bytes, s.after_seq), ("", 0, 7));
        assert_eq!(s.push("next", 8), 3, "delta numbers go on across blocks");
    }
}
