//! A workflow run end to end on the real CLIs against the fake model APIs
//! (`fixtures/fake-model/x_workflow.json` for Claude Code, `codex_x_workflow.json` for Codex):
//! `plan` → (`build`, `docs`) → `review`, with plan, docs and review on Claude Code and build on
//! Codex. Each stage's first message holds its inputs' outputs; the branch points follow the
//! base rules (checked with git); getWorkflowRun matches at every step; a `blocked` finish puts
//! a question in the inbox and starts nothing; finishing `review` cleans up the others.

use std::path::PathBuf;
use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{git_out, local_ada, Api, Seen, TestServer};

/// How long a test waits for real CLIs' turns and byre's git work.
const TURN_WAIT: Duration = Duration::from_secs(180);

/// plan → (build, docs with base main) → review; each prompt holds a marker the fakes match.
pub const DIAMOND: &str = "description: Plan, then build and document, then review
stages:
  - name: plan
    model: sonnet
    prompt: Write the plan in plan.md. PLAN-STAGE
  - name: build
    after: [plan]
    model: gpt-5.5
    prompt: Build what the plan says. BUILD-STAGE
  - name: docs
    after: [plan]
    base: main
    model: sonnet
    prompt: Document the login page in docs.md. DOCS-STAGE
  - name: review
    after: [build, docs]
    model: sonnet
    prompt: Review the build and the docs. REVIEW-STAGE
";

/// The `workflow.stage_started` of stage `stage`: its task id.
async fn stage_started(seen: &mut Seen, stage: &str) -> String {
    let e = seen
        .first(&format!("stage {stage} started"), |d| {
            d["kind"] == "workflow.stage_started" && d["payload"]["stage"] == stage
        })
        .await;
    e["task_id"].as_str().unwrap().to_owned()
}

/// The text of task `task_id`'s first `user.message` (its agent's first message).
async fn first_message(seen: &mut Seen, task_id: &str) -> String {
    let e = seen.of_task("user.message", task_id).await;
    e["payload"]["text"].as_str().unwrap().to_owned()
}

async fn get(api: &Api, op: &str, id: &str) -> Value {
    let r = api.call(op, &[id], &[], None).await;
    assert_eq!(r.status, 200, "{op}: {:?}", r.body);
    r.body
}

/// The stage named `name` of a `WorkflowRun`.
fn stage<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {run}"))
}

/// Polls getTask until `pred` holds (byre's clean-up runs in a reactor).
async fn wait_task(api: &Api, task_id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + TURN_WAIT;
    loop {
        let t = get(api, "getTask", task_id).await;
        if pred(&t) {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {t}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_build_docs_review_run_goes_end_to_end_on_claude_code_and_codex() {
    let claude_fake = FakeAnthropic::fixture("x_workflow")
        .await
        .expect("fake API");
    let codex_fake = FakeOpenAi::fixture("codex_x_workflow")
        .await
        .expect("fake API");
    let claude: PathBuf = crate::claude::claude_bin().await;
    let codex = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
        .await
        .expect("install the CLI");
    // Not under /tmp: there Codex will not create its helper binaries.
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    let env = vec![
        ("ANTHROPIC_BASE_URL".into(), claude_fake.url.clone()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ("OPENAI_BASE_URL".into(), codex_fake.base_url()),
        ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
        ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
        ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
    ];
    let server = TestServer::spawn_configured(data, local_ada(), move |c| {
        c.claude_bin = Some(claude);
        c.codex_bin = Some(codex);
        c.agent_env = env;
        c.reviews.enabled = false;
    })
    .await;
    let api = server.api();
    let (repo, project_id) = api.basic_project().await;
    let mut seen = Seen::new(api.events(&[], None).await, TURN_WAIT);
    let r = api
        .call_raw(
            "putWorkflow",
            &["diamond"],
            "application/yaml",
            DIAMOND.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let (_, main_at_start) = git_out(repo.path(), &["rev-parse", "main"]);

    // createTask with the workflow: the first stage's task, branched where the run started.
    let r = api
        .call(
            "createTask",
            &[&project_id],
            &[],
            Some(json!({"title": "Login page", "workflow": "diamond"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let plan = r.body;
    let plan_id = plan["id"].as_str().unwrap().to_owned();
    assert_eq!(plan["title"], "Login page: plan");
    assert_eq!(plan["workflow"], "diamond");
    assert_eq!(plan["workflow_stage"], "plan");
    assert_eq!(plan["base_ref"], main_at_start.as_str());
    let run_id = plan["workflow_run"].as_str().unwrap().to_owned();
    assert!(first_message(&mut seen, &plan_id)
        .await
        .contains("PLAN-STAGE"));

    // The frozen definition outlives the workflow's deletion.
    assert_eq!(
        api.call("deleteWorkflow", &["diamond"], &[], None)
            .await
            .status,
        204
    );
    let frozen = get(&api, "getTaskWorkflow", &plan_id).await;
    assert_eq!(frozen["name"], "diamond");
    let a: Value = serde_norway::from_str(frozen["definition"].as_str().unwrap()).unwrap();
    let b: Value = serde_norway::from_str(DIAMOND).unwrap();
    assert_eq!(a, b, "getTaskWorkflow holds the definition as it was");

    let run = get(&api, "getWorkflowRun", &plan_id).await;
    assert_eq!(run["run"], run_id.as_str());
    assert_eq!(run["title"], "Login page");
    assert_eq!(run["brief"], "Login page");
    assert_eq!(run["finished"], false);
    let names: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["plan", "build", "docs", "review"]);
    assert_eq!(stage(&run, "plan")["after"], json!([]));
    assert_eq!(
        stage(&run, "plan")["attempts"][0]["task_id"],
        plan_id.as_str()
    );
    assert_eq!(stage(&run, "build")["state"], "waiting");
    assert_eq!(stage(&run, "build")["waiting_on"], json!(["plan"]));
    assert_eq!(stage(&run, "review")["after"], json!(["build", "docs"]));
    assert_eq!(
        stage(&run, "review")["waiting_on"],
        json!(["build", "docs"])
    );

    // plan blocks: a question in the inbox, nothing starts.
    let blocked = seen.of_task("workflow.stage_blocked", &plan_id).await;
    let item_id = blocked["payload"]["item_id"].as_str().unwrap().to_owned();
    seen.of_task("snapshot.taken", &plan_id).await;
    let item = get(&api, "getInboxItem", &item_id).await;
    assert_eq!(item["kind"], "question");
    assert!(item["payload"]["question"]
        .as_str()
        .unwrap()
        .contains("Which database should the plan use?"));
    let run = get(&api, "getWorkflowRun", &plan_id).await;
    assert_eq!(stage(&run, "plan")["state"], "idle");
    assert!(stage(&run, "plan")["attempts"][0].get("output").is_none());
    assert_eq!(stage(&run, "build")["state"], "waiting");
    let tasks = get(&api, "listTasks", &project_id).await;
    assert_eq!(
        tasks.as_array().unwrap().len(),
        1,
        "a blocked stage starts nothing"
    );

    // The answer reaches plan's agent, which finishes: build and docs start.
    let r = api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(
                json!({"responses": [{"item_id": item_id, "type": "other", "text": "use sqlite"}]}),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let finished = seen.of_task("workflow.stage_finished", &plan_id).await;
    let plan_commit = finished["payload"]["commit"].as_str().unwrap().to_owned();
    assert!(finished["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("PLAN-OUTPUT"));
    assert!(
        git_out(
            repo.path(),
            &["cat-file", "-e", &format!("{plan_commit}:plan.md")]
        )
        .0,
        "plan's commit holds plan.md"
    );
    let build_id = stage_started(&mut seen, "build").await;
    let docs_id = stage_started(&mut seen, "docs").await;
    let build = get(&api, "getTask", &build_id).await;
    let docs = get(&api, "getTask", &docs_id).await;
    assert_eq!(build["title"], "Login page: build");
    assert_eq!(build["workflow_run"], run_id.as_str());
    // Base rules: build (parent) from plan's commit, docs (main) from the default branch.
    assert_eq!(build["base_ref"], plan_commit.as_str());
    assert_eq!(docs["base_ref"], main_at_start.as_str());
    let (_, build_base) = git_out(
        repo.path(),
        &[
            "merge-base",
            &plan_commit,
            build["branch"].as_str().unwrap(),
        ],
    );
    assert_eq!(
        build_base, plan_commit,
        "build's branch starts at plan's commit"
    );
    assert!(
        !git_out(
            repo.path(),
            &["cat-file", "-e", &format!("{main_at_start}:plan.md")]
        )
        .0
    );
    for (id, marker) in [(&build_id, "BUILD-STAGE"), (&docs_id, "DOCS-STAGE")] {
        let m = first_message(&mut seen, id).await;
        assert!(m.contains(marker), "{m}");
        assert!(m.contains("PLAN-OUTPUT: plan.md, on SQLite."), "{m}");
        assert!(m.contains("Login page"), "the brief: {m}");
    }
    let run = get(&api, "getWorkflowRun", &build_id).await;
    assert_eq!(stage(&run, "plan")["state"], "finished");
    assert_eq!(
        stage(&run, "plan")["attempts"][0]["commit"],
        plan_commit.as_str()
    );
    assert_eq!(
        stage(&run, "build")["attempts"][0]["inputs"],
        json!([{"stage": "plan", "task_id": plan_id}])
    );
    assert_eq!(stage(&run, "build")["waiting_on"], json!([]));

    // Both finish; review starts from the default branch with both outputs.
    let build_done = seen.of_task("workflow.stage_finished", &build_id).await;
    let build_commit = build_done["payload"]["commit"].as_str().unwrap().to_owned();
    assert!(
        git_out(
            repo.path(),
            &["cat-file", "-e", &format!("{build_commit}:build.txt")]
        )
        .0
    );
    seen.of_task("workflow.stage_finished", &docs_id).await;
    let review_id = stage_started(&mut seen, "review").await;
    let review = get(&api, "getTask", &review_id).await;
    let (_, main_now) = git_out(repo.path(), &["rev-parse", "main"]);
    assert_eq!(
        review["base_ref"],
        main_now.as_str(),
        "several after stages: the default branch"
    );
    let m = first_message(&mut seen, &review_id).await;
    assert!(m.contains("REVIEW-STAGE"), "{m}");
    assert!(
        m.contains("BUILD-OUTPUT: build.txt holds the build."),
        "{m}"
    );
    assert!(
        m.contains("DOCS-OUTPUT: docs.md describes the login page."),
        "{m}"
    );
    assert!(!m.contains("PLAN-OUTPUT"), "only its own inputs: {m}");
    let run = get(&api, "getWorkflowRun", &review_id).await;
    assert_eq!(
        stage(&run, "review")["attempts"][0]["inputs"],
        json!([{"stage": "build", "task_id": build_id}, {"stage": "docs", "task_id": docs_id}])
    );

    // review finishes: the run ends and byre cleans up the others.
    seen.of_task("workflow.run_finished", &review_id).await;
    for id in [&plan_id, &build_id, &docs_id] {
        let t = wait_task(&api, id, "the clean-up", |t| t["status"] != "active").await;
        assert_eq!(t["status"], "discarded", "{t}");
    }
    let run = get(&api, "getWorkflowRun", &plan_id).await;
    assert_eq!(run["finished"], true);
    for name in ["plan", "build", "docs"] {
        let s = stage(&run, name);
        assert_eq!(s["state"], "cleaned_up", "{s}");
        assert_eq!(s["attempts"][0]["discarded_by"], "byre", "{s}");
    }
    assert_eq!(stage(&run, "review")["state"], "finished");
    let review = get(&api, "getTask", &review_id).await;
    assert_eq!(
        review["status"], "active",
        "the final stage stays to be merged"
    );
    assert!(stage(&run, "review")["attempts"][0]["output"]
        .as_str()
        .unwrap()
        .contains("REVIEW-OUTPUT"));
    // The Codex agent got plan's output in its very first request.
    assert!(codex_fake.responses_requests().iter().any(|r| {
        let body = r.body.as_ref().map(|b| b.to_string()).unwrap_or_default();
        body.contains("BUILD-STAGE") && body.contains("PLAN-OUTPUT")
    }));
    drop(server);
}
