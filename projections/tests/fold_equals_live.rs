//! Random command sequences: the state the writer keeps live (decide, then apply each event as
//! it commits, derived events included) equals the fold of the same events read back from
//! their stored form (kind + payload JSON, upcast), and the fold that starts from a projection
//! snapshot taken part-way. DESIGN.md invariant 2.

use byre_projections::digest::digest;
use byre_projections::persist;
use byre_projections::reviews::{Finding, FindingState, ReviewResult, ReviewState};
use byre_projections::sessions::{ProcessExited, TurnEnded, TurnOutcome, Usage, VendorItem};
use byre_projections::snapshots::TakenSnapshot;
use byre_projections::upcast::{upcast, CURRENT_FORMAT};
use byre_projections::workflows::{Stage, WorkflowDefinition};
use byre_projections::{decide, derived_events, Command, DecideCtx, Event, State};

/// xorshift64*: a small deterministic generator, so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

fn random_command(rng: &mut Rng, s: &State) -> Command {
    let logins = ["ada", "bob"];
    let login = logins[rng.below(2)].to_owned();
    let projects: Vec<String> = s.projects.keys().map(|x| x.to_string()).collect();
    let tasks: Vec<String> = s.tasks.keys().map(|k| k.to_string()).collect();
    let sessions: Vec<String> = s.sessions.keys().map(|x| x.to_string()).collect();
    let task = rng.pick(&tasks).cloned().unwrap_or_else(|| "nope".into());
    let session = rng
        .pick(&sessions)
        .cloned()
        .unwrap_or_else(|| "nope".into());
    let reviews: Vec<String> = s.reviews.keys().map(|x| x.to_string()).collect();
    let review = rng.pick(&reviews).cloned().unwrap_or_else(|| "nope".into());
    let leads: Vec<String> = s
        .sessions
        .values()
        .filter(|x| x.role == byre_projections::sessions::SessionRole::Lead)
        .map(|x| x.id.clone())
        .map(|x| x.to_string())
        .collect();
    let lead = rng.pick(&leads).cloned().unwrap_or_else(|| "nope".into());
    let notes: Vec<String> = s.lead_notes.keys().cloned().collect();
    let note = rng.pick(&notes).cloned();
    match rng.below(36) {
        32 => Command::MessageLead {
            login: login.into(),
            text: "lead, please".into(),
            images: vec![],
            model: None,
        },
        33 => Command::SaveLeadNote {
            session_id: lead.into(),
            note_id: note.filter(|_| rng.below(2) == 0),
            text: "a note".into(),
            project_id: None,
        },
        34 => Command::DeleteLeadNote {
            login: login.into(),
            session_id: (rng.below(2) == 0).then_some(lead.into()),
            note_id: note.unwrap_or_else(|| "nope".into()),
        },
        35 => Command::ShowFocus {
            session_id: lead.into(),
            focus: byre_projections::focus::Focus {
                project_id: None,
                task_id: Some(task.into()),
                tabs: vec![],
                tab: byre_projections::focus::TaskTab::Changes,
            },
            human_asked: rng.below(2) == 0,
        },
        0 => Command::EnsureUser {
            login: login.into(),
            display_name: "x".into(),
            default_model: "sonnet".into(),
        },
        1 => Command::UpdateMe {
            login: login.into(),
            git_name: "N".into(),
            git_email: if rng.below(4) == 0 {
                "bad".into()
            } else {
                "n@e.x".into()
            },
        },
        2 => Command::CreateProject {
            actor: login,
            name: format!("p{}", rng.below(5)),
            repo_path: format!("/r/{}", rng.below(4)),
            default_branch: "main".into(),
            remote: String::new(),
            worktrees_root: "/w".into(),
        },
        3 | 4 => Command::CreateTask {
            actor: login,
            project_id: (rng
                .pick(&projects)
                .cloned()
                .unwrap_or_else(|| "nope".into()))
            .into(),
            title: format!("t {}", rng.below(100)),
            base_ref: "abc".into(),
        },
        5 => Command::RecordWorktree {
            task_id: task.into(),
            outcome: if rng.below(5) == 0 {
                Err("no".into())
            } else {
                Ok("abc".into())
            },
        },
        6 => Command::UploadBlob {
            actor: login,
            content_type: "image/png".into(),
            size_bytes: 3,
            sha256: "aa".into(),
        },
        7 => Command::PutWorkflow {
            actor: login,
            name: format!("w{}", rng.below(3)),
            definition: WorkflowDefinition {
                description: String::new(),
                stages: vec![Stage {
                    name: "s".into(),
                    after: None,
                    base: None,
                    model: "m".into(),
                    prompt: "p".into(),
                }],
            },
        },
        8 => Command::DeleteWorkflow {
            actor: login,
            name: format!("w{}", rng.below(3)),
        },
        9 => Command::MarkSummaryRead {
            login: login.into(),
            task_id: task.into(),
            seq: rng.below(s.last_seq as usize + 2) as u64,
        },
        10 => Command::SetPaneFocus {
            login: login.into(),
            focused: rng.below(2) == 0,
            drafting: rng.below(2) == 0,
        },
        11 => Command::CreateSession {
            actor: login,
            task_id: task.into(),
            model: None,
            prompt: "go".into(),
            images: vec![],
            head: "h".into(),
        },
        12 => Command::SendMessage {
            actor: login,
            session_id: session.into(),
            text: "more".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        },
        13 => Command::WithdrawMessage {
            actor: login,
            task_id: task.into(),
            input_id: rng.below(s.last_input_id as usize + 2) as u64,
        },
        14 => Command::InterruptSession {
            actor: login,
            session_id: session.into(),
        },
        15 => {
            let outcome = [
                TurnOutcome::Completed,
                TurnOutcome::Interrupted,
                TurnOutcome::Failed,
            ][rng.below(3)];
            let ended = TurnEnded {
                cut: None,
                turn: 0,
                outcome,
                summary: false,
                result: if rng.below(2) == 0 {
                    "done".into()
                } else {
                    String::new()
                },
                error: String::new(),
                usage: Usage::default(),
                cost_micro_usd: 1,
                duration_ms: 1,
                num_turns: 1,
                api_error_status: [None, Some(429), Some(500)][rng.below(3)],
                rate_limits: None,
                review: false,
                last_vendor_id: None,
                raw: "{}".into(),
            };
            Command::RecordVendorOutput {
                session_id: session.into(),
                items: vec![VendorItem::TurnEnded(ended)],
            }
        }
        16 => Command::RecordProcessExit {
            session_id: session.into(),
            exit: ProcessExited {
                pid: 1,
                code: Some(1),
                signal: None,
                reason: "x".into(),
                // Sometimes the exit hands a message to a fresh process (the turn goes on).
                redelivered_input_ids: if rng.below(2) == 0 {
                    vec![rng.below(40) as u64]
                } else {
                    Vec::new()
                },
                // Sometimes byre stopped it for being idle (a running turn goes on).
                idle_ms: if rng.below(4) == 0 { 1_000 } else { 0 },
            },
        },
        18 | 19 => {
            // The snapshot of a pending cause, reviewed.
            let snaps = s.snapshots.get(&task);
            let cause = snaps.and_then(|t| t.pending.keys().next().copied());
            let n = snaps.map_or(0, |t| t.taken.len()) as u32 + 1;
            Command::RecordSnapshot {
                task_id: task.into(),
                cause_seq: cause.unwrap_or(1),
                outcome: Ok(TakenSnapshot {
                    n,
                    commit: format!("{n:040}"),
                    tree: "t".repeat(40),
                    event_seq: 1,
                    branch_advanced: true,
                }),
                review: rng.below(4) != 0,
            }
        }
        20 => Command::SkipReview {
            review_id: review.into(),
            reason: "no files changed".into(),
        },
        21 => Command::StartReview {
            // Mostly a pending one, so reviews get going.
            review_id: s
                .reviews
                .values()
                .find(|r| r.state == ReviewState::Pending && rng.below(4) != 0)
                .map_or(review.into(), |r| r.id.clone()),
            model: ["gpt-5-codex", "sonnet"][rng.below(2)].into(),
            instructions: "review".into(),
            head: "h".into(),
        },
        22 | 27 => Command::SubmitReview {
            // Mostly a running one's reviewer.
            session_id: (s
                .reviews
                .values()
                .find(|r| r.state == ReviewState::Running && rng.below(4) != 0)
                .map_or_else(
                    || format!("rev-{}", rng.below(5)),
                    |r| r.agent_session_id.clone().into(),
                )
                .into()),
            result: ReviewResult {
                summary: "s".into(),
                findings: (0..rng.below(3) + 1)
                    .map(|i| Finding {
                        severity: "minor".into(),
                        category: "c".into(),
                        title: "t".into(),
                        detail: "d".into(),
                        path: "a.rs".into(),
                        line: i as u32 + 1,
                    })
                    .collect(),
            },
        },
        26 => Command::EndReviewer {
            review_id: review.into(),
        },
        29 => Command::MergeTask {
            actor: login,
            task_id: task.into(),
            merge_title: Some("Merge it".into()),
            target_parent: false,
            after_review: true,
            head: "h".into(),
        },
        30 => Command::CancelMergeAfterReview {
            actor: login,
            task_id: task.into(),
            reason: None,
        },
        23 => Command::FailReview {
            review_id: review.into(),
            error: "429".into(),
        },
        24 => Command::StopReview {
            actor: login,
            review_id: review.into(),
        },
        17 | 25 | 28 => Command::SetFindingState {
            actor: login,
            review_id: s
                .reviews
                .values()
                .rev()
                .find(|r| r.result.as_ref().is_some_and(|x| !x.findings.is_empty()))
                .map(|r| r.id.clone())
                .unwrap_or(review.into()),
            index: rng.below(2) as u32,
            state: if rng.below(2) == 0 {
                FindingState::Fixed
            } else {
                FindingState::Ignored
            },
            head: "h".into(),
        },
        _ => Command::CompactSession {
            actor: login,
            session_id: session.into(),
            model: None,
            head: "h".into(),
        },
    }
}

#[test]
fn the_live_state_equals_the_fold_of_the_stored_log() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut live = State::default();
        let mut log: Vec<(u64, i64, Event, String)> = Vec::new();
        for step in 0..120 {
            let cmd = random_command(&mut rng, &live);
            let ctx = DecideCtx {
                now_us: step,
                seed: u128::from(rng.next()) << 64 | u128::from(rng.next()),
                reviews_on: false,
            };
            let Ok(events) = decide(&live, &cmd, &ctx) else {
                continue;
            };
            let mut committed = Vec::new();
            for ne in events {
                let e = ne.commit(live.last_seq + 1, ctx.now_us);
                live.apply(&e);
                committed.push(e);
            }
            for ne in derived_events(&live, &committed) {
                let e = ne.commit(live.last_seq + 1, ctx.now_us);
                live.apply(&e);
                committed.push(e);
            }
            for e in committed {
                seen.insert(e.body.kind());
                let payload = e.body.payload_json();
                log.push((e.seq, e.created_at_us, e, payload));
            }
        }
        let mut folded = State::default();
        // A projection snapshot taken part-way, decoded, then the rest of the log folded into
        // it: what start-up does; it must end where the whole fold ends.
        let snapshot_at = rng.below(log.len() + 1);
        let mut from_snapshot = None;
        for (i, (seq, _, e, payload)) in log.iter().enumerate() {
            if i == snapshot_at {
                let encoded = persist::encode(&folded);
                let decoded = persist::decode(&encoded.state_json, &encoded.bookkeeping_json)
                    .unwrap_or_else(|err| panic!("seed {seed}: snapshot at {i}: {err}"));
                assert_eq!(
                    decoded, folded,
                    "seed {seed}: snapshot at {i} decodes to its state"
                );
                from_snapshot = Some(decoded);
            }
            assert_eq!(*seq, i as u64 + 1, "seed {seed}: gapless seqs");
            let body = upcast(CURRENT_FORMAT, e.body.kind(), payload)
                .unwrap_or_else(|err| panic!("seed {seed}: seq {seq}: {err}"));
            assert_eq!(body, e.body, "seed {seed}: seq {seq} round-trips");
            let event = Event { body, ..e.clone() };
            if let Some(state) = from_snapshot.as_mut() {
                state.apply(&event);
            }
            folded.apply(&event);
        }
        let from_snapshot = from_snapshot.unwrap_or_else(|| {
            let encoded = persist::encode(&folded);
            persist::decode(&encoded.state_json, &encoded.bookkeeping_json).unwrap()
        });
        assert_eq!(
            from_snapshot, live,
            "seed {seed}: snapshot at event {snapshot_at} + the rest of the log == live"
        );
        assert_eq!(
            digest(&folded),
            digest(&live),
            "seed {seed}: fold(log) == live"
        );
        assert_eq!(folded, live, "seed {seed}");
    }
    for kind in [
        "review.requested",
        "review.skipped",
        "review.started",
        "review.done",
        "review.failed",
        "review.finding_state_set",
        "lead_note.saved",
        "lead_note.deleted",
    ] {
        assert!(seen.contains(kind), "the random commands reach `{kind}`");
    }
}
