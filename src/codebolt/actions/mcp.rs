//! CodeBolt's mcp family (`codebolttools`, PROTOCOL.md "MCP tools"): byre's own agent tools as
//! the toolbox `byre` (tools `byre--<tool>`, through `app::tools::call`, as over MCP for the
//! CLIs), beside the project's configured MCP toolboxes (`app::toolboxes`: tools
//! `<toolbox>--<tool>`, each toolbox's stdio server started for this agent when first used).
//!
//! Listings (`getEnabledToolBoxes`, `getLocalToolBoxes`, `getAvailableToolBoxes`,
//! `searchAvailableToolBoxes`) answer `data: [{name, description}]`, `byre` first;
//! `listToolsFromToolBoxes {toolBoxes}` and `getTools {toolboxes: [{toolbox, toolName}]}`
//! answer OpenAI function tools; `executeTool {toolName: "<toolbox>--<tool>", params}` answers
//! `data: [false, <result text>]` (PROTOCOL.md: `[userRejected, result]`); `configureToolBox
//! {mcpName, config}` sets the project's toolbox (`config: null` removes it) and answers its
//! configuration as written.

use serde_json::{json, Value};

use super::{err, text, Ctx};
use byre_toolboxes::BYRE;

/// byre's tools as OpenAI function tools named `byre--<tool>`.
fn byre_definitions() -> Vec<Value> {
    // A CodeBolt agent is a task's agent, never a reviewer or a lead.
    byre_app::tools::definitions_for(byre_projections::sessions::SessionRole::Implementer)
        .into_iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": format!("{BYRE}--{}", t.name),
                "description": t.description,
                "parameters": t.input_schema,
            }})
        })
        .collect()
}

/// A toolbox's tools as OpenAI function tools named `<toolbox>--<tool>`.
async fn definitions(ctx: &Ctx, toolbox: &str) -> Result<Vec<Value>, String> {
    if toolbox == BYRE {
        return Ok(byre_definitions());
    }
    let tools = byre_app::toolboxes::list_tools(&ctx.app, &ctx.toolboxes, &ctx.link, toolbox)
        .await
        .map_err(|e| e.to_string())?;
    Ok(tools
        .into_iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": format!("{toolbox}--{}", t.name),
                "description": t.description.as_deref().unwrap_or(""),
                "parameters": Value::Object((*t.input_schema).clone()),
            }})
        })
        .collect())
}

/// byre's toolbox and the project's configured ones, as listings show them.
fn toolboxes(ctx: &Ctx) -> Result<Vec<Value>, String> {
    let mut out = vec![json!({"name": BYRE, "description": "byre's tools for a task's agent"})];
    let cfg = byre_app::toolboxes::configured(&ctx.app, &ctx.link.session_id)
        .map_err(|e| e.to_string())?;
    for (name, s) in cfg.servers {
        let description = if s.description.is_empty() {
            format!("the MCP server `{}`", s.command)
        } else {
            s.description
        };
        out.push(json!({"name": name, "description": description}));
    }
    Ok(out)
}

/// Toolbox names in a request's list: strings, or objects with `toolbox` or `name`.
fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|b| match b {
                    Value::String(s) => s.clone(),
                    o => text(if o["toolbox"].is_null() {
                        &o["name"]
                    } else {
                        &o["toolbox"]
                    }),
                })
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The reply fields of a `codebolttools` request: see the module's doc.
pub(super) async fn mcp_action(ctx: &Ctx, action: &str, f: &Value) -> Value {
    match action {
        "getEnabledToolBoxes" | "getLocalToolBoxes" | "getAvailableToolBoxes" => {
            match toolboxes(ctx) {
                Ok(list) => json!({"data": list}),
                Err(e) => err(e),
            }
        }
        "searchAvailableToolBoxes" => {
            let q = text(&f["query"]).to_lowercase();
            match toolboxes(ctx) {
                Ok(list) => {
                    let hits: Vec<Value> = list
                        .into_iter()
                        .filter(|t| {
                            let hay = format!("{} {}", text(&t["name"]), text(&t["description"]))
                                .to_lowercase();
                            q.is_empty() || hay.contains(&q) || q.contains(&text(&t["name"]))
                        })
                        .collect();
                    json!({"data": hits})
                }
                Err(e) => err(e),
            }
        }
        "listToolsFromToolBoxes" => {
            let wanted = match names(&f["toolBoxes"]) {
                w if w.is_empty() && f["toolBoxes"].is_null() => vec![BYRE.to_owned()],
                w => w,
            };
            let mut all = Vec::new();
            // Names that are no toolbox of this project are left out (a client's own
            // defaults, such as `codebolt`); one that is configured but fails is an error.
            for t in wanted
                .iter()
                .filter(|t| *t == BYRE || toolboxes_has(ctx, t))
            {
                match definitions(ctx, t).await {
                    Ok(d) => all.extend(d),
                    Err(e) => return err(e),
                }
            }
            json!({"data": all})
        }
        "getTools" => {
            let asked: Vec<(String, String)> = f["toolboxes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|t| (text(&t["toolbox"]), text(&t["toolName"])))
                        .collect()
                })
                .unwrap_or_default();
            let mut boxes: Vec<String> = asked.iter().map(|(b, _)| b.clone()).collect();
            boxes.dedup();
            if boxes.is_empty() {
                boxes.push(BYRE.to_owned());
            }
            let mut out = Vec::new();
            for b in boxes
                .iter()
                .filter(|b| b.is_empty() || *b == BYRE || toolboxes_has(ctx, b))
            {
                let b = if b.is_empty() { BYRE } else { b.as_str() };
                let Ok(defs) = definitions(ctx, b).await else {
                    continue;
                };
                out.extend(defs.into_iter().filter(|d| {
                    let name = text(&d["function"]["name"]);
                    asked.is_empty()
                        || asked.iter().any(|(ab, t)| {
                            (ab == b || ab.is_empty())
                                && (t.is_empty() || name == format!("{b}--{t}"))
                        })
                }));
            }
            json!({"data": out})
        }
        "executeTool" => execute_tool(ctx, f).await,
        "configureToolBox" => {
            let name = text(&f["mcpName"]);
            match byre_app::toolboxes::configure(
                &ctx.app,
                &ctx.link.session_id,
                &name,
                &f["config"],
            )
            .await
            {
                Ok(cfg) => {
                    json!({"data": {"configured": true, "name": name, "config": cfg.servers.get(&name)}})
                }
                Err(e) => err(e.to_string()),
            }
        }
        _ => err(format!("byre does not support codebolttools/{action}")),
    }
}

fn toolboxes_has(ctx: &Ctx, name: &str) -> bool {
    byre_app::toolboxes::configured(&ctx.app, &ctx.link.session_id)
        .is_ok_and(|c| c.servers.contains_key(name))
}

/// `executeTool`: the tool named `<toolbox>--<tool>` (or `toolbox` beside a bare name).
async fn execute_tool(ctx: &Ctx, f: &Value) -> Value {
    let name = text(&f["toolName"]);
    let fail = |m: String| {
        let mut v = err(m.clone());
        v["data"] = json!([false, m]);
        v
    };
    let (toolbox, tool) = match name.split_once("--") {
        Some((b, t)) => (b.to_owned(), t.to_owned()),
        None => match f["toolbox"].as_str() {
            Some(b) => (b.to_owned(), name.clone()),
            None => {
                return fail(format!(
                    "no tool `{name}`: tools are named `<toolbox>--<tool>`, e.g. byre--ask_human"
                ))
            }
        },
    };
    let params = match &f["params"] {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    if toolbox == BYRE {
        let params = Value::Object(params);
        return match byre_app::tools::call(&ctx.app, &ctx.link.session_id, &tool, &params).await {
            Ok(r) if r.is_error => fail(r.text),
            Ok(r) => json!({"data": [false, r.text]}),
            Err(e) => fail(e.to_string()),
        };
    }
    match byre_app::toolboxes::call(&ctx.app, &ctx.toolboxes, &ctx.link, &toolbox, &tool, params)
        .await
    {
        Ok(out) if out.is_error => fail(out.text),
        Ok(out) => json!({"data": [false, out.text]}),
        Err(e) => fail(e.to_string()),
    }
}
