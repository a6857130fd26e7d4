//! Unit tests of `git`'s repository, branch and worktree helpers.

use super::*;
use git2::{IndexAddOption, RepositoryInitOptions, Signature, Status, StatusOptions, Time};
use tempfile::TempDir;

fn sig() -> Signature<'static> {
    Signature::new("Test", "test@example.com", &Time::new(1_700_000_000, 0)).unwrap()
}

fn init(dir: &Path, head: &str) -> Repository {
    Repository::init_opts(dir, RepositoryInitOptions::new().initial_head(head)).unwrap()
}

/// Writes `name` in the work tree and commits everything on HEAD.
fn commit(repo: &Repository, name: &str, content: &str) -> Oid {
    fs::write(repo.workdir().unwrap().join(name), content).unwrap();
    let mut index = repo.index().unwrap();
    index.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let s = sig();
    repo.commit(Some("HEAD"), &s, &s, name, &tree, &parents)
        .unwrap()
}

fn repo_with_commit(head: &str) -> (TempDir, Repository, String) {
    let dir = TempDir::new().unwrap();
    let repo = init(dir.path(), head);
    let oid = commit(&repo, "README.md", "hello\n");
    (dir, repo, oid.to_string())
}

/// Every path `git status` lists in `repo` (untracked included), with its flags; shared by
/// the git modules' tests.
pub(crate) fn statuses(repo: &Repository) -> Vec<(String, Status)> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true);
    let st = repo.statuses(Some(&mut opts)).unwrap();
    st.iter()
        .map(|e| (e.path().unwrap().to_owned(), e.status()))
        .collect()
}

/// "ok" or the error variant's name, with its message.
fn kind<T>(r: Result<T, GitError>) -> (&'static str, String) {
    match r {
        Ok(_) => ("ok", String::new()),
        Err(e @ GitError::NotARepository(_)) => ("NotARepository", e.to_string()),
        Err(e @ GitError::NoDefaultBranch(_)) => ("NoDefaultBranch", e.to_string()),
        Err(e @ GitError::Conflict(_)) => ("Conflict", e.to_string()),
        Err(e @ GitError::Other(_)) => ("Other", e.to_string()),
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn inspect_normal_repo_with_origin() {
    let (dir, repo, oid) = repo_with_commit("main");
    repo.remote("aaa", "https://example.com/aaa.git").unwrap();
    repo.remote("origin", "https://example.com/o.git").unwrap();
    let facts = inspect_repo(dir.path()).unwrap();
    let canon = fs::canonicalize(dir.path()).unwrap();
    assert_eq!(facts.repo_path, canon.to_str().unwrap());
    assert_eq!(facts.default_branch, "main");
    assert_eq!(facts.remote, "https://example.com/o.git");
    assert_eq!(facts.head_commit, oid);
    assert_eq!(facts.head_commit.len(), 40);
}

#[test]
fn inspect_trunk_and_remote_fallbacks() {
    let (dir, repo, oid) = repo_with_commit("trunk");
    let facts = inspect_repo(dir.path()).unwrap();
    assert_eq!((&*facts.default_branch, &*facts.remote), ("trunk", ""));
    assert_eq!(facts.head_commit, oid);
    repo.remote("upstream", "git@example.com:up.git").unwrap();
    assert_eq!(
        inspect_repo(dir.path()).unwrap().remote,
        "git@example.com:up.git"
    );
}

#[test]
fn inspect_detached_head() {
    let (dir, repo, first) = repo_with_commit("main");
    let second = commit(&repo, "b.txt", "b\n").to_string();
    let first = Oid::from_str(&first).unwrap();
    repo.set_head_detached(first).unwrap();
    let facts = inspect_repo(dir.path()).unwrap();
    assert_eq!(
        (&*facts.default_branch, facts.head_commit),
        ("main", second)
    );
    // origin/HEAD names a branch that exists locally: it wins over "main".
    repo.branch("dev", &repo.find_commit(first).unwrap(), false)
        .unwrap();
    repo.reference("refs/remotes/origin/dev", first, false, "t")
        .unwrap();
    let (origin_head, origin_dev) = ("refs/remotes/origin/HEAD", "refs/remotes/origin/dev");
    repo.reference_symbolic(origin_head, origin_dev, false, "t")
        .unwrap();
    assert_eq!(inspect_repo(dir.path()).unwrap().default_branch, "dev");
    // No origin/HEAD, no main: master; none of them: NoDefaultBranch.
    repo.find_reference(origin_head).unwrap().delete().unwrap();
    let rename = |from: &str, to: &str| {
        let mut b = repo.find_branch(from, BranchType::Local).unwrap();
        b.rename(to, false).unwrap();
    };
    rename("main", "master");
    assert_eq!(inspect_repo(dir.path()).unwrap().default_branch, "master");
    rename("master", "other");
    assert_eq!(kind(inspect_repo(dir.path())).0, "NoDefaultBranch");
}

#[test]
fn inspect_empty_repo() {
    let dir = TempDir::new().unwrap();
    init(dir.path(), "main");
    let (k, m) = kind(inspect_repo(dir.path()));
    assert_eq!(k, "NoDefaultBranch");
    assert!(m.contains("no commits yet"), "{m}");
}

#[test]
fn inspect_refuses_non_repositories() {
    let plain = TempDir::new().unwrap();
    let (dir, _repo, _) = repo_with_commit("main");
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let top = dir.path();
    let (git, file, missing) = (top.join(".git"), top.join("README.md"), top.join("nope"));
    for p in [plain.path(), &sub, &git, &file, &missing, Path::new("rel")] {
        let (k, m) = kind(inspect_repo(p));
        assert_eq!(k, "NotARepository", "{}", p.display());
        assert!(m.contains(&p.display().to_string()), "{m}");
    }
}

#[test]
fn inspect_bare_repo() {
    let dir = TempDir::new().unwrap();
    let mut opts = RepositoryInitOptions::new();
    opts.bare(true).initial_head("main");
    let repo = Repository::init_opts(dir.path(), &opts).unwrap();
    let mut tb = repo.treebuilder(None).unwrap();
    tb.insert("f.txt", repo.blob(b"bare\n").unwrap(), 0o100_644)
        .unwrap();
    let tree = repo.find_tree(tb.write().unwrap()).unwrap();
    let s = sig();
    let oid = repo
        .commit(Some("HEAD"), &s, &s, "m", &tree, &[])
        .unwrap()
        .to_string();
    let facts = inspect_repo(dir.path()).unwrap();
    let canon = fs::canonicalize(dir.path()).unwrap();
    assert_eq!(facts.repo_path, canon.to_str().unwrap());
    assert_eq!(
        (&*facts.default_branch, &*facts.head_commit),
        ("main", &*oid)
    );
    // A worktree can be made from a bare repository too.
    let wt = TempDir::new().unwrap();
    let wt_path = wt.path().join("w");
    assert_eq!(
        ensure_worktree(dir.path(), "agent", &oid, &wt_path, "w").unwrap(),
        oid
    );
    assert_eq!(read(&wt_path.join("f.txt")), "bare\n");
}

#[test]
fn branch_tip_reads_local_branches() {
    let (dir, repo, oid) = repo_with_commit("main");
    assert_eq!(branch_tip(dir.path(), "main").unwrap(), oid);
    let second = commit(&repo, "x", "x").to_string();
    assert_eq!(branch_tip(dir.path(), "main").unwrap(), second);
    assert_eq!(kind(branch_tip(dir.path(), "nope")).0, "Other");
    assert_eq!(kind(branch_tip(dir.path(), "a..b")).0, "Other");
    assert_eq!(
        kind(branch_tip(&dir.path().join(".git"), "main")).0,
        "NotARepository"
    );
}

#[test]
fn ensure_worktree_creates_and_is_idempotent() {
    let (dir, repo, base) = repo_with_commit("main");
    let place = TempDir::new().unwrap();
    let wt_path = place.path().join("deep/nested/w1");
    let ensure = |b: &str| ensure_worktree(dir.path(), "byre/s1", b, &wt_path, "w1").unwrap();
    assert_eq!(ensure(&base), base);
    assert_eq!(read(&wt_path.join("README.md")), "hello\n");
    assert_eq!(branch_tip(dir.path(), "byre/s1").unwrap(), base);
    let wrepo = Repository::open(&wt_path).unwrap();
    assert_eq!(head_branch(&wrepo).as_deref(), Some("refs/heads/byre/s1"));
    assert!(statuses(&wrepo).is_empty());
    // Again: same answer, nothing changes.
    assert_eq!(ensure(&base), base);
    // The branch advanced in the worktree: it stays there, even with a new base.
    let advanced = commit(&wrepo, "agent.txt", "work\n").to_string();
    let new_main = commit(&repo, "main.txt", "m\n").to_string();
    assert_eq!(ensure(&new_main), advanced);
    assert_eq!(branch_tip(dir.path(), "byre/s1").unwrap(), advanced);
    assert_eq!(read(&wt_path.join("agent.txt")), "work\n");
    assert_eq!(repo.worktrees().unwrap().len(), 1);
}

#[test]
fn ensure_worktree_recovers_from_partial_states() {
    let (dir, repo, base) = repo_with_commit("main");
    let place = TempDir::new().unwrap();
    let wt_path = place.path().join("w2");
    let ensure = || ensure_worktree(dir.path(), "s2", &base, &wt_path, "w2").unwrap();
    // Crash after the branch was created, before the worktree; an empty directory is left.
    let c = repo.find_commit(Oid::from_str(&base).unwrap()).unwrap();
    repo.branch("s2", &c, false).unwrap();
    fs::create_dir(&wt_path).unwrap();
    assert_eq!(ensure(), base);
    // Worktree directory removed by hand while still registered.
    fs::remove_dir_all(&wt_path).unwrap();
    assert_eq!(ensure(), base);
    assert_eq!(read(&wt_path.join("README.md")), "hello\n");
    // Checkout interrupted before the index was written.
    let wrepo = Repository::open(&wt_path).unwrap();
    fs::remove_file(wrepo.path().join("index")).unwrap();
    fs::remove_file(wt_path.join("README.md")).unwrap();
    assert_eq!(ensure(), base);
    assert_eq!(read(&wt_path.join("README.md")), "hello\n");
    assert!(statuses(&Repository::open(&wt_path).unwrap()).is_empty());
    assert_eq!(repo.worktrees().unwrap().len(), 1);
}

#[test]
fn ensure_worktree_leaves_main_checkout_alone() {
    let (dir, repo, base) = repo_with_commit("main");
    commit(&repo, "staged.txt", "s\n");
    let top = dir.path();
    fs::write(top.join("README.md"), "uncommitted edit\n").unwrap();
    fs::write(top.join("staged.txt"), "staged edit\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    fs::write(top.join("untracked.txt"), "u\n").unwrap();
    let snapshot = |repo: &Repository| {
        let head = repo.head().unwrap().target().unwrap();
        let files = ["HEAD", "index"].map(|f| fs::read(repo.path().join(f)).unwrap());
        (head, files, read(&top.join("README.md")), statuses(repo))
    };
    let before = snapshot(&repo);
    assert_eq!(before.3.len(), 3);

    let place = TempDir::new().unwrap();
    let wt_path = place.path().join("w");
    ensure_worktree(top, "agent", &base, &wt_path, "w").unwrap();
    fs::remove_dir_all(&wt_path).unwrap();
    ensure_worktree(top, "agent", &base, &wt_path, "w").unwrap();
    assert_eq!(read(&wt_path.join("README.md")), "hello\n");
    assert!(before == snapshot(&Repository::open(top).unwrap()));
    assert_eq!(before.2, "uncommitted edit\n");
}

#[test]
fn two_worktrees_side_by_side() {
    let (dir, repo, base) = repo_with_commit("main");
    let place = TempDir::new().unwrap();
    let (a, b) = (place.path().join("a"), place.path().join("b"));
    ensure_worktree(dir.path(), "byre/a", &base, &a, "a").unwrap();
    ensure_worktree(dir.path(), "byre/b", &base, &b, "b").unwrap();
    fs::write(a.join("README.md"), "changed in a\n").unwrap();
    assert_eq!(read(&b.join("README.md")), "hello\n");
    let names = repo.worktrees().unwrap();
    let mut names: Vec<&str> = names.iter().flatten().flatten().collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b"]);
    let head = head_branch(&Repository::open(&b).unwrap());
    assert_eq!(head.as_deref(), Some("refs/heads/byre/b"));
}

#[test]
fn ensure_worktree_conflicts_and_bad_input() {
    let (dir, _repo, base) = repo_with_commit("main");
    let place = TempDir::new().unwrap();
    let p = |n: &str| place.path().join(n);
    let ens = |branch: &str, base: &str, path: &Path, name: &str| {
        kind(ensure_worktree(dir.path(), branch, base, path, name))
    };
    ensure_worktree(dir.path(), "x", &base, &p("x"), "x").unwrap();
    ensure_worktree(dir.path(), "s", &base, &p("s"), "s").unwrap();
    fs::remove_dir_all(p("s")).unwrap();
    fs::create_dir(p("junk")).unwrap();
    fs::write(p("junk").join("f"), "f").unwrap();
    let zeros = "0".repeat(40);
    let cases: [(&str, &str, &Path, &str, &str, &str); 10] = [
        // Checked out in the main checkout / in another worktree / in a missing one.
        (
            "main",
            &base,
            &p("m"),
            "m",
            "Conflict",
            "already checked out",
        ),
        ("x", &base, &p("y"), "y", "Conflict", "already checked out"),
        ("s", &base, &p("s2"), "s2", "Conflict", "git worktree prune"),
        // Same worktree name at another path; same worktree with another branch.
        ("x", &base, &p("x2"), "x", "Conflict", "already exists at"),
        ("z", &base, &p("x"), "x", "Conflict", "other than branch z"),
        ("j", &base, &p("junk"), "junk", "Conflict", "already exists"),
        ("ok", &zeros, &p("o1"), "o1", "Other", "not found"),
        ("ok", "nonsense", &p("o2"), "o2", "Other", "not found"),
        ("ok", &base, &p("o3"), "a/b", "Other", "worktree name"),
        ("bad name", &base, &p("o4"), "o4", "Other", "branch name"),
    ];
    for (branch, base, path, name, want, msg) in cases {
        let (k, m) = ens(branch, base, path, name);
        assert_eq!(k, want, "{branch} {name}: {m}");
        assert!(m.contains(msg), "{branch} {name}: {m}");
    }
    // Asked through a linked worktree: the main checkout still counts.
    let (k, m) = kind(ensure_worktree(&p("x"), "main", &base, &p("m2"), "m2"));
    let main = display_path(&fs::canonicalize(dir.path()).unwrap());
    assert_eq!(k, "Conflict");
    assert!(m.ends_with(&main), "{m}");
    assert!(!p("o1").exists() && !p("o4").exists() && !p("m").exists());
}

#[test]
fn branch_name_validity() {
    let good = [
        "main",
        "feature/x",
        "byre/s-1",
        "a.b",
        "v1.0",
        "x@y",
        "a_b",
        "ünï",
    ];
    for name in good {
        assert!(is_valid_branch_name(name), "{name}");
    }
    let bad = [
        "", "a..b", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "a\u{7}b", "-x", "/x",
        "x/", "x.lock", "x.", "a@{b", "@", "a//b", ".x", "a/.b", "HEAD", "a\tb",
    ];
    for name in bad {
        assert!(!is_valid_branch_name(name), "{name:?}");
    }
}
