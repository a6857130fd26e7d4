//! byre-search: the full-text index behind `searchAll` (`GET /api/search`), a derived index of
//! the log kept with tantivy. It knows nothing of the log or its events: byre-app's search
//! reactor turns committed events into [`Entry`]s and hands them here with the seq they run
//! through; the operation asks [`Index::search`] and reads titles and names from the fold.
//!
//! The index lives in its own directory (`DATA/search`, 0700). Each commit records, in
//! tantivy's commit payload, this crate's [`FORMAT`], tantivy's version and the last seq it
//! covers, atomically with the documents. [`Index::open`] starts from that seq, or from
//! nothing (the directory emptied) when the directory holds no index, one it cannot open, or
//! one of another format or tantivy version. What `kill -9` leaves is the last commit: the
//! reactor indexes again from its seq, and documents of later, uncommitted batches were never
//! visible, so nothing is indexed twice.
//!
//! Memory: one writer thread with a heap of [`WRITER_HEAP_BYTES`] (tantivy flushes a segment
//! when it is full), each entry's text cut to [`MAX_TEXT_BYTES`], a query to
//! [`MAX_QUERY_BYTES`], and [`MAX_LIMIT`] hits a group.

#![warn(missing_docs)]

use std::path::Path;
use std::sync::Mutex;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, QueryParser, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{
    DocAddress, Index as Tantivy, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term,
};

/// What the index holds and how: bumped when the schema or what an entry holds changes, so
/// a server of another format rebuilds the index from the log at start-up.
pub const FORMAT: u32 = 1;

/// The writer's heap: tantivy's memory bound while indexing (one thread; a segment is flushed
/// to disk when it fills).
pub const WRITER_HEAP_BYTES: usize = 32 << 20;

/// Most bytes of one entry's text indexed and kept for snippets (cut at a char boundary).
pub const MAX_TEXT_BYTES: usize = 64 << 10;

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 500;

/// Most hits of one group an answer holds.
pub const MAX_LIMIT: usize = 50;

/// Longest snippet, in chars.
const SNIPPET_CHARS: usize = 160;

/// The owner of entries everyone may find (no login is `*`).
const EVERYONE: &str = "*";

/// What an entry is: a project, a task, or an item of a transcript or a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A project's name (`project.created`).
    Project,
    /// A task's title and branch (`task.created`).
    Task,
    /// A human's message to an agent, a task's prompt among them (`user.message`).
    UserMessage,
    /// An agent's text (`agent.text`).
    AgentText,
    /// A review's summary and findings (`review.done`).
    ReviewFindings,
}

impl EntryKind {
    /// The event kind the entry comes from, as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Project => "project.created",
            EntryKind::Task => "task.created",
            EntryKind::UserMessage => "user.message",
            EntryKind::AgentText => "agent.text",
            EntryKind::ReviewFindings => "review.done",
        }
    }

    fn parse(s: &str) -> Option<EntryKind> {
        [
            EntryKind::Project,
            EntryKind::Task,
            EntryKind::UserMessage,
            EntryKind::AgentText,
            EntryKind::ReviewFindings,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One document: the searchable text of one event, with what the answer needs to point at it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The event's seq.
    pub seq: u64,
    /// What it is.
    pub kind: EntryKind,
    /// Its project; empty for none (a lead's).
    pub project_id: String,
    /// Its task; empty for none.
    pub task_id: String,
    /// Its agent session; empty for none.
    pub agent_session_id: String,
    /// The event's owner: only this login finds it; empty for everyone.
    pub owner: String,
    /// The text searched (cut to [`MAX_TEXT_BYTES`]).
    pub text: String,
}

/// Which group a search fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Projects by name.
    Projects,
    /// Tasks by title and branch.
    Tasks,
    /// Transcript items and review findings.
    Items,
}

impl Group {
    fn kinds(self) -> &'static [EntryKind] {
        match self {
            Group::Projects => &[EntryKind::Project],
            Group::Tasks => &[EntryKind::Task],
            Group::Items => &[
                EntryKind::UserMessage,
                EntryKind::AgentText,
                EntryKind::ReviewFindings,
            ],
        }
    }
}

/// A search: the user's query text, who asks, and where.
#[derive(Debug, Clone, Copy)]
pub struct Search<'a> {
    /// tantivy's query syntax: words (all must match), `"a phrase"`, `-word`, `a OR b`.
    pub text: &'a str,
    /// The caller: entries owned by another login are never found.
    pub login: &'a str,
    /// Only this project's entries, when given.
    pub project_id: Option<&'a str>,
    /// Most hits a group (1 to [`MAX_LIMIT`]).
    pub limit: usize,
}

/// One part of a snippet: text, and whether it matched the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetPart {
    /// The text, as stored (never markup).
    pub text: String,
    /// Whether it is a matched word.
    pub hit: bool,
}

/// A found entry.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The event's seq.
    pub seq: u64,
    /// What it is.
    pub kind: EntryKind,
    /// Its project; empty for none.
    pub project_id: String,
    /// Its task; empty for none.
    pub task_id: String,
    /// Its agent session; empty for none.
    pub agent_session_id: String,
    /// The best passage of its text, split at the matched words.
    pub snippet: Vec<SnippetPart>,
}

/// What [`Index::search`] found, by group, best first.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Projects whose name matched.
    pub projects: Vec<Hit>,
    /// Tasks whose title or branch matched.
    pub tasks: Vec<Hit>,
    /// Transcript items and review findings that matched.
    pub items: Vec<Hit>,
}

/// Why the index failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The query is not one the caller may ask: empty, too long, or not tantivy's syntax.
    #[error("{0}")]
    BadQuery(String),
    /// tantivy failed (the directory, a commit).
    #[error("search index: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// The directory could not be emptied or made.
    #[error("search index directory: {0}")]
    Io(#[from] std::io::Error),
}

/// The fields of the schema.
#[derive(Clone, Copy)]
struct Fields {
    seq: Field,
    kind: Field,
    project_id: Field,
    task_id: Field,
    agent_session_id: Field,
    owner: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text_options = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("en_stem")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        seq: b.add_u64_field("seq", STORED),
        kind: b.add_text_field("kind", STRING | STORED),
        project_id: b.add_text_field("project_id", STRING | STORED),
        task_id: b.add_text_field("task_id", STRING | STORED),
        agent_session_id: b.add_text_field("agent_session_id", STRING | STORED),
        owner: b.add_text_field("owner", STRING),
        text: b.add_text_field("text", text_options),
    };
    (b.build(), fields)
}

/// The commit payload: this crate's format, tantivy's version and the last seq covered.
fn payload(seq: u64) -> String {
    format!("byre-search {FORMAT} {} {seq}", tantivy::version_string())
}

/// The seq a commit payload covers, when it is this build's format.
fn payload_seq(payload: &str) -> Option<u64> {
    let rest = payload.strip_prefix(&format!(
        "byre-search {FORMAT} {} ",
        tantivy::version_string()
    ))?;
    rest.parse().ok()
}

/// The search index: one writer, one reader, both thread-safe.
pub struct Index {
    reader: IndexReader,
    writer: Mutex<IndexWriter>,
    fields: Fields,
    parser: QueryParser,
}

/// What [`Index::open`] found.
pub struct Opened {
    /// The index.
    pub index: Index,
    /// The last seq its last commit covers (0 for an index made anew).
    pub indexed_seq: u64,
    /// Why it was made anew, when it was.
    pub rebuilt: Option<String>,
}

impl Index {
    /// Opens the index in `dir` (created 0700 when missing), or makes it anew there when
    /// `dir` holds none, one tantivy cannot open, one of another [`FORMAT`] or tantivy
    /// version, or one covering seqs past `log_head` (another log's) ([`Opened::rebuilt`]
    /// says why).
    /// # Errors
    /// [`Error::Io`] or [`Error::Index`] when the directory cannot be made or written.
    pub fn open(dir: &Path, log_head: u64) -> Result<Opened, Error> {
        let (schema, fields) = schema();
        let existing = if dir.join("meta.json").is_file() {
            match Tantivy::open_in_dir(dir) {
                Ok(index) => match index.load_metas() {
                    Ok(metas) => match metas.payload.as_deref().and_then(payload_seq) {
                        Some(seq) if seq > log_head => Err(format!(
                            "it covers seq {seq}, past the log's last {log_head}"
                        )),
                        Some(seq) if index.schema() == schema => Ok((index, seq)),
                        _ => Err("it is of another format or tantivy version".to_owned()),
                    },
                    Err(e) => Err(format!("its metadata cannot be read: {e}")),
                },
                Err(e) => Err(format!("it cannot be opened: {e}")),
            }
        } else {
            Err("there is none".to_owned())
        };
        let (index, indexed_seq, rebuilt) = match existing {
            Ok((index, seq)) => (index, seq, None),
            Err(why) => {
                if dir.is_dir() {
                    std::fs::remove_dir_all(dir)?;
                }
                make_private_dir(dir)?;
                (Tantivy::create_in_dir(dir, schema)?, 0, Some(why))
            }
        };
        let writer = index.writer_with_num_threads(1, WRITER_HEAP_BYTES)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let parser = {
            let mut p = QueryParser::for_index(&index, vec![fields.text]);
            p.set_conjunction_by_default();
            p
        };
        Ok(Opened {
            index: Index {
                reader,
                writer: Mutex::new(writer),
                fields,
                parser,
            },
            indexed_seq,
            rebuilt,
        })
    }

    /// Adds `entries` and commits them with `through_seq`, the last seq they cover, then makes
    /// them visible to searches. Blocking: call it off the async threads.
    /// # Errors
    /// [`Error::Index`] when tantivy cannot write or commit; nothing of the batch is then
    /// searchable, and [`Index::open`] resumes from the last commit.
    pub fn add(&self, entries: &[Entry], through_seq: u64) -> Result<(), Error> {
        let f = self.fields;
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries {
            let mut doc = TantivyDocument::default();
            doc.add_u64(f.seq, e.seq);
            doc.add_text(f.kind, e.kind.as_str());
            doc.add_text(f.project_id, &e.project_id);
            doc.add_text(f.task_id, &e.task_id);
            doc.add_text(f.agent_session_id, &e.agent_session_id);
            let owner = if e.owner.is_empty() {
                EVERYONE
            } else {
                &e.owner
            };
            doc.add_text(f.owner, owner);
            doc.add_text(f.text, cut(&e.text, MAX_TEXT_BYTES));
            writer.add_document(doc)?;
        }
        let mut commit = writer.prepare_commit()?;
        commit.set_payload(&payload(through_seq));
        commit.commit()?;
        drop(writer);
        self.reader.reload()?;
        Ok(())
    }

    /// Searches each group: at most `limit` hits of each, best first, none owned by another
    /// login. Blocking: call it off the async threads.
    /// # Errors
    /// [`Error::BadQuery`] for an empty or too long query, or one tantivy cannot parse.
    pub fn search(&self, search: &Search) -> Result<Found, Error> {
        let text = search.text.trim();
        if text.is_empty() {
            return Err(Error::BadQuery("q is empty".into()));
        }
        if text.len() > MAX_QUERY_BYTES {
            return Err(Error::BadQuery(format!(
                "q is {} bytes; at most {MAX_QUERY_BYTES} are searched",
                text.len()
            )));
        }
        let query = self
            .parser
            .parse_query(text)
            .map_err(|e| Error::BadQuery(format!("q is not a query byre understands: {e}")))?;
        let limit = search.limit.clamp(1, MAX_LIMIT);
        let searcher = self.reader.searcher();
        let mut snippets = SnippetGenerator::create(&searcher, &*query, self.fields.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut found = Found::default();
        for group in [Group::Projects, Group::Tasks, Group::Items] {
            let filtered = self.filtered(query.box_clone(), search, group);
            let top = searcher.search(&filtered, &TopDocs::with_limit(limit).order_by_score())?;
            let hits = top
                .into_iter()
                .filter_map(|(_, address)| self.hit(&searcher, address, &snippets))
                .collect();
            match group {
                Group::Projects => found.projects = hits,
                Group::Tasks => found.tasks = hits,
                Group::Items => found.items = hits,
            }
        }
        Ok(found)
    }

    /// `query` kept to `group`'s kinds, the caller's or nobody's entries, and the project.
    fn filtered(&self, query: Box<dyn Query>, search: &Search, group: Group) -> BooleanQuery {
        let f = self.fields;
        let term = |field: Field, value: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(
                Term::from_field_text(field, value),
                IndexRecordOption::Basic,
            ))
        };
        let any_of = |clauses: Vec<Box<dyn Query>>| -> Box<dyn Query> {
            Box::new(BooleanQuery::new(
                clauses.into_iter().map(|q| (Occur::Should, q)).collect(),
            ))
        };
        // A filter: a clause that must match but adds nothing to the score.
        let filter = |q: Box<dyn Query>| -> (Occur, Box<dyn Query>) {
            (Occur::Must, Box::new(BoostQuery::new(q, 0.0)))
        };
        let kinds = group
            .kinds()
            .iter()
            .map(|k| term(f.kind, k.as_str()))
            .collect();
        let owners = vec![term(f.owner, EVERYONE), term(f.owner, search.login)];
        let mut clauses = vec![
            (Occur::Must, query),
            filter(any_of(kinds)),
            filter(any_of(owners)),
        ];
        if let Some(p) = search.project_id {
            clauses.push(filter(term(f.project_id, p)));
        }
        BooleanQuery::new(clauses)
    }

    fn hit(
        &self,
        searcher: &tantivy::Searcher,
        address: DocAddress,
        snippets: &SnippetGenerator,
    ) -> Option<Hit> {
        let f = self.fields;
        let doc: TantivyDocument = searcher.doc(address).ok()?;
        let text_of = |field: Field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let snippet = snippets.snippet_from_doc(&doc);
        let fragment = snippet.fragment();
        let mut parts = Vec::new();
        let mut at = 0;
        for range in snippet.highlighted() {
            if range.start > at {
                parts.push(SnippetPart {
                    text: fragment[at..range.start].to_owned(),
                    hit: false,
                });
            }
            parts.push(SnippetPart {
                text: fragment[range.clone()].to_owned(),
                hit: true,
            });
            at = range.end;
        }
        if at < fragment.len() {
            parts.push(SnippetPart {
                text: fragment[at..].to_owned(),
                hit: false,
            });
        }
        Some(Hit {
            seq: doc.get_first(f.seq).and_then(|v| v.as_u64())?,
            kind: EntryKind::parse(&text_of(f.kind))?,
            project_id: text_of(f.project_id),
            task_id: text_of(f.task_id),
            agent_session_id: text_of(f.agent_session_id),
            snippet: parts,
        })
    }
}

/// Makes `dir` (and its parents) with mode 0700: the index holds transcripts.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// `text` cut to at most `max` bytes, at a char boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
