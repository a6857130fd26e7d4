//! The unpacker against hostile archives (a table, each case with its own name) and a round
//! trip of pack and unpack.

use std::fs;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use tar::EntryType;

use super::{pack, unpack, unpack_to, ArchiveError};

/// One raw entry: its name and link target as bytes, so paths the tar crate's builder would
/// refuse (`..`, absolute) can be written.
struct Raw {
    name: &'static str,
    kind: EntryType,
    link: &'static str,
    data: &'static [u8],
}

fn file(name: &'static str, data: &'static [u8]) -> Raw {
    Raw {
        name,
        kind: EntryType::Regular,
        link: "",
        data,
    }
}

fn link(name: &'static str, kind: EntryType, target: &'static str) -> Raw {
    Raw {
        name,
        kind,
        link: target,
        data: b"",
    }
}

fn dir(name: &'static str) -> Raw {
    Raw {
        name,
        kind: EntryType::Directory,
        link: "",
        data: b"",
    }
}

/// A gzipped tar of `entries`, written header by header.
fn archive(entries: &[Raw]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for e in entries {
        let mut header = tar::Header::new_gnu();
        let gnu = header.as_gnu_mut().expect("a GNU header");
        gnu.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
        gnu.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
        header.set_entry_type(e.kind);
        header.set_mode(if e.kind == EntryType::Directory {
            0o755
        } else {
            0o644
        });
        header.set_size(e.data.len() as u64);
        header.set_cksum();
        builder.append(&header, e.data).expect("append");
    }
    builder
        .into_inner()
        .and_then(|gz| gz.finish())
        .expect("finish")
}

#[test]
fn unpack_refuses_archives_that_leave_their_destination() {
    let cases: Vec<(&str, Vec<Raw>)> = vec![
        ("a `..` entry", vec![file("../escaped.txt", b"x")]),
        (
            "a `..` inside the top entry",
            vec![dir("top/"), file("top/../../escaped.txt", b"x")],
        ),
        ("an absolute entry", vec![file("/tmp/escaped.txt", b"x")]),
        (
            "a symlink to an absolute path",
            vec![dir("top/"), link("top/l", EntryType::Symlink, "/etc")],
        ),
        (
            "a symlink up and out",
            vec![dir("top/"), link("top/l", EntryType::Symlink, "../..")],
        ),
        (
            "a symlink with `..` that would stay inside lexically",
            vec![dir("top/"), link("top/a/l", EntryType::Symlink, "../b")],
        ),
        (
            "a hard link",
            vec![dir("top/"), link("top/h", EntryType::Link, "/etc/passwd")],
        ),
        (
            "a FIFO",
            vec![dir("top/"), link("top/f", EntryType::Fifo, "")],
        ),
        (
            "two top-level entries",
            vec![file("one.txt", b"1"), file("two.txt", b"2")],
        ),
        ("an empty archive", vec![]),
    ];
    for (what, entries) in cases {
        let root = tempfile::tempdir().unwrap();
        let staging = root.path().join("staging");
        fs::create_dir(&staging).unwrap();
        let bytes = archive(&entries);
        let err = unpack(&bytes[..], &staging).expect_err(what);
        assert!(matches!(err, ArchiveError::Refused(_)), "{what}: {err:?}");
        assert!(
            !root.path().join("escaped.txt").exists() && !Path::new("/tmp/escaped.txt").exists(),
            "{what}: something was written outside"
        );
    }
}

#[test]
fn an_archive_rooted_at_dot_is_refused_as_such_not_as_leaving() {
    let root = tempfile::tempdir().unwrap();
    let bytes = archive(&[dir("./"), file("./a.txt", b"a")]);
    let err = unpack(&bytes[..], root.path()).expect_err("rooted at `.`");
    let ArchiveError::Refused(why) = err else {
        panic!("{err:?}")
    };
    assert!(why.contains("under its own name"), "{why}");
}

#[test]
fn unpack_to_leaves_the_destination_as_it_was_when_refused() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("dest.txt");
    fs::write(&dest, "before").unwrap();
    let bytes = archive(&[dir("top/"), file("top/ok.txt", b"ok"), file("../x", b"x")]);
    assert!(matches!(
        unpack_to(&bytes[..], &dest),
        Err(ArchiveError::Refused(_))
    ));
    assert_eq!(fs::read_to_string(&dest).unwrap(), "before");
    let left: Vec<_> = fs::read_dir(root.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "the staging directory is gone");
}

#[test]
fn unpack_refuses_what_is_not_a_gzipped_tar() {
    let root = tempfile::tempdir().unwrap();
    let err = unpack(&b"plain text"[..], root.path()).expect_err("not gzip");
    assert!(matches!(err, ArchiveError::Io(_)), "{err:?}");
}

#[test]
fn a_directory_round_trips_under_a_new_name_with_its_inside_links() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::create_dir_all(src.join(".git")).unwrap();
    fs::write(src.join("sub/a.txt"), "alpha").unwrap();
    fs::write(src.join(".git/HEAD"), "ref").unwrap();
    std::os::unix::fs::symlink("sub/a.txt", src.join("link")).unwrap();
    let mut bytes = Vec::new();
    pack(&src, &mut bytes, true).unwrap();

    let dest = root.path().join("out/copy");
    fs::create_dir_all(&dest).unwrap();
    fs::write(dest.join("old.txt"), "replaced").unwrap();
    unpack_to(&bytes[..], &dest).unwrap();
    assert_eq!(fs::read_to_string(dest.join("sub/a.txt")).unwrap(), "alpha");
    assert_eq!(fs::read_to_string(dest.join("link")).unwrap(), "alpha");
    assert!(!dest.join(".git").exists(), ".git is left out");
    assert!(!dest.join("old.txt").exists(), "what was there is replaced");
}

#[test]
fn a_single_file_round_trips() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("notes.md");
    fs::write(&src, "# notes\n").unwrap();
    let mut bytes = Vec::new();
    pack(&src, &mut bytes, false).unwrap();
    let dest = root.path().join("a/b/renamed.md");
    unpack_to(&bytes[..], &dest).unwrap();
    assert_eq!(fs::read_to_string(dest).unwrap(), "# notes\n");
}
