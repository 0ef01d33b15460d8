//! `wheelhouse timeline`: what changed, newest first (see `crate::frontend::timeline`), for a
//! postmortem or a script.

use clap::Args;
use k8s_openapi::jiff::Timestamp;

use crate::api;
use crate::cluster::client;
use crate::engine::Result;
use crate::frontend::timeline::{self, Format};

#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// How far back: changes at most this old (`10m`, `1h`, `2d`).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub since: api::Duration,

    /// text (a table), json, or markdown (a table for a postmortem).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Format,
}

pub async fn run(cluster: &super::ClusterArgs, args: &TimelineArgs) -> Result<()> {
    let target = cluster.target();
    let (client, default_ns) = client::connect(&target).await?;
    let scope = client::Scope::of(&target, default_ns);
    let since = Timestamp::now()
        .checked_sub(args.since.as_std())
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--since {}: {e}", args.since),
            )
        })?;
    let changes = timeline::collect::changes(&client, &scope, since).await?;
    timeline::write(&changes, args.output, &mut std::io::stdout())?;
    Ok(())
}
