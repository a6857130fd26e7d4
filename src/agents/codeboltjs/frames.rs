//! The CodeBolt wire, pure: which generation sent a frame, what it asks, and which reply
//! `type` its client waits for (`vendors/codebolt/PROTOCOL.md` §4 and `frames_table.md`;
//! where they and `schema/codebolt.asyncapi.yaml` disagree, the real client wins).
//!
//! v1 (`@codebolt/codeboltjs` 1.1.x) frames carry no `requestId` and wait for a reply by its
//! `type` (browser/crawler: by `event`); v2 (2.x) frames always carry one and the reply echoes
//! it. Frames written from the AsyncAPI file (spec names such as `llmEvent`, `gitInit`) are
//! mapped onto the real names by [`normalize`].

use serde_json::Value;

/// Which client generation sent a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 1.1.x: no `requestId`; replies matched by `type`, so they go in request order.
    V1,
    /// 2.x and later: a `requestId` on every frame, echoed by the reply.
    V2,
}

/// What one frame from an agent is.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A request whose client waits for a reply of type `reply_type`.
    Request(Request),
    /// A frame no reply is sent for: chat text, lifecycle, notifications (`*notify`),
    /// fire-and-forget calls (`runProject`, `browser.close`, `crawler.start`, …).
    Message {
        /// `type`.
        ty: String,
        /// `action`, empty when none.
        action: String,
    },
    /// A v1 frame of a kind byre does not know: its client's awaited type is unknowable, so
    /// it is logged and not answered (PROTOCOL.md §5).
    UnknownV1 {
        /// `type`.
        ty: String,
        /// `action`, empty when none.
        action: String,
    },
}

/// An awaited request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Its generation.
    pub generation: Generation,
    /// `requestId` (v2) exactly as sent (a string from the real client; any JSON value is
    /// echoed as given), else `null` (the endpoint then gives it an id of byre's own,
    /// `v1-<n>`, that is never sent: v1 replies carry no `requestId`).
    pub request_id: Value,
    /// `type` (real spelling, after [`normalize`]).
    pub ty: String,
    /// `action` (real spelling), empty for type-only requests.
    pub action: String,
    /// The reply's `type` its client waits for.
    pub reply_type: &'static str,
    /// Whether the client matches the reply on `event` rather than `type` (v1 browser and
    /// crawler): the reply then carries both.
    pub by_event: bool,
    /// Whether the frame came in the AsyncAPI file's spelling: the reply then also has the
    /// spec's `ServiceResponse` fields (`data`, `timestamp`).
    pub spec_client: bool,
    /// The whole frame (after [`normalize`]).
    pub frame: Value,
}

/// Frames that need no reply, by `type` (PROTOCOL.md §4 chat, §3 notifications).
const MESSAGES: &[&str] = &[
    "sendMessage",
    "notificationEvent",
    "processStarted",
    "processStoped",
    "processFinished",
    "runProject",
];

/// Reads one agent frame. `None` for a frame that is not a JSON object with a string `type`.
pub fn classify(text: &str) -> Option<Frame> {
    let value: Value = serde_json::from_str(text).ok()?;
    let value = normalize(value);
    let obj = value.as_object()?;
    let ty = obj.get("type")?.as_str()?.to_owned();
    let action = obj
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let request_id = obj.get("requestId").cloned().unwrap_or(Value::Null);
    let generation = if obj.contains_key("requestId") {
        Generation::V2
    } else {
        Generation::V1
    };
    if ty.ends_with("notify") || MESSAGES.contains(&ty.as_str()) || fire_and_forget(&ty, &action) {
        return Some(Frame::Message { ty, action });
    }
    let spec_client = obj.get("__spec").is_some();
    let (reply_type, by_event) = match reply_type(generation, &ty, &action) {
        Some(r) => r,
        None if generation == Generation::V2 => (FALLBACK, false),
        None => return Some(Frame::UnknownV1 { ty, action }),
    };
    Some(Frame::Request(Request {
        generation,
        request_id,
        ty,
        action,
        reply_type,
        by_event,
        spec_client,
        frame: value,
    }))
}

/// The reply type for a v2 request byre does not know; the reply echoes its `requestId`, which
/// is what resolves it.
pub const FALLBACK: &str = "unsupportedResponse";

fn fire_and_forget(ty: &str, action: &str) -> bool {
    matches!(
        (ty, action),
        ("browserEvent", "close" | "getPDF" | "pdfToText")
            | (
                "crawlerEvent",
                "start" | "screenshot" | "goToPage" | "scroll" | "enter"
            )
            | ("projectEvent", "runProject")
    )
}

/// The awaited reply type of a request and whether it is matched on `event`; `None` when the
/// request is unknown.
pub fn reply_type(g: Generation, ty: &str, action: &str) -> Option<(&'static str, bool)> {
    use Generation::V1;
    let t = match (ty, action) {
        // fs
        ("fsEvent", "createFile") => "createFileResponse",
        ("fsEvent", "createFolder") => "createFolderResponse",
        ("fsEvent", "readFile") => "readFileResponse",
        ("fsEvent", "updateFile") if g == V1 => "commandOutput",
        ("fsEvent", "updateFile") => "updateFileResponse",
        ("fsEvent", "deleteFile") => "deleteFileResponse",
        ("fsEvent", "deleteFolder") => "deleteFolderResponse",
        ("fsEvent", "fileList") => "fileListResponse",
        ("fsEvent", "listCodeDefinitionNames") => "listCodeDefinitionNamesResponse",
        ("fsEvent", "searchFiles") => "searchFilesResponse",
        ("fsEvent", "writeToFile") => "writeToFileResponse",
        ("fsEvent", "grep_search") => "grepSearchResponse",
        ("fsEvent", "file_search") => "fileSearchResponse",
        ("fsEvent", "edit_file_with_diff" | "edit_file_and_apply_diff") => {
            "editFileAndApplyDiffResponse"
        }
        // git
        ("gitEvent", "Init") if g == V1 => "InitResponse",
        ("gitEvent", "Init") => "gitInitResponse",
        ("gitEvent", "Clone") if g == V1 => "CloneResponse",
        ("gitEvent", "Clone") => "gitCloneResponse",
        ("gitEvent", "Pull") => "PullResponse",
        ("gitEvent", "Push") => "PushResponse",
        ("gitEvent", "Status") if g == V1 => "StatusResponse",
        ("gitEvent", "Status") => "gitStatusResponse",
        ("gitEvent", "Add") => "AddResponse",
        ("gitEvent", "Commit") => "gitCommitResponse",
        ("gitEvent", "Checkout") if g == V1 => "CheckoutResponse",
        ("gitEvent", "Checkout") => "gitCheckoutResponse",
        ("gitEvent", "Branch") => "BranchResponse",
        ("gitEvent", "gitBranch") => "gitBranchResponse",
        ("gitEvent", "Logs") => "LogsResponse",
        ("gitEvent", "gitLogs") => "gitLogsResponse",
        ("gitEvent", "Diff") => "DiffResponse",
        // terminal
        ("executeCommand", "") => "commandFinish",
        ("executeCommandRunUntilError", "") => "commandError",
        ("sendInterruptToTerminal", "") => "terminalInterrupted",
        ("executeCommandWithStream", "") => "commandFinish",
        // llm
        ("inference", "") => "llmResponse",
        // chat
        ("waitforReply", "") => "waitFormessageResponse",
        ("getChatHistory", "") => "getChatHistoryResponse",
        ("confirmationRequest", "") => "confirmationResponse",
        // memory
        ("memoryEvent", "set") if g == V1 => "memorySetResponse",
        ("memoryEvent", "set") => "setMemoryResponse",
        ("memoryEvent", "get") if g == V1 => "memoryGetResponse",
        ("memoryEvent", "get") => "getMemoryResponse",
        // vector db
        ("vectordbEvent" | "vectorDbEvent", "getVector") => "getVectorResponse",
        ("vectordbEvent" | "vectorDbEvent", "addVectorItem") => "addVectorItemResponse",
        ("vectordbEvent" | "vectorDbEvent", "queryVectorItem") => "qeryVectorItemResponse",
        ("vectordbEvent" | "vectorDbEvent", "queryVectorItems") => "qeryVectorItemsResponse",
        // tokenizer
        ("tokenizerEvent", "addToken") => "addTokenResponse",
        ("tokenizerEvent", "getToken") => "getTokenResponse",
        // history
        ("chatSummaryEvent", "summarizeAll") if g == V1 => "getSummarizeAllResponse",
        ("chatSummaryEvent", "summarizeAll") => "summarizeAllResponse",
        ("chatSummaryEvent", "summarize") if g == V1 => "getSummarizeResponse",
        ("chatSummaryEvent", "summarize") => "summarizePartResponse",
        // debug
        ("debugEvent", "addLog") => "debugEventResponse",
        ("debugEvent", "openDebugBrowser") => "openDebugBrowserResponse",
        // state
        ("projectStateEvent", "getAppState") => "getAppStateResponse",
        ("projectStateEvent", "getProjectState") => "getProjectStateResponse",
        ("projectStateEvent", "updateProjectState") => "updateProjectStateResponse",
        ("agentStateEvent", "addToAgentState") => "addToAgentStateResponse",
        ("agentStateEvent", "getAgentState") => "getAgentStateResponse",
        // tasks
        ("taskEvent", "updateTask") if g == V1 => "updateTaskResponse",
        ("taskEvent", "updateTask") => "updateTasksResponse",
        ("taskEvent", "addTask") => "addTaskResponse",
        ("taskEvent", "getTasks") => "getTasksResponse",
        ("taskEvent", "getTasksByAgent") => "getTasksByAgentResponse",
        ("taskEvent", "getTasksByCategory") => "getTasksByCategoryResponse",
        ("taskEvent", "getAllAgents") => "getAllAgentsResponse",
        ("taskEvent", "deleteTask") => "deleteTaskResponse",
        ("taskEvent", "addSubTask") => "addSubTaskResponse",
        ("taskEvent", "updateSubTask") => "updateSubTaskResponse",
        ("taskEvent", "deleteSubTask") => "deleteSubTaskResponse",
        ("taskEvent", "createTasksFromMarkdown") => "createTasksFromMarkdownResponse",
        ("taskEvent", "exportTasksToMarkdown") => "exportTasksToMarkdownResponse",
        // project
        ("settingEvent" | "projectEvent", "getProjectPath") => "getProjectPathResponse",
        ("settingEvent" | "projectEvent", "getRepoMap") => "getRepoMapResponse",
        ("settingEvent" | "projectEvent", "getEditorFileStatus") => "getEditorFileStatusResponse",
        ("settingEvent" | "projectEvent", "getProjectSettings") => "getProjectSettingsResponse",
        // mcp
        ("codebolttools", "getEnabledToolBoxes") => "getEnabledToolBoxesResponse",
        ("codebolttools", "getLocalToolBoxes") => "getLocalToolBoxesResponse",
        ("codebolttools", "getAvailableToolBoxes") => "getAvailableToolBoxesResponse",
        ("codebolttools", "searchAvailableToolBoxes") => "searchAvailableToolBoxesResponse",
        ("codebolttools", "listToolsFromToolBoxes") => "listToolsFromToolBoxesResponse",
        ("codebolttools", "configureToolBox") => "configureToolBoxResponse",
        ("codebolttools", "getTools") => "getToolsResponse",
        ("codebolttools", "executeTool") => "executeToolResponse",
        // code utils
        ("codeEvent", "getAllFilesMarkdown") => "getAllFilesMarkdownResponse",
        ("codeEvent", "performMatch") if g == V1 => "getgetJsTreeResponse",
        ("codeEvent", "performMatch") => "matchProblemResponse",
        ("codeEvent", "getMatcherList") => "getMatcherListTreeResponse",
        ("codeEvent", "getMatchDetail") if g == V1 => "matchDetailTreeResponse",
        ("codeEvent", "getMatchDetail") => "getMatchDetailResponse",
        // agents
        ("agentEvent", "findAgent") => "findAgentByTaskResponse",
        ("agentEvent", "startAgent") => "taskCompletionResponse",
        ("agentEvent", "listAgents") => "listAgentsResponse",
        ("agentEvent", "agentsDetail") if g == V1 => "listAgentsResponse",
        ("agentEvent", "agentsDetail") => "agentsDetailResponse",
        // crawler
        ("crawlerEvent", "click") if g == V1 => return Some(("clickFinished", true)),
        ("crawlerEvent", "type") if g == V1 => return Some(("typeFinished", true)),
        ("crawlerEvent", "crawl") if g == V1 => return Some(("crawlResponse", true)),
        ("crawlerEvent", "click") => "crawlResponse",
        // browser
        ("browserEvent", a) => {
            let t = match a {
                "newPage" => "newPageResponse",
                "getUrl" => "getUrlResponse",
                "goToPage" => "goToPageResponse",
                "screenshot" => "screenshotResponse",
                "getHTML" => "htmlReceived",
                "getMarkdown" => "getMarkdownResponse",
                "getContent" => "getContentResponse",
                "getSnapShot" => "getSnapShotResponse",
                "getBrowserInfo" => "getBrowserInfoResponse",
                "extractText" => "extractTextResponse",
                "scroll" => "scrollResponse",
                "type" => "typeResponse",
                "click" => "clickResponse",
                "enter" => "EnterResponse",
                "search" => "searchResponse",
                _ => return None,
            };
            return Some((t, g == V1));
        }
        _ => return None,
    };
    Some((t, false))
}

/// Maps a frame in the AsyncAPI file's spelling onto the real client's (PROTOCOL.md §6 items
/// 4–6) and marks it `"__spec": true`; real frames pass unchanged.
pub fn normalize(mut v: Value) -> Value {
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    let ty = obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let action = obj
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let set = |obj: &mut serde_json::Map<String, Value>, t: &str, a: &str| {
        obj.insert("type".into(), t.into());
        if a.is_empty() {
            obj.remove("action");
        } else {
            obj.insert("action".into(), a.into());
        }
        obj.insert("__spec".into(), true.into());
    };
    let msg = obj.get("message").cloned().unwrap_or(Value::Null);
    match ty.as_str() {
        "llmEvent" => {
            set(obj, "inference", "");
            let prompt = serde_json::json!({"messages": msg.get("messages").cloned().unwrap_or(Value::Null), "model": msg.get("model").cloned().unwrap_or(Value::Null)});
            obj.insert("message".into(), serde_json::json!({ "prompt": prompt }));
        }
        "terminalEvent" => {
            let t = match action.as_str() {
                "executeCommandRunUntilError" => "executeCommandRunUntilError",
                "executeCommandWithStream" => "executeCommandWithStream",
                "sendManualInterrupt" | "sendInterruptToTerminal" => "sendInterruptToTerminal",
                _ => "executeCommand",
            };
            set(obj, t, "");
            if let Some(c) = msg.get("command").cloned() {
                obj.insert("message".into(), c);
            }
        }
        "chatEvent" => {
            let t = match action.as_str() {
                "sendConfirmationRequest" | "askQuestion" => "confirmationRequest",
                "getChatHistory" => "getChatHistory",
                "waitforReply" => "waitforReply",
                "sendMessage" => "sendMessage",
                "sendNotificationEvent" => "notificationEvent",
                "processStarted" => "processStarted",
                "stopProcess" | "processStopped" => "processStoped",
                "processFinished" => "processFinished",
                other => other,
            };
            let t = t.to_owned();
            set(obj, &t, "");
            if let Some(m) = msg.get("message").cloned() {
                obj.insert("message".into(), m);
            }
        }
        "stateEvent" => {
            let (t, a) = match action.as_str() {
                "getApplicationState" | "getAppState" => ("projectStateEvent", "getAppState"),
                "addToAgentState" => ("agentStateEvent", "addToAgentState"),
                "getAgentState" => ("agentStateEvent", "getAgentState"),
                "updateProjectState" => ("projectStateEvent", "updateProjectState"),
                _ => ("projectStateEvent", "getProjectState"),
            };
            set(obj, t, a);
            obj.insert("payload".into(), msg);
        }
        "mcpEvent" => set(obj, "codebolttools", &action),
        "historyEvent" => set(obj, "chatSummaryEvent", &action),
        "codeUtilsEvent" => set(obj, "codeEvent", &action),
        "utilsEvent" => set(obj, "fsEvent", "edit_file_and_apply_diff"),
        "vectordbEvent" if obj.contains_key("requestId") => set(obj, "vectorDbEvent", &action),
        "gitEvent" if action.starts_with("git") && action != "gitBranch" && action != "gitLogs" => {
            let a = action.trim_start_matches("git").to_owned();
            set(obj, "gitEvent", &a);
            if let Some(m) = msg.get("commitMessage").cloned() {
                obj.insert("message".into(), m);
            }
        }
        "fsEvent" if action == "grepSearch" => set(obj, "fsEvent", "grep_search"),
        "fsEvent" if action == "fileSearch" => set(obj, "fsEvent", "file_search"),
        "fsEvent" if action == "editFileWithDiff" => set(obj, "fsEvent", "edit_file_with_diff"),
        "memoryEvent" if action == "memorySet" => set(obj, "memoryEvent", "set"),
        "memoryEvent" if action == "memoryGet" => set(obj, "memoryEvent", "get"),
        "agentEvent" if action == "getAgentsDetail" => set(obj, "agentEvent", "agentsDetail"),
        "taskEvent" if action == "addSimpleTask" => set(obj, "taskEvent", "addTask"),
        "crawlerEvent" => {
            let a = match action.as_str() {
                "startCrawler" => "start",
                "crawlerScreenshot" => "screenshot",
                "crawlerGoToPage" => "goToPage",
                "crawlerScroll" => "scroll",
                "crawlerClick" => "click",
                _ => return v,
            };
            set(obj, "crawlerEvent", a);
        }
        _ => {}
    }
    v
}

/// A value's text: a string as is, anything else as compact JSON, null as empty.
pub fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request of `frames.jsonl` (both generations) classifies to the type the stub
    /// answered with (the one its client resolved on).
    #[test]
    fn captured_frames_get_their_awaited_reply_type() {
        let path = crate::fixtures().join("codebolt/frames.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let rows: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let mut checked = 0;
        for (i, row) in rows.iter().enumerate() {
            if row["dir"] != "agent->app" {
                continue;
            }
            let frame = row["frame"].to_string();
            let next = rows.get(i + 1).filter(|r| r["dir"] == "app->agent");
            match (classify(&frame), next) {
                (Some(Frame::Request(r)), Some(_)) => {
                    // The stub's replies to this request (a stream sends several, the
                    // awaited `commandFinish` last).
                    let got: Vec<&str> = rows[i + 1..]
                        .iter()
                        .take_while(|r| r["dir"] == "app->agent")
                        .flat_map(|r| [r["frame"]["event"].as_str(), r["frame"]["type"].as_str()])
                        .flatten()
                        .collect();
                    assert!(got.contains(&r.reply_type), "{frame}: {got:?}");
                    checked += 1;
                }
                (Some(Frame::Message { .. }), None) => {}
                (other, _) => panic!("{frame}: {other:?}"),
            }
        }
        assert!(checked > 200, "{checked}");
    }

    #[test]
    fn spec_spelling_maps_onto_the_real_one() {
        let f =
            classify(r#"{"type":"gitEvent","action":"gitStatus","requestId":"r","message":{}}"#);
        let Some(Frame::Request(r)) = f else { panic!() };
        assert_eq!((r.reply_type, r.spec_client), ("gitStatusResponse", true));
        let f = classify(
            r#"{"type":"llmEvent","action":"inference","requestId":"r","message":{"messages":[]}}"#,
        );
        let Some(Frame::Request(r)) = f else { panic!() };
        assert_eq!(r.reply_type, "llmResponse");
        assert!(classify("not json").is_none());
        assert!(classify("[1]").is_none());
        assert_eq!(
            classify(r#"{"type":"whatever","requestId":"x"}"#)
                .map(|f| matches!(f, Frame::Request(r) if r.reply_type == FALLBACK)),
            Some(true)
        );
    }
}
