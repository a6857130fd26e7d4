//! The bounds on what an agent process sends byre (DESIGN.md invariant 10, docs/limits.md):
//! the one place vendor output is cut before it reaches the writer, and the line reader
//! that never holds more than the hard line limit.
//!
//! - An item whose payload JSON is over the event limit (`serve --max-event-bytes`) first
//!   loses its raw vendor line (replaced by a note of its size), then has its one large field
//!   (agent text, a tool call's input, a tool result's output, a turn's final text) cut to fit,
//!   with a marker; the whole field is kept as a blob the event names in `cut`. Anything still
//!   over (huge ids or errors, a subagent's prompt) becomes a `vendor.unrecognized` of the
//!   line's first bytes.
//! - A stdout line over the hard limit (`serve --max-line-bytes`) is never held whole: the
//!   reader drops it as soon as it passes the limit and says so; the session loop then ends
//!   the process and the turn with that error.

use byre_projections::sessions::{cut_bytes, Cut, Vendor, VendorItem, VendorUnrecognized};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// `serve --max-event-bytes`'s default: 1 MiB of payload per event.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;
/// `serve --max-line-bytes`'s default: 64 MiB for one vendor output line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of a live-only delta (`agent.delta`) above which it is cut, with [`DELTA_MARKER`].
pub(crate) fn cut_delta(text: &mut String, limit: usize) {
    if text.len() > limit {
        let keep = cut_bytes(text, limit.saturating_sub(DELTA_MARKER.len())).len();
        text.truncate(keep);
        text.push_str(DELTA_MARKER);
    }
}

/// What ends a delta byre cut (the logged text says more).
const DELTA_MARKER: &str = " [… cut by byre]";

/// The field of `item` that, over the limit, is cut and kept whole as a blob: its whole
/// text, when `item`'s payload is over `limit` bytes and that field alone would not fit
/// (the caller stores it and passes the blob to [`cut_item`]). `None` when the item fits, or
/// fits once its raw line is dropped, or has no such field.
pub(crate) fn overflow(item: &VendorItem, limit: usize) -> Option<String> {
    if payload_bytes(item) <= limit {
        return None;
    }
    let mut without_raw = item.clone();
    drop_raw(&mut without_raw, limit);
    if payload_bytes(&without_raw) <= limit {
        return None;
    }
    match item {
        VendorItem::Text(p) => Some(p.text.clone()),
        VendorItem::ToolCall(p) => Some(p.input.to_string()),
        VendorItem::ToolResult(p) => Some(p.output.clone()),
        VendorItem::TurnEnded(p) => Some(p.result.clone()),
        _ => None,
    }
}

/// Cuts `item` to at most `limit` bytes of payload JSON (see the module's doc); `kept` is
/// the blob [`overflow`]'s text was stored as (`None`: it could not be, and the marker says
/// so). An item within the limit is left as it is.
pub(crate) fn cut_item(item: &mut VendorItem, limit: usize, kept: Option<Cut>, vendor: Vendor) {
    let size = payload_bytes(item);
    if size <= limit {
        return;
    }
    drop_raw(item, limit);
    if payload_bytes(item) > limit {
        cut_field(item, limit, kept);
    }
    if payload_bytes(item) > limit {
        // Large beyond the one field byre cuts: a note of the line, never the whole.
        *item = VendorItem::Unrecognized(VendorUnrecognized {
            vendor,
            reason: format!(
                "an item of {size} bytes, over the event limit of {limit} bytes (serve --max-event-bytes), beyond what byre cuts"
            ),
            raw: cut_bytes(&raw_of(item), 4096.min(limit / 2)).to_owned(),
            size: size as u64,
        });
    }
}

/// Bytes of `item`'s payload as stored (its JSON).
fn payload_bytes(item: &VendorItem) -> usize {
    serde_json::to_vec(item).map_or(usize::MAX, |v| v.len())
}

fn raw_mut(item: &mut VendorItem) -> Option<&mut String> {
    match item {
        VendorItem::Text(p) => Some(&mut p.raw),
        VendorItem::ToolCall(p) => Some(&mut p.raw),
        VendorItem::ToolResult(p) => Some(&mut p.raw),
        VendorItem::ApiRetry(p) => Some(&mut p.raw),
        VendorItem::TurnEnded(p) => Some(&mut p.raw),
        VendorItem::Unrecognized(p) => Some(&mut p.raw),
        VendorItem::SubagentStarted(_) | VendorItem::SubagentEnded(_) | VendorItem::TurnBegan => {
            None
        }
    }
}

fn raw_of(item: &mut VendorItem) -> String {
    raw_mut(item).map(|r| r.clone()).unwrap_or_default()
}

/// Replaces the raw vendor line of an item over `limit` with a note of its size.
fn drop_raw(item: &mut VendorItem, limit: usize) {
    if let Some(raw) = raw_mut(item) {
        if !raw.is_empty() {
            *raw = format!(
                "[byre did not keep this vendor line of {} bytes: its event was over the limit of {limit} bytes (serve --max-event-bytes)]",
                raw.len()
            );
        }
    }
}

/// The marker that ends a cut field.
fn marker(shown: usize, whole: usize, kept: Option<&Cut>) -> String {
    let rest = match kept {
        Some(c) => format!("the whole is blob {}", c.blob_id),
        None => "the whole could not be kept".to_owned(),
    };
    format!(
        "\n\n[… cut by byre: the first {shown} of {whole} bytes are shown (serve --max-event-bytes); {rest}]"
    )
}

/// Cuts the item's large field so that the payload fits `limit`, trying shorter starts
/// while the JSON (whose escapes may be longer than the text) is still over.
fn cut_field(item: &mut VendorItem, limit: usize, kept: Option<Cut>) {
    let whole = match &*item {
        VendorItem::Text(p) => p.text.clone(),
        VendorItem::ToolCall(p) => p.input.to_string(),
        VendorItem::ToolResult(p) => p.output.clone(),
        VendorItem::TurnEnded(p) => p.result.clone(),
        _ => return,
    };
    let mut keep = limit.min(whole.len());
    for _ in 0..24 {
        let start = cut_bytes(&whole, keep);
        let text = format!("{start}{}", marker(start.len(), whole.len(), kept.as_ref()));
        set_field(item, text, kept.clone());
        let size = payload_bytes(item);
        if size <= limit || keep == 0 {
            return;
        }
        // Shrink by what is over, and then some: escapes make JSON longer than the text.
        let over = size - limit;
        keep = keep.saturating_sub(over.max(keep / 8).max(64));
    }
}

fn set_field(item: &mut VendorItem, text: String, kept: Option<Cut>) {
    match item {
        VendorItem::Text(p) => {
            p.text = text;
            p.cut = kept;
        }
        VendorItem::ToolCall(p) => {
            p.input = serde_json::Value::String(text);
            p.cut = kept;
        }
        VendorItem::ToolResult(p) => {
            p.output = text;
            p.cut = kept;
        }
        VendorItem::TurnEnded(p) => {
            p.result = text;
            p.cut = kept;
        }
        _ => {}
    }
}

/// What [`LineReader::next`] read.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A whole line, without its `\n`.
    Whole(Vec<u8>),
    /// A line over the hard limit: this many bytes of it were read when the reader gave up
    /// on it (more than the limit; the line may go on). Nothing of it is kept; the next call
    /// skips the rest of it.
    Overlong(u64),
}

/// Reads `\n`-ended lines from `inner`, holding at most `max_bytes` of one line (DESIGN.md
/// invariant 10). Cancel-safe: a `next` dropped half-way (a `select!` branch not taken)
/// loses nothing; the next call goes on where it stopped.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    max_bytes: usize,
    /// Whether the rest of an overlong line is still to be skipped.
    skipping: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max_bytes`.
    pub(crate) fn new(inner: R, max_bytes: usize) -> Self {
        LineReader {
            inner,
            buf: Vec::new(),
            max_bytes,
            skipping: false,
        }
    }

    /// The next line; `None` at the end of the stream (a last line without `\n` is a line).
    /// # Errors
    /// The read's error.
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(Line::Whole(std::mem::take(&mut self.buf))));
            }
            let (n, ended) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            let used = n + usize::from(ended);
            if self.skipping {
                self.inner.consume(used);
                self.skipping = !ended;
                continue;
            }
            let need = self.buf.len() + n;
            if need > self.max_bytes {
                self.buf = Vec::new();
                self.inner.consume(used);
                self.skipping = !ended;
                return Ok(Some(Line::Overlong(need as u64)));
            }
            // Grown by doubling, but never past the limit (a plain `Vec` may double to
            // twice it).
            if self.buf.capacity() < need {
                let want = (self.buf.capacity() * 2).max(need).min(self.max_bytes);
                self.buf.reserve_exact(want - self.buf.len());
            }
            self.buf.extend_from_slice(&available[..n]);
            self.inner.consume(used);
            if ended {
                return Ok(Some(Line::Whole(std::mem::take(&mut self.buf))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byre_projections::sessions::{AgentText, ToolCall};

    fn text(n: usize) -> VendorItem {
        let text = "é\"x".repeat(n / 4);
        VendorItem::Text(AgentText {
            raw: format!("{{\"text\":{}}}", serde_json::Value::String(text.clone())),
            text,
            message_id: "m1".into(),
            cut: None,
        })
    }

    fn kept() -> Option<Cut> {
        Some(Cut {
            blob_id: "b1".into(),
            size_bytes: 0,
        })
    }

    #[test]
    fn an_item_within_the_limit_is_left_as_it_is() {
        let mut item = text(1000);
        let before = item.clone();
        assert_eq!(overflow(&item, 1 << 20), None);
        cut_item(&mut item, 1 << 20, None, Vendor::Claude);
        assert_eq!(item, before);
    }

    #[test]
    fn a_large_text_is_cut_under_the_limit_with_a_marker_and_its_blob() {
        let limit = 64 * 1024;
        for n in [limit, 10 * limit] {
            let mut item = text(n);
            let whole = overflow(&item, limit).expect("over the limit");
            cut_item(&mut item, limit, kept(), Vendor::Claude);
            assert!(
                payload_bytes(&item) <= limit,
                "{n}: {}",
                payload_bytes(&item)
            );
            let VendorItem::Text(p) = &item else {
                panic!("still a text: {item:?}")
            };
            assert!(whole.starts_with(p.text.split("\n\n[… cut by byre").next().unwrap()));
            assert!(
                p.text.ends_with("the whole is blob b1]"),
                "{}",
                &p.text[p.text.len() - 80..]
            );
            assert!(p.raw.starts_with("[byre did not keep this vendor line of"));
            assert_eq!(p.cut, kept());
        }
    }

    #[test]
    fn a_raw_line_alone_over_the_limit_is_dropped_and_the_text_kept() {
        let mut item = text(1000);
        if let VendorItem::Text(p) = &mut item {
            p.raw = "x".repeat(10_000);
        }
        assert_eq!(overflow(&item, 4096), None);
        cut_item(&mut item, 4096, None, Vendor::Claude);
        let VendorItem::Text(p) = &item else { panic!() };
        assert_eq!(p.cut, None);
        assert!(p.raw.contains("10000 bytes"));
    }

    #[test]
    fn a_tool_input_is_cut_to_a_json_string_and_huge_ids_become_a_note() {
        let limit = 8192;
        let mut call = VendorItem::ToolCall(ToolCall {
            tool_use_id: "t".into(),
            name: "Write".into(),
            input: serde_json::json!({"content": "a".repeat(100_000)}),
            cut: None,
            raw: String::new(),
        });
        assert!(overflow(&call, limit).is_some_and(|w| w.len() > 100_000));
        cut_item(&mut call, limit, kept(), Vendor::Claude);
        assert!(payload_bytes(&call) <= limit);
        assert!(matches!(&call, VendorItem::ToolCall(p) if p.input.is_string()));
        let mut huge_id = VendorItem::ToolCall(ToolCall {
            tool_use_id: "t".repeat(100_000),
            name: "Write".into(),
            input: serde_json::json!({}),
            cut: None,
            raw: "r".repeat(100),
        });
        cut_item(&mut huge_id, limit, None, Vendor::Claude);
        assert!(payload_bytes(&huge_id) <= limit);
        assert!(matches!(huge_id, VendorItem::Unrecognized(_)));
    }

    #[tokio::test]
    async fn the_line_reader_holds_no_more_than_its_limit() {
        let mut input = b"short\n".to_vec();
        input.extend(vec![b'x'; 100_000]);
        input.extend(b"\nafter\nlast");
        // A tiny buffer: lines arrive in many reads.
        let reader = tokio::io::BufReader::with_capacity(7, input.as_slice());
        let mut lines = LineReader::new(reader, 1000);
        assert_eq!(
            lines.next().await.unwrap(),
            Some(Line::Whole(b"short".to_vec()))
        );
        assert!(
            matches!(lines.next().await.unwrap(), Some(Line::Overlong(n)) if n > 1000 && n <= 1007)
        );
        assert_eq!(
            lines.next().await.unwrap(),
            Some(Line::Whole(b"after".to_vec()))
        );
        assert_eq!(
            lines.next().await.unwrap(),
            Some(Line::Whole(b"last".to_vec()))
        );
        assert_eq!(lines.next().await.unwrap(), None);
    }
}
