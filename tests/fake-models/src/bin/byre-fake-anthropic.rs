//! `byre-fake-anthropic --script FILE [--port N] [--openai]`: runs the fake Messages API
//! (or, with `--openai`, the fake Responses API) on `127.0.0.1` for exploring by hand,
//! prints its URL on stdout, logs each request on stderr (`RUST_LOG` filters; default
//! `info`), and stops on Ctrl-C.
//!
//! ```text
//! $ byre-fake-anthropic --script fixtures/fake-model/a_text.json
//! http://127.0.0.1:41234
//! $ ANTHROPIC_BASE_URL=http://127.0.0.1:41234 ANTHROPIC_API_KEY=x IS_SANDBOX=1 claude -p …
//! $ byre-fake-anthropic --openai --script fixtures/fake-model/codex_a_text.json
//! http://127.0.0.1:41235
//! # CODEX_HOME/config.toml: [model_providers.x] base_url = "http://127.0.0.1:41235/v1" …
//! ```

use std::process::ExitCode;

use byre_fake_models::{FakeAnthropic, FakeOpenAi, Script};

const USAGE: &str = "usage: byre-fake-anthropic --script FILE [--port N] [--openai]";

/// The parsed command line.
struct Args {
    script: String,
    port: u16,
    /// `--openai`: the Responses API instead of the Messages API.
    openai: bool,
}

fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut script, mut port, mut openai) = (None, 0, false);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--script" => script = Some(argv.next().ok_or("--script needs a file")?),
            "--openai" => openai = true,
            "--port" => {
                let value = argv.next().ok_or("--port needs a number")?;
                port = value
                    .parse()
                    .map_err(|_| format!("--port: not a port number: {value}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        script: script.ok_or(USAGE)?,
        port,
        openai,
    })
}

/// The running fake, of either API.
enum Fake {
    Anthropic(FakeAnthropic),
    OpenAi(FakeOpenAi),
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let script = match Script::load(&args.script) {
        Ok(script) => script,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let started = if args.openai {
        FakeOpenAi::start_on_port(script, args.port)
            .await
            .map(|fake| (fake.url.clone(), Fake::OpenAi(fake)))
    } else {
        FakeAnthropic::start_on_port(script, args.port)
            .await
            .map(|fake| (fake.url.clone(), Fake::Anthropic(fake)))
    };
    let (url, fake) = match started {
        Ok(started) => started,
        Err(error) => {
            eprintln!("cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("{url}");
    let _ = tokio::signal::ctrl_c().await;
    match fake {
        Fake::Anthropic(fake) => fake.stop().await,
        Fake::OpenAi(fake) => fake.stop().await,
    }
    ExitCode::SUCCESS
}
