//! `wheelhouse list --contexts a,b` / `--all-contexts` / `-o wide|json`: every kind of Helm
//! release (wheelhouse's, Flux's, the helm CLI's) of every cluster named, each row naming
//! its cluster. Each cluster is asked on its own task with its own credentials within
//! [`LIST_WITHIN`]: one that does not answer is named in the output and costs the others
//! nothing.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

use crate::api::RawHelmRelease;
use crate::api::flux::FluxHelmRelease;
use crate::cluster::client::{Scope, Target};
use crate::cluster::fleet::{self, Failure, Selection};
use crate::engine::{ReleaseKey, ReleaseView, Result};
use crate::frontend::inventory::{Kind, stored};
use crate::frontend::tui::view_model::Row;
use crate::health::replicas::ReplicaMap;
use crate::helm::release::Status;

/// How long one cluster may take to connect and list before it is named unreachable.
pub const LIST_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// A table: cluster (in a fleet), namespace, name, kind, state, revision, message.
    #[default]
    Text,
    /// The table with the chart, its version, suspended and the last change.
    Wide,
    /// One object with every row (each naming its cluster) and every cluster's answer.
    Json,
}

#[derive(Debug, Clone, Default, Args)]
pub struct ListArgs {
    /// text, wide, or json.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

/// One release of one cluster, as the dashboard's row shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListRow {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub chart: String,
    pub version: String,
    pub revision: Option<i32>,
    pub state: String,
    pub suspended: bool,
    pub last_change: Option<String>,
    pub message: String,
    /// The running wait's deadline, and what the engine will do if it fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub if_it_fails: Option<String>,
}

/// What one cluster answered: its rows, or why it gave none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAnswer {
    pub cluster: String,
    /// `ok`, `unreachable` or `credentials` (its credentials were refused or could not
    /// be made).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub releases: usize,
    /// How long it took to answer, in milliseconds.
    pub millis: u128,
}

#[derive(Serialize)]
struct Listing<'a> {
    clusters: &'a [ClusterAnswer],
    releases: &'a [ListRow],
}

/// The rows of one cluster: its wheelhouse HelmReleases (each decoded on its own), its Flux
/// HelmReleases (none without Flux's CRD) and the helm CLI releases no HelmRelease of the
/// list manages (the newest record of each, uninstalled ones left out), as the
/// dashboard's table shows them.
pub async fn rows_of(client: &Client, scope: &Scope, cluster: &str) -> kube::Result<Vec<ListRow>> {
    let all = ListParams::default();
    let records = ListParams::default().labels(stored::SELECTOR);
    let (wh_api, flux_api, secret_api): (Api<RawHelmRelease>, Api<FluxHelmRelease>, Api<Secret>) = (
        scope.api(client.clone()),
        scope.api(client.clone()),
        scope.api(client.clone()),
    );
    let (wheelhouse, flux, secrets) = tokio::join!(
        wh_api.list(&all),
        flux_api.list(&all),
        secret_api.list(&records),
    );
    let missing = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    let wheelhouse = match wheelhouse {
        Ok(l) => l.items,
        Err(e) if missing(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    let flux = match flux {
        Ok(l) => l.items,
        Err(e) if missing(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    let secrets = secrets?.items;
    let replicas = ReplicaMap::default();
    let mut managed: HashSet<ReleaseKey> = HashSet::new();
    let mut rows: Vec<Row> = Vec::new();
    for raw in wheelhouse {
        let (hr, problem) = match raw.decode() {
            Ok(hr) => (hr, None),
            Err(u) => (u.placeholder, Some(u.reason)),
        };
        managed.insert(ReleaseKey::new(hr.storage_namespace(), hr.release_name()));
        let view = ReleaseView {
            key: ReleaseKey::of(&hr),
            release: Arc::new(hr),
            live: Default::default(),
            problem,
            elsewhere: None,
        };
        rows.push(Row::of(&view));
    }
    let sources = Default::default();
    for hr in flux {
        managed.insert(ReleaseKey::new(hr.storage_namespace(), hr.release_name()));
        let key = ReleaseKey::new(
            hr.metadata.namespace.clone().unwrap_or_default(),
            hr.metadata.name.clone().unwrap_or_default(),
        );
        rows.push(Row::of_flux(key, &hr, &replicas, &sources));
    }
    // The newest record of each release.
    let mut newest: std::collections::BTreeMap<ReleaseKey, stored::Stored> = Default::default();
    for secret in &secrets {
        let Some(record) = stored::decode(secret)
            .or_else(|| stored::from_labels(&secret.metadata).map(|(_, s, _)| s))
        else {
            continue;
        };
        let newer = newest
            .get(&record.key)
            .is_none_or(|have| have.revision < record.revision);
        if newer {
            newest.insert(record.key.clone(), record);
        }
    }
    for (key, record) in newest {
        if managed.contains(&key) || record.status == Status::Uninstalled {
            continue;
        }
        rows.push(Row::of_stored(&record, &replicas));
    }
    Ok(rows.iter().map(|r| list_row(cluster, r)).collect())
}

fn list_row(cluster: &str, r: &Row) -> ListRow {
    ListRow {
        cluster: cluster.to_owned(),
        namespace: r.id.key.namespace.clone(),
        name: r.id.key.name.clone(),
        kind: match r.id.kind {
            Kind::Wheelhouse => "wh",
            Kind::Flux => "flux",
            Kind::Helm => "helm",
        }
        .to_owned(),
        chart: r.chart.clone(),
        version: r.version.clone(),
        revision: r.revision,
        state: r.state.word().to_owned(),
        suspended: r.suspended,
        last_change: r.last_change.map(|t| t.to_string()),
        message: r.message.clone(),
        deadline: r.deadline.map(|t| t.to_string()),
        if_it_fails: r.if_it_fails.clone(),
    }
}

/// One cluster asked: connected with its own credentials, listed, all within
/// [`LIST_WITHIN`].
async fn ask(base: Target, context: String) -> (ClusterAnswer, Vec<ListRow>) {
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(LIST_WITHIN, async {
        let (client, default_ns) = fleet::connect_context(&base, &context).await?;
        let scope = Scope::of(&base, default_ns);
        rows_of(&client, &scope, &context)
            .await
            .map_err(|e| Failure::of(&e))
    })
    .await
    .unwrap_or_else(|_| {
        Err(Failure::Unreachable(format!(
            "no answer within {}s",
            LIST_WITHIN.as_secs()
        )))
    });
    let millis = started.elapsed().as_millis();
    match answer {
        Ok(rows) => (
            ClusterAnswer {
                cluster: context,
                status: "ok",
                error: None,
                releases: rows.len(),
                millis,
            },
            rows,
        ),
        Err(failure) => (
            ClusterAnswer {
                cluster: context,
                status: match failure {
                    Failure::Credentials(_) => "credentials",
                    Failure::Unreachable(_) => "unreachable",
                },
                error: Some(failure.message().to_owned()),
                releases: 0,
                millis,
            },
            Vec::new(),
        ),
    }
}

/// Every cluster of `selection` asked at once; the rows sorted by namespace, name, kind
/// and cluster (one release across the fleet reads as adjacent lines), with what each
/// cluster answered.
pub async fn collect(base: &Target, contexts: &[String]) -> (Vec<ClusterAnswer>, Vec<ListRow>) {
    let asked = contexts
        .iter()
        .map(|c| tokio::spawn(ask(base.clone(), c.clone())));
    let mut answers = Vec::new();
    let mut rows = Vec::new();
    for (task, context) in futures::future::join_all(asked)
        .await
        .into_iter()
        .zip(contexts)
    {
        let (answer, mut of_cluster) = task.unwrap_or_else(|e| {
            (
                ClusterAnswer {
                    cluster: context.clone(),
                    status: "unreachable",
                    error: Some(format!("its task failed: {e}")),
                    releases: 0,
                    millis: 0,
                },
                Vec::new(),
            )
        });
        answers.push(answer);
        rows.append(&mut of_cluster);
    }
    rows.sort_by(|a, b| {
        (&a.namespace, &a.name, &a.kind, &a.cluster).cmp(&(
            &b.namespace,
            &b.name,
            &b.kind,
            &b.cluster,
        ))
    });
    (answers, rows)
}

/// `wheelhouse list` over a fleet: printed as `args.output` asks. Returns an error after
/// printing when a cluster did not answer, so a script sees it in the exit status too.
pub async fn print_fleet(
    base: &Target,
    selection: &Selection,
    args: &ListArgs,
    out: &mut impl Write,
) -> Result<()> {
    let contexts = fleet::resolve(base.kubeconfig.as_deref(), selection)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let (answers, rows) = collect(base, &contexts).await;
    write(&answers, &rows, args.output, Timestamp::now(), out)?;
    let failed: Vec<&str> = answers
        .iter()
        .filter(|a| a.status != "ok")
        .map(|a| a.cluster.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "{} of {} clusters did not answer: {}",
            failed.len(),
            answers.len(),
            failed.join(", ")
        ))
        .into())
    }
}

/// Writes the fleet's rows: a table (`CLUSTER` first) with a line for every cluster that
/// did not answer, or one JSON object.
pub fn write(
    answers: &[ClusterAnswer],
    rows: &[ListRow],
    output: Output,
    now: Timestamp,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if output == Output::Json {
        serde_json::to_writer_pretty(
            &mut *out,
            &Listing {
                clusters: answers,
                releases: rows,
            },
        )
        .map_err(std::io::Error::other)?;
        return writeln!(out);
    }
    let wide = output == Output::Wide;
    let mut header = vec!["CLUSTER", "NAMESPACE", "NAME", "KIND", "STATE", "REVISION"];
    if wide {
        header.extend(["CHART", "VERSION", "SUSPENDED", "CHANGED"]);
    }
    header.push("MESSAGE");
    let mut table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.cluster.clone(),
                r.namespace.clone(),
                r.name.clone(),
                r.kind.clone(),
                r.state.clone(),
                r.revision.map_or_else(|| "-".into(), |v| v.to_string()),
            ];
            if wide {
                let changed = r
                    .last_change
                    .as_deref()
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .map_or_else(|| "-".into(), |t| crate::text::age::since(t, now));
                cells.extend([
                    r.chart.clone(),
                    r.version.clone(),
                    r.suspended.to_string(),
                    changed,
                ]);
            }
            let mut message = r.message.clone();
            // A waiting release says what happens at its deadline.
            if wide
                && let (Some(deadline), Some(then)) = (
                    r.deadline
                        .as_deref()
                        .and_then(|t| t.parse::<Timestamp>().ok()),
                    &r.if_it_fails,
                )
            {
                message.push_str(&format!(
                    " (at {}: {then})",
                    deadline.strftime("%H:%M:%S UTC")
                ));
            }
            cells.push(message);
            cells
        })
        .collect();
    // A cluster that did not answer is a line of its own, where its rows would be.
    for a in answers.iter().filter(|a| a.status != "ok") {
        let mut cells = vec![a.cluster.clone(), "-".into(), "-".into(), "-".into()];
        cells.push(
            match a.status {
                "credentials" => "CredentialsFailed",
                _ => "Unreachable",
            }
            .into(),
        );
        cells.push("-".into());
        if wide {
            cells.extend(["-".into(), "-".into(), "-".into(), "-".into()]);
        }
        cells.push(a.error.clone().unwrap_or_default());
        table.push(cells);
    }
    if table.is_empty() {
        return writeln!(out, "No Helm releases found.");
    }
    // The cluster's text is escaped before it is measured (see `write_table`).
    let table: Vec<Vec<String>> = table
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|c| crate::text::escape::escape(&c).into_owned())
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        s
    };
    writeln!(out, "{}", line(&header))?;
    for row in &table {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cluster: &str, name: &str) -> ListRow {
        ListRow {
            cluster: cluster.into(),
            namespace: "apps".into(),
            name: name.into(),
            kind: "wh".into(),
            chart: "redis".into(),
            version: "18.2.0".into(),
            revision: Some(3),
            state: "Ready".into(),
            suspended: false,
            last_change: None,
            message: "Helm upgrade succeeded".into(),
            deadline: None,
            if_it_fails: None,
        }
    }

    fn answer(cluster: &str, status: &'static str, error: Option<&str>) -> ClusterAnswer {
        ClusterAnswer {
            cluster: cluster.into(),
            status,
            error: error.map(Into::into),
            releases: 0,
            millis: 1,
        }
    }

    #[test]
    fn each_row_names_its_cluster_and_a_silent_cluster_is_named() {
        let answers = [
            answer("prod-eu", "ok", None),
            answer("prod-us", "unreachable", Some("no answer within 10s")),
            answer(
                "staging",
                "credentials",
                Some("credentials refused: Unauthorized"),
            ),
        ];
        let rows = [row("prod-eu", "cache")];
        let mut out = Vec::new();
        write(&answers, &rows, Output::Text, Timestamp::now(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("CLUSTER   NAMESPACE"), "{text}");
        assert!(
            lines[1].starts_with("prod-eu") && lines[1].contains("cache"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("prod-us") && lines[2].contains("Unreachable"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("staging") && lines[3].contains("CredentialsFailed"),
            "{text}"
        );
    }

    #[test]
    fn wide_adds_the_chart_and_json_names_every_cluster() {
        let answers = [
            answer("a", "ok", None),
            answer("b", "unreachable", Some("x")),
        ];
        let rows = [row("a", "cache")];
        let mut out = Vec::new();
        write(&answers, &rows, Output::Wide, Timestamp::now(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().next().unwrap().contains("CHART"), "{text}");
        assert!(text.contains("18.2.0"), "{text}");
        let mut out = Vec::new();
        write(&answers, &rows, Output::Json, Timestamp::now(), &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["releases"][0]["cluster"], "a");
        assert_eq!(json["clusters"][1]["status"], "unreachable");
    }

    #[test]
    fn wide_and_json_say_what_happens_when_a_wait_fails() {
        let mut waiting = row("a", "web");
        waiting.deadline = Some("2026-12-02T14:32:10Z".into());
        waiting.if_it_fails =
            Some("upgrade fails -> rollback to revision 6 (webapp 1.2.3); 0 retries left".into());
        let answers = [answer("a", "ok", None)];
        let mut out = Vec::new();
        let rows = [waiting];
        write(&answers, &rows, Output::Wide, Timestamp::now(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "(at 14:32:10 UTC: upgrade fails -> rollback to revision 6 (webapp 1.2.3); 0 retries left)"
            ),
            "{text}"
        );
        let mut out = Vec::new();
        write(&answers, &rows, Output::Json, Timestamp::now(), &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["releases"][0]["deadline"], "2026-12-02T14:32:10Z");
        assert!(
            json["releases"][0]["ifItFails"]
                .as_str()
                .unwrap()
                .starts_with("upgrade fails -> rollback")
        );
    }
}
