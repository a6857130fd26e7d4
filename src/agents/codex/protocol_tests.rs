//! Recorded app-server runs replayed through [`CodexProtocol`], compared with their snapshots
//! (`fixtures/codex/<scenario>.jsonl` + `.events.json`; `UPDATE_EXPECT=1` rewrites them), and
//! the protocol's own rules, case by case.

use super::*;

/// Replays a transcript (`{"dir": ">"|"<", "msg"}` per line, as recorded with
/// `BYRE_CODEX_TRANSCRIPTS`): the recorder's `turn/start` and `turn/interrupt` become
/// [`Protocol::message`] and [`Protocol::interrupt`] calls (a `thread/resume` makes the
/// protocol resume that thread); every server line goes through [`Protocol::on_line`]. Gives
/// one JSON value per step: what byre wrote, or what a line meant (items without `raw`).
fn replay(text: &str) -> Vec<Value> {
    let sent: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["dir"] == ">")
        .map(|l| l["msg"].clone())
        .collect();
    let resume = sent
        .iter()
        .find(|m| m["method"] == "thread/resume")
        .map(|m| m["params"]["threadId"].as_str().unwrap_or("").to_owned());
    let cwd = sent
        .iter()
        .find_map(|m| m["params"]["cwd"].as_str())
        .unwrap_or("/work");
    let mut protocol = CodexProtocol::new(cwd, "gpt-5.5", resume);
    let mut steps = vec![json!({ "start": protocol.start() })];
    let mut input_id = 0;
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let msg = &entry["msg"];
        if entry["dir"] == ">" {
            let wrote = match msg["method"].as_str() {
                Some("turn/start") => {
                    input_id += 1;
                    let inputs = msg["params"]["input"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    let text: String = inputs.iter().filter_map(|i| i["text"].as_str()).collect();
                    let images: Vec<Image> = inputs
                        .iter()
                        .filter(|i| i["type"] != "text")
                        .map(|_| Image {
                            content_type: "image/png".into(),
                            bytes: b"png".to_vec(),
                        })
                        .collect();
                    protocol.message(&text, &images, input_id)
                }
                Some("turn/interrupt") => protocol.interrupt(),
                _ => continue,
            };
            steps.push(json!({ "byre wrote": wrote }));
            continue;
        }
        let line = msg.to_string();
        let r = protocol.on_line(&line);
        if r == Reaction::default() {
            steps.push(json!("known"));
            continue;
        }
        let mut step = serde_json::Map::new();
        if !r.items.is_empty() {
            let items: Vec<Value> = r
                .items
                .iter()
                .map(|i| {
                    let mut v = serde_json::to_value(i).expect("item");
                    if let Some(o) = v.as_object_mut() {
                        o.remove("raw");
                    }
                    v
                })
                .collect();
            step.insert("items".into(), json!(items));
        }
        if let Some(d) = r.delta {
            step.insert("delta".into(), json!(d));
        }
        if !r.replies.is_empty() {
            step.insert("replies".into(), json!(r.replies));
        }
        if let Some(id) = r.vendor_session_id {
            step.insert("vendor_session_id".into(), json!(id));
        }
        if let Some(limits) = r.rate_limits {
            step.insert("rate_limits".into(), limits);
        }
        if let Some(usage) = r.usage {
            step.insert("usage".into(), json!(usage));
        }
        steps.push(Value::Object(step));
    }
    steps
}

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = crate::fixtures().join("codex");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures/codex")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn transcripts_match_their_snapshots() {
    let paths = fixtures();
    assert!(paths.len() >= 8, "transcripts found: {}", paths.len());
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("transcript");
        let actual = serde_json::to_string_pretty(&replay(&text)).expect("json") + "\n";
        let snapshot = path.with_extension("events.json");
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&snapshot, &actual).expect("write snapshot");
            continue;
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        assert!(
            expected == actual,
            "{} differs from its snapshot; run with UPDATE_EXPECT=1 and read the diff",
            path.display()
        );
    }
}

/// Fuzz-style: every recorded server line, cut and with bytes flipped, never panics the
/// protocol (run through one protocol, so its state sees garbage too).
#[test]
fn mangled_transcript_lines_never_panic() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut protocol = CodexProtocol::new("/w", "gpt-5.5", None);
    protocol.start();
    protocol.message("hi", &[], 1);
    for path in fixtures() {
        for line in std::fs::read_to_string(&path).expect("read").lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let line = entry["msg"].to_string();
            let _ = protocol.on_line(&line);
            for cut in (0..line.len())
                .step_by(11)
                .filter(|c| line.is_char_boundary(*c))
            {
                let _ = protocol.on_line(&line[..cut]);
            }
            for _ in 0..10 {
                let mut bytes = line.as_bytes().to_vec();
                for _ in 0..3 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = (x as usize) % bytes.len().max(1);
                    if let Some(b) = bytes.get_mut(i) {
                        *b = (x >> 32) as u8;
                    }
                }
                let _ = protocol.on_line(&String::from_utf8_lossy(&bytes));
            }
        }
    }
}

/// A protocol past its handshake: initialized, thread `t1` started.
fn ready() -> CodexProtocol {
    let mut p = CodexProtocol::new("/w", "gpt-5.5", None);
    p.start();
    let r = p.on_line(r#"{"id":0,"result":{}}"#);
    assert_eq!(r.replies.len(), 2, "initialized + thread/start: {r:?}");
    let r = p.on_line(r#"{"id":1,"result":{"thread":{"id":"t1"}}}"#);
    assert_eq!(r.vendor_session_id.as_deref(), Some("t1"));
    p
}

fn sent(line: &str) -> Value {
    serde_json::from_str(line).expect("a JSON line")
}

#[test]
fn a_message_before_the_thread_waits_for_it_and_keeps_a_model_switch() {
    let mut p = CodexProtocol::new("/w", "gpt-5.5", None);
    let start = p.start();
    assert_eq!(sent(&start[0])["method"], "initialize");
    assert!(p.set_model("gpt-5.4").is_empty());
    assert!(p.message("hello", &[], 7).is_empty(), "no thread yet");
    let r = p.on_line(r#"{"id":0,"result":{}}"#);
    assert_eq!(sent(&r.replies[0]), json!({"method": "initialized"}));
    assert_eq!(sent(&r.replies[1])["method"], "thread/start");
    assert_eq!(sent(&r.replies[1])["params"]["model"], "gpt-5.4");
    let r = p.on_line(r#"{"method":"thread/started","params":{"thread":{"id":"t9"}}}"#);
    assert_eq!(r.vendor_session_id.as_deref(), Some("t9"));
    let turn = sent(&r.replies[0]);
    assert_eq!(turn["method"], "turn/start");
    assert_eq!(turn["params"]["threadId"], "t9");
    assert_eq!(turn["params"]["model"], "gpt-5.4");
    assert_eq!(turn["params"]["clientUserMessageId"], "7");
    let again = p.on_line(r#"{"id":1,"result":{"thread":{"id":"t9"}}}"#);
    assert_eq!(
        again,
        Reaction::default(),
        "the answer after the notification adds nothing"
    );
}

#[test]
fn an_interrupt_waits_for_the_turn_id_and_closes_what_the_turn_left_open() {
    let mut p = ready();
    let start = p.message("run", &[], 1);
    assert_eq!(sent(&start[0])["id"], 2);
    assert!(p.interrupt().is_empty(), "the turn id is not known yet");
    let r = p.on_line(r#"{"method":"turn/started","params":{"threadId":"t1","turn":{"id":"u1"}}}"#);
    let interrupt = sent(&r.replies[0]);
    assert_eq!(interrupt["method"], "turn/interrupt");
    assert_eq!(
        interrupt["params"],
        json!({"threadId": "t1", "turnId": "u1"})
    );
    let r = p.on_line(r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c1","command":"sleep 9","cwd":"/w"}}}"#);
    assert!(
        matches!(&r.items[0], VendorItem::ToolCall(c) if c.name == "shell" && c.input["command"] == "sleep 9")
    );
    let r = p.on_line(r#"{"method":"turn/completed","params":{"threadId":"t1","turn":{"id":"u1","status":"interrupted","error":null}}}"#);
    let VendorItem::ToolResult(closed) = &r.items[0] else {
        panic!("{r:?}")
    };
    assert_eq!(
        (
            closed.tool_use_id.as_str(),
            closed.output.as_str(),
            closed.is_error
        ),
        ("c1", "interrupted", true)
    );
    assert!(
        matches!(&r.items[1], VendorItem::TurnEnded(t) if t.outcome == TurnOutcome::Interrupted)
    );
    assert_eq!(
        sent(&r.replies[0])["method"],
        "thread/backgroundTerminals/clean"
    );
    assert!(p.interrupt().is_empty(), "nothing runs now");
}

#[test]
fn an_interrupt_right_after_the_turn_start_answer_waits_for_turn_started_and_a_refusal_is_retried()
{
    let mut p = ready();
    p.message("run", &[], 1);
    // The answer names the turn, but Codex has not started it: an interrupt now is refused.
    let r = p.on_line(r#"{"id":2,"result":{"turn":{"id":"u1"}}}"#);
    assert!(r.replies.is_empty(), "{r:?}");
    assert!(p.interrupt().is_empty(), "not before turn/started");
    let r = p.on_line(r#"{"method":"thread/status/changed","params":{"threadId":"t1"}}"#);
    assert!(r.replies.is_empty(), "{r:?}");
    let r = p.on_line(r#"{"method":"turn/started","params":{"threadId":"t1","turn":{"id":"u1"}}}"#);
    let first = sent(&r.replies[0]);
    assert_eq!(first["method"], "turn/interrupt");
    // Refused all the same: asked again at the turn's next notification, once.
    let refusal = json!({"id": first["id"], "error": {"code": -32600, "message": "no active turn to interrupt"}});
    let r = p.on_line(&refusal.to_string());
    assert!(r.replies.is_empty(), "{r:?}");
    let r = p.on_line(r#"{"method":"item/started","params":{"item":{"type":"userMessage","id":"m1","content":[]}}}"#);
    let again = sent(&r.replies[0]);
    assert_eq!(again["method"], "turn/interrupt");
    assert_eq!(again["params"], json!({"threadId": "t1", "turnId": "u1"}));
    let r = p.on_line(r#"{"method":"thread/status/changed","params":{"threadId":"t1"}}"#);
    assert!(r.replies.is_empty(), "asked once more only: {r:?}");
    let r = p.on_line(r#"{"method":"turn/completed","params":{"threadId":"t1","turn":{"id":"u1","status":"interrupted","error":null}}}"#);
    assert!(
        matches!(&r.items[0], VendorItem::TurnEnded(t) if t.outcome == TurnOutcome::Interrupted),
        "{r:?}"
    );
    // A refusal that comes after the turn ended does not carry over to the next turn.
    let late = json!({"id": again["id"], "error": {"code": -32600, "message": "no active turn to interrupt"}});
    p.on_line(&late.to_string());
    p.message("next", &[], 2);
    let r = p.on_line(r#"{"method":"turn/started","params":{"threadId":"t1","turn":{"id":"u2"}}}"#);
    assert!(r.replies.is_empty(), "{r:?}");
}

#[test]
fn refusals_fail_the_waiting_turn_and_a_lost_thread_is_started_anew() {
    let mut p = CodexProtocol::new("/w", "gpt-5.5", Some("gone".into()));
    p.start();
    p.message("hi", &[], 1);
    let r = p.on_line(r#"{"id":0,"result":{}}"#);
    assert_eq!(sent(&r.replies[1])["method"], "thread/resume");
    let r = p.on_line(r#"{"id":1,"error":{"code":-32600,"message":"no rollout found"}}"#);
    assert_eq!(sent(&r.replies[0])["method"], "thread/start");
    let r = p.on_line(r#"{"id":2,"result":{"thread":{"id":"t2"}}}"#);
    assert_eq!(
        r.vendor_session_id.as_deref(),
        Some("t2"),
        "a new thread is recorded"
    );
    let r = p.on_line(r#"{"id":3,"error":{"code":-32600,"message":"bad input"}}"#);
    let [VendorItem::TurnEnded(t)] = r.items.as_slice() else {
        panic!("{r:?}")
    };
    assert_eq!(t.outcome, TurnOutcome::Failed);
    assert!(t.error.contains("bad input"), "{}", t.error);
}

#[test]
fn a_server_request_is_refused_at_once() {
    let mut p = ready();
    let r = p.on_line(r#"{"id":0,"method":"item/commandExecution/requestApproval","params":{}}"#);
    assert_eq!(
        sent(&r.replies[0]),
        json!({"id": 0, "result": {"decision": "decline"}})
    );
    assert!(r.items.is_empty());
    let r = p.on_line(r#"{"method":"brand/new","params":{}}"#);
    assert!(matches!(&r.items[0], VendorItem::Unrecognized(u) if u.reason.contains("brand/new")));
}

#[test]
fn a_forks_first_start_forks_the_thread_at_its_turn_and_records_the_new_thread() {
    let mut p = CodexProtocol::new("/fork", "gpt-5.5", None).forking("t1", "turn-1");
    p.start();
    p.message("fork message", &[], 5);
    let r = p.on_line(r#"{"id":0,"result":{}}"#);
    let fork = sent(&r.replies[1]);
    assert_eq!(fork["method"], "thread/fork");
    assert_eq!(
        (
            &fork["params"]["threadId"],
            &fork["params"]["lastTurnId"],
            &fork["params"]["cwd"]
        ),
        (&json!("t1"), &json!("turn-1"), &json!("/fork"))
    );
    let r = p.on_line(r#"{"id":1,"result":{"thread":{"id":"f1","forkedFromId":"t1"}}}"#);
    assert_eq!(
        r.vendor_session_id.as_deref(),
        Some("f1"),
        "the fork's own thread"
    );
    assert_eq!(sent(&r.replies[0])["params"]["threadId"], "f1");
    let done = p.on_line(
        r#"{"method":"turn/completed","params":{"threadId":"f1","turn":{"id":"turn-9","status":"completed"}}}"#,
    );
    let [VendorItem::TurnEnded(t)] = done.items.as_slice() else {
        panic!("{done:?}")
    };
    assert_eq!(
        t.last_vendor_id.as_deref(),
        Some("turn-9"),
        "where a later fork cuts"
    );

    let mut p = CodexProtocol::new("/fork", "gpt-5.5", None).forking("gone", "turn-1");
    p.start();
    p.message("fork message", &[], 5);
    p.on_line(r#"{"id":0,"result":{}}"#);
    let r = p.on_line(r#"{"id":1,"error":{"code":-32600,"message":"no rollout found"}}"#);
    let [VendorItem::TurnEnded(t)] = r.items.as_slice() else {
        panic!("{r:?}")
    };
    assert_eq!(t.outcome, TurnOutcome::Failed);
    assert!(t.error.contains("could not fork"), "{}", t.error);
}
