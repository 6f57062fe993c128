//! `strata-server`: the Redis-protocol server alone, without the rest of the `strata` CLI
//! (`strata serve` is the same server). Used by this crate's crash tests, which need a process
//! they can kill with SIGKILL.

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "strata-server",
    version,
    about = "Serve a Strata database over the Redis protocol"
)]
struct Cli {
    /// Data directory.
    #[arg(long, default_value = "./data")]
    dir: PathBuf,
    /// Partitions for the data of a new database, which gets one more for the expiry index of
    /// the server's keyspace (an existing one keeps its own count).
    #[arg(long)]
    partitions: Option<usize>,
    #[command(flatten)]
    serve: strata_server::ServeArgs,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let mut options = strata::Options::default();
    if let Some(p) = cli.partitions {
        options.partitions = p;
    }
    if let Err(e) = strata_server::serve_blocking(cli.serve, options, &cli.dir) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
