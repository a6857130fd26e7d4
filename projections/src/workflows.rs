//! Workflows: named definitions whose stages each run as their own task. Operations:
//! `listWorkflows`, `getWorkflow`, `putWorkflow`, `deleteWorkflow`. The definition is parsed
//! at the edge (YAML or JSON) and validated here by [`validate`].

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent, WorkflowDeleted, WorkflowSaved};
use crate::projects::check_name;
use crate::{Rejection, State};

/// Where a stage's task branches from (spec `Stage.base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageBase {
    /// The commit its one after stage finished at (the default).
    Parent,
    /// The project's default branch.
    Main,
}

/// One stage (spec `Stage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Unique within the workflow; one line of 1 to 100 characters.
    pub name: String,
    /// The stages whose outputs it gets. Absent: the previous stage; empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// Where its task branches from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<StageBase>,
    /// The agent's model (gpt-* on Codex, others on Claude Code).
    pub model: String,
    /// The agent's instructions.
    pub prompt: String,
}

/// A workflow's file (spec `WorkflowDefinition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDefinition {
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// At least one stage.
    pub stages: Vec<Stage>,
}

impl WorkflowDefinition {
    /// Each stage's after stages with the defaults applied: absent means the previous stage.
    pub fn effective_after(&self) -> Vec<Vec<String>> {
        self.stages
            .iter()
            .enumerate()
            .map(|(i, s)| match &s.after {
                Some(a) => a.clone(),
                None if i == 0 => Vec::new(),
                None => vec![self.stages[i - 1].name.clone()],
            })
            .collect()
    }
}

/// A stored workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    /// Name.
    pub name: String,
    /// Definition.
    pub definition: WorkflowDefinition,
    /// Seq of the `workflow.saved` that stored this version.
    pub saved_seq: u64,
}

/// Most stages a workflow may have. A run starts every stage with no after stages at once,
/// each with its own worktree and agent process, in the one `createTask` request: unbounded,
/// a 256 KiB file could ask for thousands.
pub const MAX_STAGES: usize = 50;

/// Validates a workflow: at most [`MAX_STAGES`] stages, its name, each stage's name (unique), model (as a session checks
/// it) and prompt, that every
/// `after` names another stage, that `base` is not given on a stage with more than one after
/// stage, that exactly one stage (the final one) has no other stage after it, and that the
/// stages form no cycle.
/// # Errors
/// `Rejection::Invalid` with the first problem found, naming the stage.
pub fn validate(name: &str, def: &WorkflowDefinition) -> Result<(), Rejection> {
    check_name("the workflow's name", name)?;
    if def.stages.is_empty() {
        return Err(Rejection::Invalid(
            "a workflow needs at least one stage".into(),
        ));
    }
    if def.stages.len() > MAX_STAGES {
        return Err(Rejection::Invalid(format!(
            "a workflow has at most {MAX_STAGES} stages, not {}",
            def.stages.len()
        )));
    }
    let mut names = std::collections::BTreeMap::new();
    for (i, s) in def.stages.iter().enumerate() {
        check_name(&format!("stage {}'s name", i + 1), &s.name)?;
        if names.insert(s.name.as_str(), i).is_some() {
            return Err(Rejection::Invalid(format!(
                "two stages are named `{}`",
                s.name
            )));
        }
        if s.model.trim().is_empty() {
            return Err(Rejection::Invalid(format!(
                "stage `{}` has no model",
                s.name
            )));
        }
        // The stage's session checks its model the same way; refusing it here keeps a run
        // from making its first stage's task and then failing to start its agent.
        crate::users::check_model(&s.model)
            .map_err(|e| Rejection::Invalid(format!("stage `{}`'s model: {e}", s.name)))?;
        if s.prompt.trim().is_empty() {
            return Err(Rejection::Invalid(format!(
                "stage `{}` has no prompt",
                s.name
            )));
        }
    }
    let after = def.effective_after();
    for (s, a) in def.stages.iter().zip(&after) {
        let mut seen = std::collections::BTreeSet::new();
        for dep in a {
            if dep == &s.name {
                return Err(Rejection::Invalid(format!(
                    "stage `{}` comes after itself",
                    s.name
                )));
            }
            if !names.contains_key(dep.as_str()) {
                return Err(Rejection::Invalid(format!(
                    "stage `{}` comes after `{dep}`, which is not a stage",
                    s.name
                )));
            }
            if !seen.insert(dep) {
                return Err(Rejection::Invalid(format!(
                    "stage `{}` lists `{dep}` twice in after",
                    s.name
                )));
            }
        }
        if s.base.is_some() && a.len() > 1 {
            return Err(Rejection::Invalid(format!(
                "stage `{}` comes after {} stages, so it always branches from the default branch: remove its base",
                s.name,
                a.len()
            )));
        }
    }
    let finals: Vec<&str> = def
        .stages
        .iter()
        .filter(|s| !after.iter().any(|a| a.contains(&s.name)))
        .map(|s| s.name.as_str())
        .collect();
    if finals.len() > 1 {
        return Err(Rejection::Invalid(format!(
            "a workflow ends in one final stage, which no other stage comes after; {} are: make one of them come after the others",
            finals
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    // Cycle check: depth-first search with colours (0 new, 1 on the path, 2 done).
    let mut colour = vec![0u8; def.stages.len()];
    fn visit(
        i: usize,
        after: &[Vec<String>],
        names: &std::collections::BTreeMap<&str, usize>,
        colour: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        colour[i] = 1;
        path.push(i);
        for dep in &after[i] {
            let j = names[dep.as_str()];
            if colour[j] == 1 {
                let start = path.iter().position(|&k| k == j).unwrap_or(0);
                return Some(path[start..].to_vec());
            }
            if colour[j] == 0 {
                if let Some(c) = visit(j, after, names, colour, path) {
                    return Some(c);
                }
            }
        }
        path.pop();
        colour[i] = 2;
        None
    }
    for i in 0..def.stages.len() {
        if colour[i] == 0 {
            if let Some(cycle) = visit(i, &after, &names, &mut colour, &mut Vec::new()) {
                let names: Vec<&str> = cycle.iter().map(|&k| def.stages[k].name.as_str()).collect();
                return Err(Rejection::Invalid(format!(
                    "the stages form a cycle: {}",
                    names.join(" → ")
                )));
            }
        }
    }
    Ok(())
}

/// Decides `PutWorkflow`.
pub(crate) fn put(
    actor: &str,
    name: &str,
    definition: &WorkflowDefinition,
) -> Result<Vec<NewEvent>, Rejection> {
    validate(name, definition)?;
    Ok(vec![NewEvent::new(
        actor,
        EventBody::WorkflowSaved(WorkflowSaved {
            name: name.to_owned(),
            definition: definition.clone(),
        }),
    )])
}

/// Decides `DeleteWorkflow`.
pub(crate) fn delete(state: &State, actor: &str, name: &str) -> Result<Vec<NewEvent>, Rejection> {
    if !state.workflows.contains_key(name) {
        return Err(Rejection::NotFound(format!("no workflow named `{name}`")));
    }
    Ok(vec![NewEvent::new(
        actor,
        EventBody::WorkflowDeleted(WorkflowDeleted {
            name: name.to_owned(),
        }),
    )])
}

/// Folds the workflow events.
pub(crate) fn apply(state: &mut State, seq: u64, body: &EventBody) {
    match body {
        EventBody::WorkflowSaved(p) => match state.workflows.get_mut(&p.name) {
            // A re-save keeps the entry and its name: no key allocated per event.
            Some(w) => {
                w.definition.clone_from(&p.definition);
                w.saved_seq = seq;
            }
            None => {
                state.workflows.insert(
                    p.name.clone(),
                    Workflow {
                        name: p.name.clone(),
                        definition: p.definition.clone(),
                        saved_seq: seq,
                    },
                );
            }
        },
        EventBody::WorkflowDeleted(p) => {
            state.workflows.remove(&p.name);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, after: Option<&[&str]>, base: Option<StageBase>) -> Stage {
        Stage {
            name: name.into(),
            after: after.map(|a| a.iter().map(|s| s.to_string()).collect()),
            base,
            model: "sonnet".into(),
            prompt: "do it".into(),
        }
    }

    fn def(stages: Vec<Stage>) -> WorkflowDefinition {
        WorkflowDefinition {
            description: String::new(),
            stages,
        }
    }

    #[test]
    fn a_chain_with_defaults_is_valid() {
        let d = def(vec![
            stage("plan", None, None),
            stage("build", None, Some(StageBase::Main)),
            stage("ship", None, None),
        ]);
        assert!(validate("release", &d).is_ok());
        assert_eq!(
            d.effective_after(),
            vec![vec![], vec!["plan".to_string()], vec!["build".to_string()]]
        );
    }

    #[test]
    fn bad_definitions_are_refused_with_the_reason() {
        let long = "x".repeat(101);
        let cases: Vec<(&str, &str, WorkflowDefinition, &str)> = vec![
            ("empty", "w", def(vec![]), "at least one stage"),
            ("bad name", "", def(vec![stage("a", None, None)]), "name"),
            (
                "long name",
                &long,
                def(vec![stage("a", None, None)]),
                "name",
            ),
            (
                "duplicate",
                "w",
                def(vec![stage("a", None, None), stage("a", None, None)]),
                "two stages",
            ),
            (
                "unknown after",
                "w",
                def(vec![stage("a", Some(&["zz"]), None)]),
                "not a stage",
            ),
            (
                "self",
                "w",
                def(vec![stage("a", Some(&["a"]), None)]),
                "after itself",
            ),
            (
                "cycle",
                "w",
                def(vec![stage("a", Some(&["b"]), None), stage("b", None, None)]),
                "cycle",
            ),
            (
                "base with two after",
                "w",
                def(vec![
                    stage("a", Some(&[]), None),
                    stage("b", Some(&[]), None),
                    stage("c", Some(&["a", "b"]), Some(StageBase::Parent)),
                ]),
                "remove its base",
            ),
        ];
        for (what, name, d, needle) in cases {
            let err = validate(name, &d).expect_err(what);
            assert!(err.to_string().contains(needle), "{what}: {err}");
        }
    }
}
