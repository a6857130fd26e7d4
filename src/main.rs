//! The `byre` binary: parses the command line and calls the library.

use clap::Parser;

fn main() {
    one_malloc_arena();
    let filter = tracing_subscriber::EnvFilter::try_from_env("BYRE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = byre::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("byre: cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    };
    match runtime.block_on(byre::cli::main(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("byre: {e:#}");
            std::process::exit(2);
        }
    }
}

/// glibc gives threads allocator arenas of their own (up to 8 per core), and memory freed into
/// one arena is not reused by the others: event streams that read the log on blocking threads
/// and free on the HTTP workers (and redb's page cache, filled and evicted from different
/// threads) then leave each arena holding its own copy of the high-water mark, about a page
/// cache's worth more RSS per arena (bench/README.md, "stream-memory"). One arena keeps RSS at
/// what is live. Set before any thread starts; `MALLOC_ARENA_MAX` in the environment wins.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes glibc's allocator parameters; no other thread runs yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}
