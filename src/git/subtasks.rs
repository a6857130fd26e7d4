//! The one git question of a subtask's merge into its parent: is the subtask's branch in the
//! parent's HEAD? Read-only.

use std::path::Path;

use super::GitError;

/// The parent worktree's HEAD when local branch `branch`'s tip is that commit or one of its
/// ancestors; `None` when it is not (yet) merged.
/// # Errors
/// [`GitError::NotARepository`] when `parent_worktree` is not a repository;
/// [`GitError::Conflict`] when `branch` is gone; [`GitError::Other`] for libgit2.
pub fn merged_into_head(parent_worktree: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let repo = git2::Repository::open(parent_worktree)
        .map_err(|_| GitError::NotARepository(parent_worktree.display().to_string()))?;
    let head = repo.head()?.peel_to_commit()?.id();
    let tip = repo
        .find_branch(branch, git2::BranchType::Local)
        .map_err(|_| GitError::Conflict(format!("branch `{branch}` is gone")))?
        .get()
        .peel_to_commit()?
        .id();
    let merged = tip == head || repo.graph_descendant_of(head, tip)?;
    Ok(merged.then(|| head.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_branch_is_merged_once_head_holds_its_tip() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(d, &["branch", "sub"]);
        assert!(merged_into_head(d, "sub").unwrap().is_some(), "same commit");
        git(d, &["checkout", "-q", "sub"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "two"]);
        git(d, &["checkout", "-q", "main"]);
        assert_eq!(merged_into_head(d, "sub").unwrap(), None);
        git(d, &["merge", "-q", "--no-edit", "--no-ff", "sub"]);
        let head = merged_into_head(d, "sub").unwrap().unwrap();
        assert_eq!(head.len(), 40);
        assert!(matches!(
            merged_into_head(d, "gone"),
            Err(GitError::Conflict(_))
        ));
    }
}
