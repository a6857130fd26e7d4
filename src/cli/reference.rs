//! The command-line reference of `docs/cli.md`, made from the clap definition itself, so the
//! page cannot drift from what `byre --help` prints: [`markdown`] renders every visible
//! subcommand with its options, defaults and environment variables, and the test below fails
//! when `docs/cli.md` holds anything else between its markers (`BYRE_BLESS=1` rewrites it).

use clap::CommandFactory;

use super::Cli;

/// Where the generated part of `docs/cli.md` starts.
pub const BEGIN: &str =
    "<!-- generated from the clap definition (src/cli/reference.rs): do not edit -->";
/// Where it ends.
pub const END: &str = "<!-- end of the generated reference -->";

/// The reference of every visible subcommand, as Markdown.
pub fn markdown() -> String {
    let cli = Cli::command();
    let mut out = String::new();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.push_str(&format!("### `byre {}`\n\n", sub.get_name()));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            out.push_str(&format!("{}\n\n", one_line(&about.to_string())));
        }
        let args: Vec<_> = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_long().is_some())
            .collect();
        if !args.is_empty() {
            out.push_str("| option | default | environment | |\n|---|---|---|---|\n");
        }
        for arg in args {
            let long = arg.get_long().unwrap_or_default();
            let takes_value = arg.get_num_args().is_none_or(|n| n.takes_values())
                && !matches!(
                    arg.get_action(),
                    clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
                );
            let value = if takes_value {
                let names = arg
                    .get_value_names()
                    .map(|v| {
                        v.iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_else(|| long.to_uppercase().replace('-', "_"));
                let choices: Vec<String> = arg
                    .get_possible_values()
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| p.get_name().to_owned())
                    .collect();
                if choices.is_empty() {
                    format!(" {names}")
                } else {
                    format!(" {}", choices.join("\\|"))
                }
            } else {
                String::new()
            };
            let repeat = if matches!(arg.get_action(), clap::ArgAction::Append) {
                " (repeatable)"
            } else {
                ""
            };
            let default: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| format!("`{}`", v.to_string_lossy()))
                .collect();
            let env = arg
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| one_line(&h.to_string()))
                .unwrap_or_default();
            out.push_str(&format!(
                "| `--{long}{value}`{repeat} | {} | {env} | {} |\n",
                default.join(", "),
                help.replace('|', "\\|")
            ));
        }
        if let Some(after) = sub.get_after_help() {
            out.push_str(&format!(
                "\n```text\n{}\n```\n",
                after.to_string().trim_end()
            ));
        }
        out.push('\n');
    }
    out.trim_end().to_owned() + "\n"
}

/// `text` with its line breaks as spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/cli.md` holds, between its markers, exactly what [`markdown`] renders.
    #[test]
    fn docs_cli_md_is_the_reference_clap_renders() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md");
        let page = std::fs::read_to_string(path).expect("docs/cli.md");
        let start = page.find(BEGIN).expect("docs/cli.md has the start marker") + BEGIN.len();
        let end = page.find(END).expect("docs/cli.md has the end marker");
        let want = format!("\n\n{}\n", markdown());
        if std::env::var_os("BYRE_BLESS").is_some() {
            let page = format!("{}{want}{}", &page[..start], &page[end..]);
            std::fs::write(path, page).expect("rewrite docs/cli.md");
            return;
        }
        assert!(
            page[start..end] == want,
            "docs/cli.md drifted from the clap definition; run \
             `BYRE_BLESS=1 cargo test --lib cli::reference` and commit it"
        );
    }

    #[test]
    fn every_visible_subcommand_and_option_is_in_the_reference() {
        let text = markdown();
        for sub in Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            assert!(text.contains(&format!("### `byre {}`", sub.get_name())));
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    assert!(text.contains(&format!("`--{long}")), "--{long}");
                }
            }
        }
        assert!(
            !text.contains("### `byre mcp`"),
            "the internal command is hidden"
        );
    }
}
