//! The layering check: no adapter (`src/http`, `src/mcp`, `src/codebolt`) imports another;
//! they meet in [`crate::app`], and only `startup.rs` wires them together. The layers the
//! adapters call, the application layer (`src/app`) and the reactors (`src/reactors`), import
//! no adapter at all.

/// The adapters: each a directory of `src/` and the path it is named by in code.
const ADAPTERS: [&str; 3] = ["http", "mcp", "codebolt"];

/// Directories of `src/` below the adapters: they may import none of them.
const INNER: [&str; 2] = ["app", "reactors"];

/// Every use of adapter `other` in `code` (comments skipped), as the offending lines.
fn uses_of(code: &str, other: &str) -> Vec<String> {
    let path = format!("crate::{other}");
    code.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            l.match_indices(&path).any(|(i, _)| {
                let next = l[i + path.len()..].chars().next();
                !matches!(next, Some(c) if c.is_alphanumeric() || c == '_')
            }) || (l.contains("crate::{")
                && l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == other))
        })
        .map(str::to_owned)
        .collect()
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn adapters_import_no_other_adapter() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for adapter in ADAPTERS {
        let mut files = Vec::new();
        rust_files(&src.join(adapter), &mut files);
        assert!(!files.is_empty(), "no sources under src/{adapter}");
        for file in files {
            let code = std::fs::read_to_string(&file).expect("read a source file");
            for other in ADAPTERS.iter().filter(|o| **o != adapter) {
                for line in uses_of(&code, other) {
                    offences.push(format!("{}: {line}", file.display()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "adapters must call crate::app, not each other:\n{}",
        offences.join("\n")
    );
}

#[test]
fn app_and_reactors_import_no_adapter() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for inner in INNER {
        let mut files = Vec::new();
        rust_files(&src.join(inner), &mut files);
        assert!(!files.is_empty(), "no sources under src/{inner}");
        // This file names the paths it looks for.
        files.retain(|f| !f.ends_with("app/layering.rs"));
        for file in files {
            let code = std::fs::read_to_string(&file).expect("read a source file");
            for adapter in ADAPTERS {
                for line in uses_of(&code, adapter) {
                    offences.push(format!("{}: {line}", file.display()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "src/app and src/reactors are called by the adapters and import none of them:\n{}",
        offences.join("\n")
    );
}

#[test]
fn only_startup_uses_http_outside_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let offences: Vec<String> = files
        .iter()
        .filter(|f| {
            // This file names the paths it looks for.
            !f.starts_with(src.join("http"))
                && !f.ends_with("startup.rs")
                && !f.ends_with("app/layering.rs")
        })
        .flat_map(|f| {
            let code = std::fs::read_to_string(f).expect("read a source file");
            uses_of(&code, "http")
                .into_iter()
                .map(move |l| format!("{}: {l}", f.display()))
        })
        .collect();
    assert!(
        offences.is_empty(),
        "only startup.rs may use the HTTP adapter:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_check_sees_an_import() {
    // Samples are built, so this file holds no adapter path itself.
    let import = format!("use crate::{}::{{ApiError, App}};", "http");
    assert_eq!(uses_of(&import, "http").len(), 1);
    assert_eq!(
        uses_of("    let x = byre_agents::codebolt::Hub::default();", "codebolt").len(),
        1
    );
    assert_eq!(uses_of("use crate::{api, mcp};", "mcp").len(), 1);
    let doc = format!("//! see `crate::{}::routes`", "http");
    assert!(uses_of(&doc, "http").is_empty());
    let longer = format!("use crate::{}x::Thing;", "http");
    assert!(uses_of(&longer, "http").is_empty());
}
