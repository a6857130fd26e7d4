// Projects: the list, and adding one from a repository path (the server's error as is).

import { html, useState, useMemo } from "../html.js";
import { api } from "../api.js";
import { navigate } from "../router.js";
import { ago } from "../util.js";

function AddProject() {
  const [name, setName] = useState("");
  const [path, setPath] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    const repo = path.trim();
    const fallback = repo.replace(/\/+$/, "").split("/").pop() || repo;
    try {
      const p = await api.createProject({ name: name.trim() || fallback, repo_path: repo });
      setName("");
      setPath("");
      navigate(`/projects/${p.id}`);
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="card add-project" data-testid="project-add-form" onSubmit=${submit}>
    <h2>Add a project</h2>
    <p class="hint">A git repository on this machine with at least one commit: its top directory, as an absolute path.</p>
    <label>Repository path
      <input data-testid="project-add-path" value=${path} onInput=${(e) => setPath(e.target.value)} placeholder="/home/you/src/app" required autocomplete="off" spellcheck="false" />
    </label>
    <label>Name <span class="hint">(default: the directory's name)</span>
      <input data-testid="project-add-name" value=${name} onInput=${(e) => setName(e.target.value)} placeholder="app" autocomplete="off" />
    </label>
    ${error ? html`<div class="form-error" role="alert" data-testid="project-add-error">${error}</div>` : null}
    <div class="actions"><button type="submit" class="primary" data-testid="project-add-submit" disabled=${busy}>${busy ? "Adding…" : "Add project"}</button></div>
  </form>`;
}

/** `/`: every project, and the form to add one. */
export function ProjectsPage({ state }) {
  const projects = useMemo(() => [...state.projects.values()].sort((a, b) => a.name.localeCompare(b.name)), [state.version]);
  return html`<div class="page projects-page">
    <h1>Projects</h1>
    ${projects.length ? html`<ul class="project-list" data-testid="project-list">
      ${projects.map((p) => html`<li key=${p.id}><a class="project-item" data-testid="project-item" data-project-id=${p.id} href=${`/projects/${p.id}`}>
        <span class="pname">${p.name}</span>
        <span class="ppath">${p.repo_path}</span>
        <span class="pmeta">${p.default_branch}${p.remote ? ` · ${p.remote}` : ""} · added ${ago(p.created_at)} by ${p.created_by}</span>
      </a></li>`)}
    </ul>` : html`<p class="empty" data-testid="project-list">No projects yet. Add a repository below to start a task on it.</p>`}
    <${AddProject} />
  </div>`;
}
