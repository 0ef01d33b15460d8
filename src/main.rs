use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use wheelhouse::frontend::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let dashboard = cli.command.is_none();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(run(cli));
    if dashboard {
        // The dashboard's quit restored the terminal, let its engines' Leases go and
        // removed the credential files they wrote; what its tasks still hold is memory
        // (the fleet's watched objects) and pipes to helpers that end on EOF. Dropping
        // it object by object took most of a fleet dashboard's quit: the exit frees it.
        std::mem::forget(runtime);
        return code;
    }
    tracing::debug!("exit: the runtime shuts down");
    // Tasks still running (an engine step cut short by the dashboard's quit, a chart
    // being unpacked on the blocking pool) must not hold the exit up: the dashboard's `q`
    // never waits on them (the engine has handed its Lease back or let it expire by now).
    runtime.shutdown_timeout(std::time::Duration::from_millis(20));
    code
}

async fn run(cli: Cli) -> ExitCode {
    // The headless controller logs structured JSON at info; interactive commands stay
    // quiet unless asked (WHEELHOUSE_LOG takes tracing's filter syntax).
    let controller = matches!(cli.command, Some(Command::Controller(_)));
    // kube's client logs a whole response body at warn when it does not decode: a
    // HelmRelease with its inline values, a Secret. Bodies are never logged by default.
    let default = if controller {
        "info,kube=warn,kube_client::client=error"
    } else {
        "warn,kube_client::client=error"
    };
    let filter = EnvFilter::try_from_env("WHEELHOUSE_LOG").unwrap_or_else(|_| default.into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if controller {
        logs.json().with_writer(std::io::stderr).init();
    } else if cli.command.is_none() {
        // The dashboard owns the terminal: anything on stderr would garble the screen.
        // Its logs (the in-process engine's among them) go to a file instead.
        match dashboard_log() {
            Some(file) => logs.with_ansi(false).with_writer(file).init(),
            None => logs.with_writer(std::io::sink).init(),
        }
    } else {
        logs.with_writer(std::io::stderr).init();
    }
    match wheelhouse::frontend::cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // An error can carry the cluster's words (an API server's message, a chart's).
            eprintln!(
                "wheelhouse: {}",
                wheelhouse::text::escape::escape(&e.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

/// `<cache dir>/wheelhouse.log`, opened for appending.
fn dashboard_log() -> Option<std::sync::Mutex<std::fs::File>> {
    let dirs = directories::ProjectDirs::from("dev", "wheelhouse", "wheelhouse")?;
    std::fs::create_dir_all(dirs.cache_dir()).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dirs.cache_dir().join("wheelhouse.log"))
        .ok()?;
    Some(std::sync::Mutex::new(file))
}
