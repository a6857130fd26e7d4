//! Reading a committed file at a branch's tip (TODO.md on the default branch).

use std::path::Path;

use git2::{BranchType, ErrorCode, ObjectType};

use super::{open_top, GitError};

/// Why [`file_at_branch`] could not give a file's bytes.
#[derive(Debug)]
pub enum FileAtBranch {
    /// The blob is larger than the caller's limit.
    TooLarge,
    /// The path names a directory, a submodule or a link, not a regular file.
    NotAFile,
    /// The repository or branch could not be read.
    Git(GitError),
}

impl From<GitError> for FileAtBranch {
    fn from(e: GitError) -> Self {
        FileAtBranch::Git(e)
    }
}

impl From<git2::Error> for FileAtBranch {
    fn from(e: git2::Error) -> Self {
        FileAtBranch::Git(e.into())
    }
}

/// The bytes of `path` (a `/`-separated repository path) in the tree of local branch
/// `branch`'s tip, in the repository whose top is `repo_path`; `Ok(None)` when the tree has no
/// such entry. Reads the object database only: the checkout's files are never looked at.
///
/// # Errors
/// [`FileAtBranch::TooLarge`] over `max_bytes`; [`FileAtBranch::NotAFile`] for a tree, link or
/// submodule entry; [`FileAtBranch::Git`] for an unreadable repository or missing branch.
pub fn file_at_branch(
    repo_path: &Path,
    branch: &str,
    path: &str,
    max_bytes: usize,
) -> Result<Option<Vec<u8>>, FileAtBranch> {
    if !super::is_valid_branch_name(branch) {
        return Err(GitError::Other(format!("invalid branch name {branch:?}")).into());
    }
    let (repo, top) = open_top(repo_path)?;
    let b = match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => b,
        Err(e) if e.code() == ErrorCode::NotFound => {
            return Err(GitError::Other(format!(
                "branch {branch} does not exist in {}",
                top.display()
            ))
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let tree = b.get().peel_to_commit()?.tree()?;
    let entry = match tree.get_path(Path::new(path)) {
        Ok(e) => e,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    // 0o100644 / 0o100755: a regular file; 0o120000 is a link, 0o160000 a submodule.
    if entry.kind() != Some(ObjectType::Blob) || entry.filemode() & 0o170000 != 0o100000 {
        return Err(FileAtBranch::NotAFile);
    }
    let blob = repo.find_blob(entry.id())?;
    if blob.size() > max_bytes {
        return Err(FileAtBranch::TooLarge);
    }
    Ok(Some(blob.content().to_vec()))
}
