//! The git side of reviews: what a snapshot's step changed, and the reviewer's checkout — a
//! plain, read-only copy of the snapshot's tree under the data dir, with no `.git`, so nothing
//! a reviewer writes can reach the task's worktree, index or branch.

use std::path::Path;

use git2::{Oid, Repository};

use super::GitError;

/// What a review's step changed.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// The paths changed, added or deleted, in the snapshot's repository.
    pub files: Vec<String>,
    /// One line per file, `path | +added -deleted`, then a total.
    pub stat: String,
}

/// The step from `base` (a commit; `None`: the merge-base of `commit` and `base_ref`) to
/// `commit`, in the repository at `repo_path`. Blocking.
/// # Errors
/// A commit that is not there, or a libgit2 error.
pub fn step(
    repo_path: &Path,
    commit: &str,
    base: Option<&str>,
    base_ref: &str,
) -> Result<Step, GitError> {
    let repo = Repository::open(repo_path)?;
    let to = repo.find_commit(Oid::from_str(commit)?)?;
    let from = match base {
        Some(b) => Oid::from_str(b)?,
        None => {
            let base_oid = repo.revparse_single(base_ref)?.peel_to_commit()?.id();
            repo.merge_base(to.id(), base_oid).unwrap_or(base_oid)
        }
    };
    let from_tree = repo.find_commit(from)?.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&from_tree), Some(&to.tree()?), None)?;
    let mut out = Step::default();
    let (mut plus, mut minus) = (0usize, 0usize);
    for i in 0..diff.deltas().len() {
        let delta = diff.get_delta(i).expect("index in range");
        let path = delta
            .new_file()
            .path()
            .or_else(|| delta.old_file().path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (add, del) = git2::Patch::from_diff(&diff, i)?
            .map(|p| p.line_stats().map(|(_, a, d)| (a, d)))
            .transpose()?
            .unwrap_or((0, 0));
        plus += add;
        minus += del;
        out.stat.push_str(&format!("{path} | +{add} -{del}\n"));
        out.files.push(path);
    }
    out.stat.push_str(&format!(
        "{} files changed, +{plus} -{minus}\n",
        out.files.len()
    ));
    Ok(out)
}

/// Writes the tree of `commit` into `dir` (made fresh) as plain files, then makes every file
/// and directory read-only for byre's user alone (0400/0500, like all of the data dir). Blocking.
/// # Errors
/// A missing commit, or a filesystem or libgit2 error.
pub fn export(repo_path: &Path, commit: &str, dir: &Path) -> Result<(), GitError> {
    remove_export(dir);
    std::fs::create_dir_all(dir).map_err(|e| GitError::Other(e.to_string()))?;
    let repo = Repository::open(repo_path)?;
    let tree = repo.find_commit(Oid::from_str(commit)?)?.tree()?;
    let mut co = git2::build::CheckoutBuilder::new();
    co.force().target_dir(dir).update_index(false);
    repo.checkout_tree(tree.as_object(), Some(&mut co))?;
    set_read_only(dir, true);
    Ok(())
}

/// Removes a checkout made by [`export`] (nothing when it is gone).
pub fn remove_export(dir: &Path) {
    if dir.exists() {
        set_read_only(dir, false);
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn set_read_only(dir: &Path, ro: bool) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    if !ro {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            set_read_only(&path, ro);
        } else if meta.is_file() {
            let mode = if ro { 0o400 } else { 0o600 };
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        }
    }
    if ro {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o500));
    }
}
