//! Captures byre's `writer_batch` tracing spans (one per group commit: commands, events,
//! commit time), so the append bench can report group sizes and the commit time inside the
//! writer, without changing byre.

use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// One group commit as the writer reported it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batch {
    /// Submissions in the group.
    pub n_commands: u64,
    /// Events committed.
    pub n_events: u64,
    /// Time from `begin_write` to the end of `commit` (decide, insert, fsync).
    pub commit_ms: f64,
}

impl Visit for Batch {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "n_commands" => self.n_commands = value,
            "n_events" => self.n_events = value,
            _ => {}
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value.max(0) as u64);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "commit_ms" {
            self.commit_ms = value;
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

static BATCHES: Mutex<Vec<Batch>> = Mutex::new(Vec::new());

struct BatchLayer;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for BatchLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "writer_batch" {
            return;
        }
        let mut b = Batch::default();
        attrs.record(&mut b);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(b);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(b) = span.extensions_mut().get_mut::<Batch>() {
                values.record(b);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(b) = span.extensions_mut().remove::<Batch>() {
                BATCHES.lock().unwrap_or_else(|e| e.into_inner()).push(b);
            }
        }
    }
}

/// Installs the capturing subscriber (only byre's writer spans, at debug) plus warnings
/// and errors from everything on stderr.
pub fn install() {
    let capture =
        BatchLayer.with_filter(Targets::new().with_target("byre_log::writer", LevelFilter::DEBUG));
    let warnings = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(LevelFilter::WARN);
    let subscriber = tracing_subscriber::registry().with(capture).with(warnings);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Takes the batches recorded so far.
pub fn take() -> Vec<Batch> {
    std::mem::take(&mut *BATCHES.lock().unwrap_or_else(|e| e.into_inner()))
}
