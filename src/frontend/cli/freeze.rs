//! `wheelhouse freeze` and `wheelhouse thaw`: an incident freeze from a runbook or a
//! script (the engine's `freeze.rs` does the writes and holds the thaw rule), printed per
//! release as text or JSON.

use std::collections::BTreeSet;
use std::io::Write;

use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PartialObjectMeta};
use kube::{Api, Client};

use crate::api;
use crate::api::flux::FluxHelmRelease;
use crate::cluster::client::{self, Scope};
use crate::engine::{
    Error, FreezeDone, FreezeReport, FreezeRequest, FreezeSelection, ReleaseKey, Result,
};
use crate::frontend::inventory::stored;
use crate::text::escape::escape;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Which releases: by name, or by a label selector, in the `-n` namespace or every one.
#[derive(Debug, Args)]
pub struct Selected {
    /// Releases by name: NAME in the namespace (`-n`, else the context's), or
    /// NAMESPACE/NAME. Without names, every release in scope.
    #[arg(value_name = "NAME", conflicts_with = "selector")]
    pub names: Vec<String>,

    /// Only releases with these labels (kubectl's selector syntax), of every kind.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// text (a line per release), or json (for a script).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    #[command(flatten)]
    pub selected: Selected,

    /// How long the freeze lasts; at its end the engine that holds the lease thaws it.
    #[arg(long = "for", value_name = "DURATION", default_value = "2h")]
    pub duration: api::Duration,

    /// Why (required): recorded on every release, shown to whoever looks next.
    #[arg(long, value_name = "TEXT", value_parser = non_empty)]
    pub reason: String,

    /// Keep the freeze past its end until someone thaws it (it is reported overdue).
    #[arg(long)]
    pub until_thawed: bool,
}

fn non_empty(s: &str) -> std::result::Result<String, String> {
    if s.trim().is_empty() {
        Err("a reason is required".into())
    } else {
        Ok(s.to_owned())
    }
}

fn invalid(message: String) -> Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message).into()
}

/// The selection the flags make.
fn selection(
    cluster: &super::ClusterArgs,
    default_ns: String,
    selected: &Selected,
) -> Result<FreezeSelection> {
    let target = cluster.target();
    let scope = Scope::of(&target, default_ns);
    let names = selected
        .names
        .iter()
        .map(|n| match (n.split_once('/'), &scope) {
            (Some((ns, name)), _) if !ns.is_empty() && !name.is_empty() => {
                Ok(ReleaseKey::new(ns, name))
            }
            (None, Scope::Namespace(ns)) if !n.is_empty() => Ok(ReleaseKey::new(ns, n)),
            (None, Scope::All) => Err(invalid(format!(
                "{n}: with -A, name releases as NAMESPACE/NAME"
            ))),
            _ => Err(invalid(format!("{n}: not a release name"))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(FreezeSelection {
        scope,
        labels: selected.selector.clone(),
        names,
    })
}

pub async fn run_freeze(cluster: &super::ClusterArgs, args: &FreezeArgs) -> Result<()> {
    let (client, default_ns) = client::connect(&cluster.target()).await?;
    let selection = selection(cluster, default_ns, &args.selected)?;
    // The record says who froze: as the API server knows the caller, never as they say.
    let Some(by) = client::username(&client).await else {
        return Err(invalid(
            "the API server did not say who you are (SelfSubjectReview): nothing frozen".into(),
        ));
    };
    let request = FreezeRequest {
        by,
        reason: args.reason.clone(),
        duration: args.duration.as_std(),
        until_thawed: args.until_thawed,
    };
    let report = crate::engine::freeze_releases(&client, &selection, &request).await;
    let report = report.with_not_automated(not_automated(&client, &selection).await);
    finish(&report, args.selected.output)
}

pub async fn run_thaw(cluster: &super::ClusterArgs, args: &Selected) -> Result<()> {
    let (client, default_ns) = client::connect(&cluster.target()).await?;
    let selection = selection(cluster, default_ns, args)?;
    // Who thaws goes into each release's audit Event.
    let by = client::username(&client)
        .await
        .unwrap_or_else(|| "an unknown user".into());
    let report = crate::engine::thaw_releases(&client, &selection, &by).await;
    finish(&report, args.output)
}

/// Prints the report; a partial one is the command's failure (exit status 1).
fn finish(report: &FreezeReport, output: Output) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Json => {
            serde_json::to_writer_pretty(&mut out, report).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        Output::Text => write_text(report, &mut out)?,
    }
    if report.partial {
        let failed = report
            .releases
            .iter()
            .filter(|r| matches!(r.done, FreezeDone::Failed { .. }))
            .count();
        return Err(invalid(format!(
            "{} partial: {failed} release(s) not {}",
            report.action,
            if report.action == "freeze" {
                "frozen"
            } else {
                "thawed"
            }
        )));
    }
    Ok(())
}

fn write_text(report: &FreezeReport, out: &mut impl Write) -> std::io::Result<()> {
    if let Some(r) = &report.record {
        let until = r.until.map_or_else(|| "-".into(), |u| u.to_string());
        writeln!(
            out,
            "freeze by {} until {}{}: {}",
            escape(&r.by),
            until,
            if r.until_thawed {
                " (then kept until thawed)"
            } else {
                ""
            },
            escape(&r.reason)
        )?;
    }
    if report.releases.is_empty() {
        return writeln!(out, "No releases matched.");
    }
    for r in &report.releases {
        let what = match &r.done {
            FreezeDone::Frozen {
                suspended_before: false,
                renewed,
            } => format!(
                "frozen: suspended{}",
                if *renewed { " (freeze renewed)" } else { "" }
            ),
            FreezeDone::Frozen {
                suspended_before: true,
                ..
            } => "frozen: was suspended already, stays suspended after the thaw".into(),
            FreezeDone::Thawed { resumed: true, .. } => "thawed: resumed".into(),
            FreezeDone::Thawed { note, .. } => format!("thawed: {note}"),
            FreezeDone::NotFrozen => "not frozen".into(),
            FreezeDone::NotAutomated => "not automated (helm CLI): nothing to suspend".into(),
            FreezeDone::Failed { error } => format!("FAILED: {}", escape(error)),
        };
        writeln!(
            out,
            "{:<10} {}/{}: {what}",
            r.kind,
            escape(&r.namespace),
            escape(&r.name)
        )?;
    }
    if report.partial {
        writeln!(out, "PARTIAL: the releases marked FAILED are not as asked.")?;
    }
    Ok(())
}

/// The helm CLI's releases the selection names or holds: nothing automates them, so a
/// freeze says so rather than leaving them out. A label selector matches HelmReleases'
/// labels, which these have not: with one, none are listed.
async fn not_automated(client: &Client, selection: &FreezeSelection) -> Vec<ReleaseKey> {
    if selection.labels.is_some() {
        return Vec::new();
    }
    let secrets: Api<PartialObjectMeta<Secret>> = selection.scope.api(client.clone());
    let Ok(list) = secrets
        .list_metadata(&ListParams::default().labels(stored::SELECTOR))
        .await
    else {
        return Vec::new();
    };
    // Flux's releases are Flux's; a record wheelhouse claimed carries its claim label.
    let flux: Api<FluxHelmRelease> = Api::all(client.clone());
    let managed: BTreeSet<ReleaseKey> = flux
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .map(|hr| ReleaseKey::new(hr.storage_namespace(), hr.release_name()))
                .collect()
        })
        .unwrap_or_default();
    let stored: BTreeSet<ReleaseKey> = list
        .items
        .iter()
        .filter_map(|s| stored::from_labels(&s.metadata))
        .filter(|(key, _, claimed)| !claimed && !managed.contains(key))
        .map(|(key, _, _)| key)
        .collect();
    stored
        .into_iter()
        .filter(|k| selection.names.is_empty() || selection.names.contains(k))
        .collect()
}
