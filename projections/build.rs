//! Embeds `BYRE_PROJECTIONS_FINGERPRINT`: a hash of every file under `src/` (paths and
//! contents, in path order), so that a projection snapshot records which fold made it and a
//! build whose fold may differ does not use it (`persist::FINGERPRINT`). Reads only this
//! crate's own sources; nothing else (no time, no host) goes in.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
    let src = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default()).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    files.sort();
    // FNV-1a, 64 bits: stable across Rust releases (std's hashers are not promised to be).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for file in files {
        let rel = file.strip_prefix(&src).unwrap_or(&file);
        eat(rel.to_string_lossy().as_bytes());
        eat(&[0]);
        eat(&std::fs::read(&file).unwrap_or_default());
        eat(&[0]);
    }
    println!("cargo:rustc-env=BYRE_PROJECTIONS_FINGERPRINT={hash:016x}");
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
