//! Integration tests: the real server on a loopback port, driven through its public HTTP
//! interface; every JSON body is checked against `schema/byre.openapi.yaml`. One binary
//! (all modules linked once).

mod helpers;
mod process;
mod schema;

mod agent_exits;
mod agent_limits;
mod ask_human;
mod auth;
mod blobs;
mod bounds;
mod browser;
mod claude;
mod cli;
mod client;
mod codebolt;
mod codebolt_agents;
mod codebolt_browser;
mod codebolt_browser_break;
mod codebolt_git;
mod codebolt_memory;
mod codeutil;
mod codeutil_break;
mod codex;
mod contract;
mod crash;
mod docs;
mod doctor;
mod edge;
mod events;
mod finish;
mod fork;
mod inbox;
mod layering;
mod lead;
mod limits;
mod me;
mod metrics;
mod old_logs;
mod projects;
mod recovery;
mod reviews;
mod sandbox;
mod sandbox_tools;
mod secrets;
mod snapshots;
mod startup_snapshot;
mod subagents;
mod subtasks;
mod tasks;
mod terminal;
mod todo;
mod ui;
mod views;
mod workflows;
