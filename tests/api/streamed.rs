//! Streamed text that survives (schema/events.md, "Live-only frames" and `agent.streamed`): a
//! stream opened mid-turn gets the text so far (`agent.streaming`), then the live deltas, and
//! together they are the turn's text exactly once; a graceful restart mid-turn records what
//! the turn streamed, and the cut turn's end carries its usage and time so far. The real
//! Claude Code CLI against the fake model (`fixtures/fake-model/u_browser.json`, "streamed
//! sentences": seven pieces a second apart).

use serde_json::{json, Value};

use crate::browser::AgentBench;
use crate::helpers::{Api, Sse, WAIT};

/// The fake model's answer to "streamed sentences".
pub const SENTENCES: &str = "Alpha sentence streams first. Bravo sentence follows it. Charlie sentence comes third. Delta sentence is fourth. Echo sentence is fifth. Foxtrot sentence ends the answer.";

/// A task of project `project_id` whose agent streams [`SENTENCES`]: its id and its session's.
pub async fn start_sentences(api: &Api, project_id: &str) -> (String, String) {
    let task = api
        .create_task_with(
            project_id,
            json!({"title": "sentences", "prompt": "Please write streamed sentences"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let sid = api.first_session_id(&task_id).await;
    (task_id, sid)
}

/// Session `sid`'s next turn streams [`SENTENCES`] again.
pub async fn ask_again(api: &Api, sid: &str) {
    let r = api
        .call(
            "sendMessage",
            &[sid],
            &[],
            Some(json!({"text": "Again: streamed sentences"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
}

/// The pieces the fake streams it in (24 characters each).
const PIECES: u64 = 7;

/// Reads `sse` until its live frames of session `sid` satisfy `enough`; returns them (panics
/// after WAIT). The stream interleaves live frames and logged events in no fixed order, so a
/// frame may come after the event that logged its text.
async fn frames_until(sse: &mut Sse, sid: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let frames: Vec<Value> = sse
            .ephemeral
            .iter()
            .filter(|f| f["agent_session_id"] == sid)
            .cloned()
            .collect();
        if enough(&frames) {
            return frames;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "live frames of {sid} within {WAIT:?}: {frames:?}"
        );
        sse.next(std::time::Duration::from_millis(200)).await;
    }
}

/// Frames until at least `n` of them.
async fn frames_of(sse: &mut Sse, sid: &str, n: usize) -> Vec<Value> {
    frames_until(sse, sid, |f| f.len() >= n).await
}

/// Frames until one holds delta `n` (the last of a text of `n` pieces).
async fn frames_to(sse: &mut Sse, sid: &str, n: u64) -> Vec<Value> {
    frames_until(sse, sid, |f| {
        f.iter()
            .any(|d| d["payload"]["delta_seq"].as_u64() >= Some(n))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_opened_mid_turn_gets_the_text_so_far_then_the_rest_each_piece_once() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut first = api.events(&[], None).await;
    let (task_id, sid) = start_sentences(&api, &project_id).await;
    // Two deltas in: a second stream opens mid-turn, after the log's head.
    frames_of(&mut first, &sid, 2).await;
    let head = api.call("getStatus", &[], &[], None).await.body["last_event_seq"]
        .as_u64()
        .unwrap();
    let mut second = api.events(&[], Some(head)).await;
    let events = second
        .until("the turn's agent.text", |e| {
            e.data["kind"] == "agent.text" && e.data["agent_session_id"] == sid.as_str()
        })
        .await;
    let logged = events.last().unwrap().data["payload"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(logged, SENTENCES);
    let frames = frames_to(&mut second, &sid, PIECES).await;
    let so_far = &frames[0];
    assert_eq!(
        so_far["kind"], "agent.streaming",
        "first the text so far: {frames:?}"
    );
    assert_eq!(so_far["task_id"], task_id.as_str());
    let p = &so_far["payload"];
    let (after, upto) = (
        p["after_seq"].as_u64().unwrap(),
        p["delta_seq"].as_u64().unwrap(),
    );
    assert!(upto >= 2, "{so_far}");
    assert!(
        SENTENCES.starts_with(p["text"].as_str().unwrap()),
        "{so_far}"
    );
    // The deltas after it: those in it are told by their number, the rest follow on with none
    // missing, and together they make the text once.
    let mut text = p["text"].as_str().unwrap().to_owned();
    let mut next = upto + 1;
    for d in frames.iter().skip(1) {
        assert_eq!(d["kind"], "agent.delta", "{d}");
        assert_eq!(d["payload"]["after_seq"].as_u64(), Some(after), "{d}");
        let n = d["payload"]["delta_seq"].as_u64().unwrap();
        if n <= upto {
            continue;
        }
        assert_eq!(n, next, "no delta missing: {frames:?}");
        next += 1;
        text.push_str(d["payload"]["text"].as_str().unwrap());
    }
    assert_eq!(text, SENTENCES, "{frames:?}");
    // The first stream's deltas, numbered from 1 with none missing, make the same text.
    let all = frames_to(&mut first, &sid, PIECES).await;
    let numbers: Vec<u64> = all
        .iter()
        .map(|d| d["payload"]["delta_seq"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    let whole: String = all
        .iter()
        .map(|d| d["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(whole, SENTENCES);

    // A later turn cut by a graceful restart: what it streamed is logged, with its usage and time.
    ask_again(&api, &sid).await;
    let n_before = frames_of(&mut first, &sid, 0).await.len();
    frames_of(&mut first, &sid, n_before + 2).await;
    let bench = bench.restart().await;
    let api = bench.server.api();
    let mut sse = api.events(&[("task_id", &task_id)], Some(0)).await;
    let events = sse
        .until("the cut turn's end", |e| {
            e.data["kind"] == "turn.ended" && e.data["payload"]["turn"] == 2
        })
        .await;
    let streamed: Vec<&Value> = events
        .iter()
        .map(|e| &e.data)
        .filter(|e| e["kind"] == "agent.streamed")
        .collect();
    assert_eq!(streamed.len(), 1, "one record of the cut turn");
    let s = &streamed[0]["payload"];
    assert_eq!(s["turn"], 2);
    assert_eq!(streamed[0]["actor"], "byre");
    let said = s["text"].as_str().unwrap();
    assert!(
        said.len() >= 48 && SENTENCES.starts_with(said),
        "at least the two pieces streamed before the stop: {s}"
    );
    assert!(s["usage"]["input_tokens"].as_u64().unwrap() > 0, "{s}");
    let ended = &events.last().unwrap().data["payload"];
    assert_eq!(ended["outcome"], "interrupted");
    assert_eq!(
        ended["usage"], s["usage"],
        "the cut turn's end has its usage"
    );
    assert_eq!(ended["duration_ms"], s["duration_ms"]);
    // Two pieces a second apart streamed before the stop.
    assert!(ended["duration_ms"].as_u64().unwrap() >= 1000, "{ended}");
    // It answered: the restart asks the agent to carry on rather than resend the message.
    let resumed = sse
        .until("the restart's message", |e| {
            e.data["kind"] == "user.message"
        })
        .await;
    assert_eq!(
        resumed.last().unwrap().data["payload"]["text"],
        byre_projections::sessions::RESTART_NOTE
    );
}
