//! The `byre` binary: parses the command line and calls the library.

use clap::Parser;

#[tokio::main]
async fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BYRE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = byre::cli::Cli::parse();
    match byre::cli::main(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("byre: {e:#}");
            std::process::exit(2);
        }
    }
}
