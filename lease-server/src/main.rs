use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use weblocks_lease_server::config::Config;

/// mimalloc rather than glibc's malloc: a third of the service's own time under load went to glibc's
/// allocator (its arenas, locks and consolidation) and mimalloc is made for many threads allocating small
/// objects.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    if let Err(why) = config.check() {
        eprintln!("weblocks-lease-server: {why}");
        return ExitCode::from(2);
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal: a log file or collector gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if config.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    let secret = std::env::var("WEBLOCKS_LEASE_SECRET").unwrap_or_default();
    match weblocks_lease_server::server::run(config, secret.into_bytes()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            tracing::error!(error = %why, "cannot serve");
            ExitCode::FAILURE
        }
    }
}
