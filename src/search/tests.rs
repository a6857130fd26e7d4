use super::*;

fn entry(seq: u64, kind: EntryKind, task_id: &str, owner: &str, text: &str) -> Entry {
    Entry {
        seq,
        kind,
        project_id: "p1".into(),
        task_id: task_id.into(),
        agent_session_id: String::new(),
        owner: owner.into(),
        text: text.into(),
    }
}

fn search<'a>(text: &'a str, login: &'a str) -> Search<'a> {
    Search {
        text,
        login,
        project_id: None,
        limit: 10,
    }
}

#[test]
fn a_word_is_found_in_its_group_with_the_word_marked_in_the_snippet() {
    let dir = tempfile::tempdir().unwrap();
    let opened = Index::open(&dir.path().join("search"), 100).unwrap();
    assert_eq!(opened.indexed_seq, 0);
    let index = opened.index;
    index
        .add(
            &[
                entry(1, EntryKind::Task, "t1", "", "Fix the login page"),
                entry(
                    2,
                    EntryKind::AgentText,
                    "t1",
                    "",
                    "I renamed the <b>walrus</b> helper.",
                ),
            ],
            2,
        )
        .unwrap();
    let found = index.search(&search("walrus", "ada")).unwrap();
    assert!(found.tasks.is_empty() && found.projects.is_empty());
    assert_eq!(found.items.len(), 1);
    let hit = &found.items[0];
    assert_eq!(
        (hit.seq, hit.kind, hit.task_id.as_str()),
        (2, EntryKind::AgentText, "t1")
    );
    let marked: Vec<&str> = hit
        .snippet
        .iter()
        .filter(|p| p.hit)
        .map(|p| p.text.as_str())
        .collect();
    assert_eq!(marked, ["walrus"]);
    let whole: String = hit.snippet.iter().map(|p| p.text.as_str()).collect();
    assert!(whole.contains("<b>walrus</b>"), "{whole}");
    let found = index.search(&search("logins", "ada")).unwrap();
    assert_eq!(found.tasks.len(), 1, "stemmed: logins finds login");
}

#[test]
fn an_owned_entry_is_found_only_by_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path(), 100).unwrap().index;
    index
        .add(
            &[entry(1, EntryKind::UserMessage, "", "ada", "secret plan")],
            1,
        )
        .unwrap();
    assert_eq!(index.search(&search("plan", "ada")).unwrap().items.len(), 1);
    assert!(index
        .search(&search("plan", "bob"))
        .unwrap()
        .items
        .is_empty());
}

#[test]
fn a_reopened_index_resumes_from_its_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = Index::open(dir.path(), 100).unwrap().index;
        index
            .add(&[entry(7, EntryKind::Task, "t1", "", "kept")], 9)
            .unwrap();
    }
    let opened = Index::open(dir.path(), 100).unwrap();
    assert_eq!((opened.indexed_seq, opened.rebuilt), (9, None));
    assert_eq!(
        opened
            .index
            .search(&search("kept", "ada"))
            .unwrap()
            .tasks
            .len(),
        1
    );
}

#[test]
fn bad_queries_are_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path(), 100).unwrap().index;
    let long = "a".repeat(MAX_QUERY_BYTES + 1);
    for (q, says) in [
        ("  ", "empty"),
        (long.as_str(), "bytes"),
        ("text:(", "not a query"),
    ] {
        match index.search(&search(q, "ada")) {
            Err(Error::BadQuery(m)) => assert!(m.contains(says), "{q:?}: {m}"),
            other => panic!("{q:?}: {other:?}"),
        }
    }
}

#[test]
fn an_index_past_the_log_s_head_is_made_anew() {
    let dir = tempfile::tempdir().unwrap();
    Index::open(dir.path(), 100)
        .unwrap()
        .index
        .add(&[entry(7, EntryKind::Task, "t1", "", "gone")], 50)
        .unwrap();
    let opened = Index::open(dir.path(), 10).unwrap();
    assert_eq!(opened.indexed_seq, 0);
    assert!(opened.rebuilt.unwrap().contains("past the log"));
    assert!(opened
        .index
        .search(&search("gone", "ada"))
        .unwrap()
        .tasks
        .is_empty());
}
