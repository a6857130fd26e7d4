use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;

/// A root directory (the handle's) and, beside it, `outside/secret.txt`.
fn fixture() -> (tempfile::TempDir, Dir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("d/secret.txt"), "DECOY").unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
    let dir = Dir::open(&root).unwrap();
    (tmp, dir, outside)
}

#[test]
fn no_link_is_followed_out_and_refuse_follows_none_at_all() {
    let (tmp, dir, outside) = fixture();
    let root = tmp.path().join("root");
    symlink(&outside, root.join("out")).unwrap();
    symlink("d", root.join("in")).unwrap();
    symlink("../outside", root.join("up")).unwrap();
    for rel in [
        "out/secret.txt",
        "up/secret.txt",
        "../outside/secret.txt",
        "/etc/passwd",
    ] {
        for links in [Links::Refuse, Links::Beneath] {
            let r = dir.read(Path::new(rel), links, 100);
            assert!(r.is_err(), "{rel} {links:?}: {r:?}");
        }
    }
    assert!(is_refused(
        &dir.read(Path::new("out/secret.txt"), Links::Beneath, 100)
            .unwrap_err()
    ));
    assert_eq!(
        dir.read(Path::new("in/secret.txt"), Links::Beneath, 100)
            .unwrap(),
        b"DECOY",
        "a link that stays beneath is followed in Beneath mode"
    );
    assert!(is_refused(
        &dir.read(Path::new("in/secret.txt"), Links::Refuse, 100)
            .unwrap_err()
    ));
    assert_eq!(
        dir.read(Path::new("d/secret.txt"), Links::Refuse, 100)
            .unwrap(),
        b"DECOY"
    );
    let too_big = dir.read(Path::new("d/secret.txt"), Links::Refuse, 3);
    assert_eq!(too_big.unwrap_err().kind(), io::ErrorKind::FileTooLarge);
}

#[test]
fn a_write_replaces_a_planted_symlink_and_never_its_target() {
    let (tmp, dir, outside) = fixture();
    let root = tmp.path().join("root");
    symlink(outside.join("secret.txt"), root.join("config.toml")).unwrap();
    dir.write(Path::new("config.toml"), b"byre's", 0o600)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "SECRET"
    );
    assert!(!std::fs::symlink_metadata(root.join("config.toml"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(root.join("config.toml")).unwrap(),
        "byre's"
    );
    // Through a link on the way: refused, nothing written outside.
    symlink(&outside, root.join("out")).unwrap();
    assert!(dir.write(Path::new("out/new.txt"), b"x", 0o600).is_err());
    assert!(!outside.join("new.txt").exists());
    // An exclusive create refuses a name that is there, a symlink too.
    assert_eq!(
        dir.create_new(Path::new("config.toml"), 0o600)
            .unwrap_err()
            .kind(),
        io::ErrorKind::AlreadyExists
    );
    symlink(outside.join("nothing-yet"), root.join("dangling")).unwrap();
    assert!(dir.create_new(Path::new("dangling"), 0o600).is_err());
    assert!(!outside.join("nothing-yet").exists());
    // No temporary file is left behind.
    let names: Vec<_> = dir
        .list()
        .unwrap()
        .into_iter()
        .filter(|e| e.name.to_string_lossy().contains(".byre-"))
        .collect();
    assert_eq!(names, []);
}

#[test]
fn remove_dir_all_removes_links_and_never_what_they_point_to() {
    let (tmp, dir, outside) = fixture();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("d/sub/deeper")).unwrap();
    symlink(&outside, root.join("d/sub/out")).unwrap();
    symlink(&outside, root.join("link")).unwrap();
    dir.remove_dir_all(Path::new("d")).unwrap();
    assert!(!root.join("d").exists());
    assert!(outside.join("secret.txt").exists());
    dir.remove_dir_all(Path::new("link")).unwrap();
    assert!(std::fs::symlink_metadata(root.join("link")).is_err());
    assert!(outside.join("secret.txt").exists());
    assert!(dir.remove_dir_all(Path::new("link/x")).is_err());
}

#[test]
fn a_fifo_is_refused_without_blocking_and_create_dir_all_never_goes_through_a_link() {
    let (tmp, dir, outside) = fixture();
    let root = tmp.path().join("root");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        root.join("pipe"),
        Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let r = dir.read(Path::new("pipe"), Links::Refuse, 10);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    symlink(&outside, root.join("out")).unwrap();
    assert!(dir.create_dir_all(Path::new("out/made")).is_err());
    assert!(!outside.join("made").exists());
    let made = dir.create_dir_all(Path::new("a/b/c")).unwrap();
    assert_eq!(made.path(), root.join("a/b/c"));
    assert!(root.join("a/b/c").is_dir());
    let mut names: Vec<_> = dir
        .entries(Path::new(""), Links::Refuse)
        .unwrap()
        .into_iter()
        .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("a".to_owned(), Kind::Dir),
            ("d".into(), Kind::Dir),
            ("out".into(), Kind::Symlink),
            ("pipe".into(), Kind::Other)
        ]
    );
}

/// The race of finding C1: a directory exchanged with a symlink to the outside, over and over,
/// while reads and writes go through the handle. None may reach the outside.
#[test]
fn a_directory_swapped_for_a_link_meanwhile_never_leads_out() {
    let (tmp, dir, outside) = fixture();
    let root = tmp.path().join("root");
    symlink(&outside, root.join("l")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let root = root.clone();
        std::thread::spawn(move || {
            let root = Dir::open(&root).unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    root.fd(),
                    "d",
                    root.fd(),
                    "l",
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                n += 1;
            }
            n
        })
    };
    let (mut n_read, mut n_written) = (0, 0);
    for i in 0..20_000 {
        for links in [Links::Refuse, Links::Beneath] {
            if let Ok(c) = dir.read(Path::new("d/secret.txt"), links, 100) {
                assert_eq!(c, b"DECOY");
                n_read += 1;
            }
        }
        if dir
            .write(Path::new(&format!("d/w{}", i % 10)), b"w", 0o600)
            .is_ok()
        {
            n_written += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let n_swaps = swapper.join().unwrap();
    assert!(n_swaps > 1000, "the swapper ran: {n_swaps}");
    assert!(n_read > 0 && n_written > 0, "{n_read} {n_written}");
    let mut names: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [OsString::from("secret.txt")],
        "nothing written outside"
    );
}
