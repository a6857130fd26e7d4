//! The CodeBolt adapter: the agent-to-app WebSocket the real `@codebolt/codeboltjs` client
//! speaks (`vendors/codebolt/PROTOCOL.md`; `schema/codebolt.asyncapi.yaml` where the client
//! agrees), translated into the application's operations. The transport that joins a socket to
//! its session (`Hub`, `Link`, the frames' kinds) is the agent's own, in byre-agents.
//!
//! - [`endpoint`]: the `/codebolt` WebSocket (also at the AsyncAPI's `/agent-to-app` and
//!   `/app-to-agent`), authenticated by the per-session secret byre gave the agent.
//! - [`actions`]: what each request asks (fs, git, terminal, llm, memory, …), translated into
//!   an operation on the agent's task and its reply.
//! - [`agents`]: the `agentEvent` family: the runnable CodeBolt agents and `startAgent`.

pub mod actions;
pub mod agents;
pub mod endpoint;
