//! `wheelhouse timeline`: what changed, newest first (see `crate::frontend::timeline`), for a
//! postmortem or a script; across a fleet with `--contexts` / `--all-contexts`, each change
//! naming its cluster.

use std::io::Write;

use clap::Args;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::api;
use crate::cluster::client::{self, Scope, Target};
use crate::cluster::fleet::{self, Failure, Selection};
use crate::engine::Result;
use crate::frontend::timeline::{self, Change, Format};

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
    let since = Timestamp::now()
        .checked_sub(args.since.as_std())
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--since {}: {e}", args.since),
            )
        })?;
    if let Some(selection) = cluster.fleet() {
        return run_fleet(&target, &selection, since, args.output).await;
    }
    let (client, default_ns) = client::connect(&target).await?;
    let scope = client::Scope::of(&target, default_ns);
    let changes = timeline::collect::changes(&client, &scope, since).await?;
    timeline::write(&changes, args.output, &mut std::io::stdout())?;
    Ok(())
}

/// What one cluster answered.
#[derive(Debug, Clone, Serialize)]
pub struct Unanswered {
    pub cluster: String,
    pub error: String,
}

/// One cluster's changes, with its own credentials, within the list's time limit.
async fn ask(
    base: Target,
    context: String,
    since: Timestamp,
) -> std::result::Result<Vec<Change>, String> {
    let within = super::list::LIST_WITHIN;
    tokio::time::timeout(within, async {
        let (client, default_ns) = fleet::connect_context(&base, &context)
            .await
            .map_err(|f| f.message().to_owned())?;
        let scope = Scope::of(&base, default_ns);
        timeline::collect::changes(&client, &scope, since)
            .await
            .map_err(|e| match e {
                crate::engine::Error::Kube(e) => Failure::of(&e).message().to_owned(),
                other => other.to_string(),
            })
    })
    .await
    .unwrap_or_else(|_| Err(format!("no answer within {}s", within.as_secs())))
}

/// Every cluster asked at once; the changes of all of them newest first.
async fn run_fleet(
    base: &Target,
    selection: &Selection,
    since: Timestamp,
    format: Format,
) -> Result<()> {
    let contexts = fleet::resolve(base.kubeconfig.as_deref(), selection)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let tasks = contexts
        .iter()
        .map(|c| tokio::spawn(ask(base.clone(), c.clone(), since)));
    let mut changes = Vec::new();
    let mut unanswered = Vec::new();
    for (done, cluster) in futures::future::join_all(tasks)
        .await
        .into_iter()
        .zip(&contexts)
    {
        match done.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(of_cluster) => changes.extend(of_cluster.into_iter().map(|change| Change {
                cluster: Some(cluster.clone()),
                ..change
            })),
            Err(error) => unanswered.push(Unanswered {
                cluster: cluster.clone(),
                error,
            }),
        }
    }
    timeline::newest_first(&mut changes);
    write_fleet(&changes, &unanswered, format, &mut std::io::stdout())?;
    if unanswered.is_empty() {
        Ok(())
    } else {
        let names: Vec<&str> = unanswered.iter().map(|u| u.cluster.as_str()).collect();
        Err(std::io::Error::other(format!(
            "{} of {} clusters did not answer: {}",
            names.len(),
            contexts.len(),
            names.join(", ")
        ))
        .into())
    }
}

/// The fleet's changes: a CLUSTER column first (text, markdown), a `cluster` field on each
/// change (json), and every cluster that did not answer named.
pub fn write_fleet(
    changes: &[Change],
    unanswered: &[Unanswered],
    format: Format,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let safe = |text: &str| crate::text::escape::escape(text).into_owned();
    match format {
        Format::Json => {
            #[derive(Serialize)]
            struct Listing<'a> {
                changes: &'a [Change],
                unanswered: &'a [Unanswered],
            }
            serde_json::to_writer_pretty(
                &mut *out,
                &Listing {
                    changes,
                    unanswered,
                },
            )
            .map_err(std::io::Error::other)?;
            writeln!(out)
        }
        Format::Text => {
            let rows: Vec<[String; 6]> = changes
                .iter()
                .map(|c| {
                    let [a, b, k, w, what] = timeline::cells(c);
                    [
                        safe(c.cluster.as_deref().unwrap_or_default()),
                        a,
                        b,
                        k,
                        w,
                        what,
                    ]
                })
                .collect();
            let header = ["CLUSTER", "TIME", "RELEASE", "KIND", "WHO", "WHAT"];
            let mut widths = header.map(str::len);
            for row in &rows {
                for (w, cell) in widths.iter_mut().zip(row).take(5) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            let line = |cells: [&str; 6]| {
                let mut text = String::new();
                for (i, cell) in cells.iter().enumerate() {
                    if i < 5 {
                        text.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                    } else {
                        text.push_str(cell);
                    }
                }
                text
            };
            if rows.is_empty() {
                writeln!(out, "No changes.")?;
            } else {
                writeln!(out, "{}", line(header))?;
                for row in &rows {
                    writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
                }
            }
            for u in unanswered {
                writeln!(
                    out,
                    "cluster {}: did not answer: {}",
                    safe(&u.cluster),
                    safe(&u.error)
                )?;
            }
            Ok(())
        }
        Format::Markdown => {
            writeln!(out, "| cluster | time | release | kind | who | what |")?;
            writeln!(out, "|---|---|---|---|---|---|")?;
            for c in changes {
                let [a, b, k, w, what] = timeline::cells(c);
                let row = [
                    safe(c.cluster.as_deref().unwrap_or_default()),
                    a,
                    b,
                    k,
                    w,
                    what,
                ]
                .map(|c| c.replace('|', "\\|").replace('\n', " "));
                writeln!(out, "| {} |", row.join(" | "))?;
            }
            for u in unanswered {
                writeln!(
                    out,
                    "\nCluster {} did not answer: {}",
                    safe(&u.cluster).replace('|', "\\|"),
                    safe(&u.error)
                )?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::timeline::Kind;

    #[test]
    fn each_change_names_its_cluster_and_a_silent_one_is_named() {
        let change = Change {
            cluster: None,
            at: "2026-01-02T00:00:00Z".parse().unwrap(),
            namespace: "apps".into(),
            release: "web".into(),
            kind: Kind::Upgrade,
            what: "Upgrade complete".into(),
            who: "helm".into(),
            revision: Some(2),
        };
        let changes = [Change {
            cluster: Some("prod-eu".into()),
            ..change
        }];
        let unanswered = [Unanswered {
            cluster: "prod-us".into(),
            error: "no answer within 10s".into(),
        }];
        let mut out = Vec::new();
        write_fleet(&changes, &unanswered, Format::Text, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.lines().next().unwrap().starts_with("CLUSTER"),
            "{text}"
        );
        assert!(
            text.lines().nth(1).unwrap().starts_with("prod-eu"),
            "{text}"
        );
        assert!(text.contains("cluster prod-us: did not answer"), "{text}");
        let mut out = Vec::new();
        write_fleet(&changes, &unanswered, Format::Json, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["changes"][0]["cluster"], "prod-eu");
        assert_eq!(json["changes"][0]["release"], "web");
        assert_eq!(json["unanswered"][0]["cluster"], "prod-us");
    }
}
