use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use wheelhouse::cli::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // The headless controller logs structured JSON at info; interactive commands stay
    // quiet unless asked (WHEELHOUSE_LOG takes tracing's filter syntax).
    let controller = matches!(cli.command, Some(Command::Controller(_)));
    let default = if controller { "info,kube=warn" } else { "warn" };
    let filter = EnvFilter::try_from_env("WHEELHOUSE_LOG").unwrap_or_else(|_| default.into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if controller {
        logs.json().init();
    } else {
        logs.init();
    }
    match wheelhouse::cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wheelhouse: {e}");
            ExitCode::FAILURE
        }
    }
}
