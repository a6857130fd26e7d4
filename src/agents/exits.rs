//! Why an agent process ended, in words for the human reading its task
//! (`session.process_exited`'s `reason`).

use byre_projections::sessions::Vendor;

/// The vendor's CLI as people call it.
pub(super) fn vendor_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Claude => "Claude Code",
        Vendor::Codex => "Codex",
        Vendor::Codebolt => "The CodeBolt agent",
    }
}

/// A signal's name (`SIGTERM`), or its number.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

/// Why an agent process that byre itself stopped ended (its session completed: a review
/// ended, its task closed), for a human: never "from outside byre", even when it took a
/// SIGKILL after it did not exit on its closed stdin.
pub(super) fn stopped_by_byre(vendor: Vendor, code: Option<i32>, signal: Option<i32>) -> String {
    let who = vendor_name(vendor);
    match (code, signal) {
        (Some(c), _) => format!("{who} was stopped by byre (exit code {c})"),
        (None, Some(s)) => format!("{who} was stopped by byre ({})", signal_name(s)),
        _ => format!("{who} was stopped by byre"),
    }
}

/// Why byre stopped an idle agent process, for a human: how long it sat without a turn, and
/// that the next message resumes it.
pub(super) fn stopped_idle(vendor: Vendor, idle: std::time::Duration) -> String {
    let secs = idle.as_secs();
    let how_long = if secs >= 120 && secs.is_multiple_of(60) {
        format!("{} minutes", secs / 60)
    } else if secs == 1 {
        "1 second".to_owned()
    } else {
        format!("{secs} seconds")
    };
    format!(
        "{} was stopped by byre after {how_long} without a turn, to free its memory; the next message resumes the conversation",
        vendor_name(vendor)
    )
}

/// Why an agent process ended, for a human: what ended it, whether a turn was cut, and the
/// end of its stderr. A code above 128 is the shell convention for "ended by signal
/// code - 128", which is how Claude Code reports a SIGTERM it caught (143).
pub(super) fn exit_reason(
    vendor: Vendor,
    code: Option<i32>,
    signal: Option<i32>,
    turn_running: bool,
    stderr_tail: &str,
) -> String {
    let who = vendor_name(vendor);
    let what = match (code, signal) {
        (Some(0), _) => format!("{who} exited on its own (exit code 0)"),
        (Some(c), _) if c > 128 && c < 160 => format!(
            "{who} was stopped by {} from outside byre (exit code {c})",
            signal_name(c - 128)
        ),
        (Some(c), _) => format!("{who} exited with code {c}"),
        (None, Some(s)) => format!("{who} was killed by {} from outside byre", signal_name(s)),
        _ => format!("{who} ended"),
    };
    let turn = if turn_running {
        " before finishing the turn"
    } else {
        ""
    };
    if stderr_tail.is_empty() {
        format!("{what}{turn}")
    } else {
        format!("{what}{turn}. Its last output on stderr: {stderr_tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reasons_say_what_ended_the_process_in_words() {
        let cases = [
            (
                (Vendor::Claude, Some(143), None, true, ""),
                "Claude Code was stopped by SIGTERM from outside byre (exit code 143) before finishing the turn",
            ),
            (
                (Vendor::Claude, Some(0), None, true, ""),
                "Claude Code exited on its own (exit code 0) before finishing the turn",
            ),
            (
                (Vendor::Codex, None, Some(9), false, ""),
                "Codex was killed by SIGKILL from outside byre",
            ),
            (
                (Vendor::Claude, Some(1), None, true, "Error: bad flag"),
                "Claude Code exited with code 1 before finishing the turn. Its last output on stderr: Error: bad flag",
            ),
            (
                (Vendor::Codex, Some(130), None, false, ""),
                "Codex was stopped by SIGINT from outside byre (exit code 130)",
            ),
        ];
        for ((vendor, code, signal, turn, tail), expected) in cases {
            assert_eq!(exit_reason(vendor, code, signal, turn, tail), expected);
        }
    }

    #[test]
    fn an_idle_stop_says_how_long_the_agent_sat_idle() {
        assert_eq!(
            stopped_idle(Vendor::Claude, std::time::Duration::from_secs(900)),
            "Claude Code was stopped by byre after 15 minutes without a turn, to free its memory; the next message resumes the conversation"
        );
        assert!(
            stopped_idle(Vendor::Codex, std::time::Duration::from_secs(90))
                .starts_with("Codex was stopped by byre after 90 seconds")
        );
    }

    #[test]
    fn a_process_byre_stopped_is_not_said_to_be_stopped_from_outside() {
        assert_eq!(
            stopped_by_byre(Vendor::Codex, None, Some(9)),
            "Codex was stopped by byre (SIGKILL)"
        );
        assert_eq!(
            stopped_by_byre(Vendor::Claude, Some(0), None),
            "Claude Code was stopped by byre (exit code 0)"
        );
    }
}
