// `/workflows`: the saved workflows (listWorkflows), each one's file to read and edit as YAML
// (getWorkflow, putWorkflow: the server validates it and says what is wrong), delete
// (deleteWorkflow), and a new one from a starting file. The list is read again on every
// `workflow.saved` / `workflow.deleted` event (js/store.js bumps `workflowsVersion`). Runs
// start from a project's "New task" page.

import { html, useState, useEffect } from "../html.js";
import { api, shownHere } from "../api.js";

/** The file a new workflow starts from: three stages, showing `after` and models. */
export const STARTER = `description: Plan, build, then review.
stages:
  - name: plan
    model: sonnet
    prompt: Read the code and write a plan for the brief. Change nothing.
  - name: build
    model: gpt-5.5
    prompt: Build what the plan says, with tests.
  - name: review
    model: sonnet
    prompt: Review the build against the plan and the brief; fix what is wrong.
`;

function Editor({ name, isNew, onDone }) {
  const [text, setText] = useState(isNew ? STARTER : null);
  const [newName, setNewName] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!isNew) api.getWorkflow(name).then(setText).catch((e) => setError(e.message));
  }, [name]);
  const save = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.putWorkflow(isNew ? newName.trim() : name, text);
      onDone(isNew ? newName.trim() : name);
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    if (!confirm(`Delete the workflow "${name}"? Tasks that already run it keep their copy.`)) return;
    setBusy(true);
    try {
      await api.deleteWorkflow(name);
      onDone(null);
    } catch (err) {
      setError(err.message);
      setBusy(false);
    }
  };
  if (text === null) return error ? html`<div class="form-error" role="alert">${error}</div>` : html`<p class="hint">Reading ${name}…</p>`;
  return html`<form class="card wf-editor" data-testid="workflow-editor" onSubmit=${save}>
    ${isNew ? html`<label>Name <input data-testid="workflow-name" value=${newName} onInput=${(e) => setNewName(e.target.value)} maxlength="100" placeholder="plan-build-review" autofocus /></label>` : html`<h2>${name}</h2>`}
    <label>Definition <span class="hint">(YAML: <code>description</code>, <code>stages</code> with <code>name</code>, <code>model</code>, <code>prompt</code>, optional <code>after</code> and <code>base</code>)</span>
      <textarea data-testid="workflow-yaml" class="mono" rows="18" spellcheck="false" value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
    </label>
    ${error ? html`<div class="form-error" role="alert" data-testid="workflow-error">${error}</div>` : null}
    <div class="actions">
      <button type="button" onClick=${() => onDone(isNew ? null : name)}>Cancel</button>
      ${isNew ? null : html`<button type="button" class="danger" data-testid="workflow-delete" disabled=${busy} onClick=${remove}>Delete</button>`}
      <button type="submit" class="primary" data-testid="workflow-save" disabled=${busy || (isNew && !newName.trim())}>Save</button>
    </div>
  </form>`;
}

/** The workflows page. */
export function WorkflowsPage({ state }) {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const [editing, setEditing] = useState(null); // a name, "" for a new one, null for none
  useEffect(() => {
    api.listWorkflows().then(setList).catch((e) => setError(shownHere(e)));
  }, [state.workflowsVersion || 0]);
  return html`<div class="page workflows-page">
    <div class="page-head">
      <h1>Workflows</h1>
      <button type="button" class="primary" data-testid="workflow-new" onClick=${() => setEditing("")}>New workflow</button>
    </div>
    <p class="hint">A workflow runs its stages as tasks, each starting once the stages it comes after have finished, with their outputs. Start a run from a project's <strong>New task</strong> page.</p>
    ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
    ${editing === "" ? html`<${Editor} key="new" isNew=${true} onDone=${() => setEditing(null)} />` : null}
    ${list === null ? html`<p class="hint">Loading…</p>` : list.length === 0 && editing !== ""
      ? html`<p class="empty" data-testid="workflow-list">No workflows yet.</p>`
      : html`<ul class="wf-list" data-testid="workflow-list">${list.map((w) => html`<li key=${w.name} data-testid="workflow-item" data-name=${w.name}>
          ${editing === w.name
            ? html`<${Editor} key=${w.name} name=${w.name} isNew=${false} onDone=${() => setEditing(null)} />`
            : html`<button type="button" class="link" data-testid="workflow-open" onClick=${() => setEditing(w.name)}><strong>${w.name}</strong></button> <span class="hint">${w.description}</span>`}
        </li>`)}</ul>`}
  </div>`;
}
