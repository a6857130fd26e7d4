//! The `byre` binary: parses the command line and calls the library.

use clap::Parser;

/// mimalloc rather than glibc's malloc: the start-up fold allocates and frees a few small
/// objects per event, on two threads (bench/README.md, "rebuild"), and the SSE fan-out one
/// frame per client per event, freed on another worker than it was made on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
/// one arena is not reused by the others (bench/README.md, "stream-memory"). Rust's allocations
/// go to mimalloc ([`ALLOCATOR`]); this still holds what the C libraries (libgit2, OpenSSL)
/// allocate with malloc to one arena. Set before any thread starts; `MALLOC_ARENA_MAX` in the
/// environment wins.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes glibc's allocator parameters; no other thread runs yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}
