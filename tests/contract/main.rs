//! The contract against the server, by a tool that did not write either: schemathesis, with
//! every check, through `tests/contract/schemathesis.sh` (docs/contract.md). A test target of
//! its own so `cargo test -p byre --test contract` runs just it, and so README's test command
//! (`cargo test --workspace --locked`) runs it in CI.

use std::io::Write;
use std::process::Command;

/// Whether `python3` can make a venv with pip in it (Debian splits `venv` and `ensurepip` into
/// `python3-venv`): the script needs both to install schemathesis.
fn python_with_venv() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
fn schemathesis_with_all_checks_finds_nothing_the_contract_does_not_say() {
    if !python_with_venv() {
        // The one reason to skip: .ci/run installs python3 and python3-venv, so CI never does.
        // Written past the test harness's capture, so the note shows in a passing run.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED schemathesis_with_all_checks_finds_nothing_the_contract_does_not_say: \
             python3 with venv and ensurepip (pip) is not available (Debian: apt-get install \
             python3-venv)"
        );
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/contract/schemathesis.sh"
    );
    let out = Command::new("bash")
        .arg(script)
        .env("BYRE_BIN", env!("CARGO_BIN_EXE_byre"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    // st's report is long; it is shown only when the run fails.
    assert!(
        out.status.success(),
        "{script} failed ({}): schemathesis found the contract and the server disagreeing:\n\
         {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}
