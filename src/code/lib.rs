//! byre-code: code utilities for agents, from a real parser and from data, reading a task's
//! worktree only through byre-git's checked paths.
//!
//! - [`definitions`]: the definitions of a worktree's source files from tree-sitter grammars,
//!   and the worktree as one Markdown document.
//! - [`matchers`]: problem matchers, compiler and linter output turned into file:line problems.

#![warn(missing_docs)]

pub mod definitions;
pub mod matchers;
