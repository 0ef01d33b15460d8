//! `wheelhouse list`: a one-shot table of HelmReleases; with `--contexts` /
//! `--all-contexts` (or `-o wide|json`) every kind of Helm release of every cluster named,
//! each row naming its cluster (see [`print_fleet`]).

use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client, api::ListParams};

use crate::api::{HelmRelease, RawHelmRelease};
use crate::cluster::client::Scope;
use crate::engine::Result;
use crate::engine::{Error, FreezeRecord};

mod fleet;
pub use fleet::{ClusterAnswer, LIST_WITHIN, ListArgs, ListRow, Output, print_fleet, rows_of};

/// Lists the HelmReleases in scope. Each object is decoded on its own: one that cannot be
/// read is listed as `Invalid` with the reason, and the others as usual.
pub async fn print(client: Client, scope: &Scope, out: &mut impl Write) -> Result<()> {
    let api: Api<RawHelmRelease> = scope.api(client);
    let releases = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => return Err(Error::CrdMissing),
        Err(e) => return Err(e.into()),
    };
    let releases: Vec<(HelmRelease, Option<String>)> = releases
        .into_iter()
        .map(|raw| match raw.decode() {
            Ok(hr) => (hr, None),
            Err(u) => (u.placeholder, Some(u.reason)),
        })
        .collect();
    write_table(&releases, Timestamp::now(), out)?;
    Ok(())
}

fn write_table(
    releases: &[(HelmRelease, Option<String>)],
    now: Timestamp,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if releases.is_empty() {
        return writeln!(out, "No HelmReleases found.");
    }
    let rows: Vec<[String; 7]> = releases
        .iter()
        .map(|(hr, problem)| {
            let ready = hr.condition("Ready");
            [
                hr.object_namespace(),
                hr.metadata.name.clone().unwrap_or_default(),
                if problem.is_some() {
                    "Invalid".to_owned()
                } else {
                    ready.map_or("Unknown", |c| c.status.as_str()).to_owned()
                },
                hr.status
                    .as_ref()
                    .and_then(|s| s.history.first())
                    .map_or_else(|| "-".into(), |h| h.version.to_string()),
                match FreezeRecord::of(&hr.metadata) {
                    Some(r) if r.overdue(now) => format!("{} (frozen, overdue)", hr.spec.suspend),
                    Some(_) => format!("{} (frozen)", hr.spec.suspend),
                    None => hr.spec.suspend.to_string(),
                },
                hr.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or_else(|| "-".into(), |t| crate::text::age::since(t.0, now)),
                problem.clone().unwrap_or_else(|| hr.ready_message()),
            ]
        })
        .collect();
    let header = [
        "NAMESPACE",
        "NAME",
        "READY",
        "REVISION",
        "SUSPENDED",
        "AGE",
        "MESSAGE",
    ];
    // Names, reasons and messages are the cluster's text: escaped before they are
    // measured, so the columns line up with what is printed.
    let rows: Vec<[String; 7]> = rows
        .into_iter()
        .map(|row| row.map(|cell| crate::text::escape::escape(&cell).into_owned()))
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
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
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    write_freezes(releases, now, out)
}

/// One line per freeze in view (its who, why and until, as each release records it),
/// so whoever lists next knows why the releases are suspended and until when.
fn write_freezes(
    releases: &[(HelmRelease, Option<String>)],
    now: Timestamp,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut freezes: BTreeMap<(String, String, Option<Timestamp>, bool), usize> = BTreeMap::new();
    for (hr, _) in releases {
        if let Some(r) = FreezeRecord::of(&hr.metadata) {
            *freezes
                .entry((r.by, r.reason, r.until, r.until_thawed))
                .or_default() += 1;
        }
    }
    for ((by, reason, until, until_thawed), count) in freezes {
        let when = match until {
            Some(u) if u > now => format!(
                "until {u} ({} left{})",
                crate::text::age::since(now, u),
                if until_thawed {
                    ", then until thawed"
                } else {
                    ""
                }
            ),
            Some(u) if until_thawed => format!("OVERDUE since {u} (kept until thawed)"),
            Some(u) => format!("ended {u}, thaw pending"),
            None => "OVERDUE (its end does not read as a time)".into(),
        };
        writeln!(
            out,
            "Frozen: {count} release(s) by {} {when}: {}",
            crate::text::escape::escape(&by),
            crate::text::escape::escape(&reason)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_ready_condition_and_revision() {
        let hr: HelmRelease = crate::text::yaml::from_str(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: web, namespace: apps, creationTimestamp: "2026-01-01T23:00:00Z"}
spec: {chart: {path: ./chart}, suspend: true}
status:
  conditions:
    - {type: Ready, status: "True", reason: UpgradeSucceeded, message: "Helm upgrade succeeded", lastTransitionTime: "2026-01-01T23:00:00Z"}
  history:
    - {version: 3, name: web, namespace: apps, chartName: web, chartVersion: 1.0.0, configDigest: "sha256:0", status: deployed}
"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_table(
            &[(hr, None)],
            "2026-01-02T00:00:00Z".parse().unwrap(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   NAME   READY"));
        assert!(lines[1].contains("apps"), "{text}");
        assert!(lines[1].contains("True"), "{text}");
        assert!(lines[1].contains(" 3 "), "{text}");
        assert!(lines[1].contains("true"), "{text}");
        assert!(lines[1].contains("60m"), "{text}");
        assert!(lines[1].ends_with("Helm upgrade succeeded"), "{text}");
    }

    /// A frozen release is marked in the table, and its freeze said below it.
    #[test]
    fn a_freeze_is_shown_with_who_why_and_until() {
        let hr: HelmRelease = crate::text::yaml::from_str(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata:
  name: web
  namespace: apps
  annotations:
    freeze.wheelhouse.dev/by: jane
    freeze.wheelhouse.dev/reason: "INC-57: bad rollout"
    freeze.wheelhouse.dev/at: "2026-01-01T23:00:00Z"
    freeze.wheelhouse.dev/until: "2026-01-02T01:00:00Z"
    freeze.wheelhouse.dev/suspendedBefore: "false"
spec: {chart: {path: ./chart}, suspend: true}
"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_table(
            &[(hr, None)],
            "2026-01-02T00:00:00Z".parse().unwrap(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("true (frozen)"), "{text}");
        assert!(
            text.contains("Frozen: 1 release(s) by jane until 2026-01-02T01:00:00Z (60m left): INC-57: bad rollout"),
            "{text}"
        );
    }

    /// A tenant's chart `fail` message reaches the table escaped, never as the escape
    /// sequences it holds.
    #[test]
    fn cluster_text_is_printed_escaped() {
        let mut hr: HelmRelease = crate::text::yaml::from_str(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec: {chart: {path: ./chart}}
status:
  conditions:
    - {type: Ready, status: "False", reason: InstallFailed, message: "x", lastTransitionTime: "2026-01-01T23:00:00Z"}
"#,
        )
        .unwrap();
        hr.status.as_mut().unwrap().conditions[0].message =
            "render failed: \u{1b}]2;owned\u{7}\u{1b}[2J".into();
        let mut out = Vec::new();
        write_table(
            &[(hr, None)],
            "2026-01-02T00:00:00Z".parse().unwrap(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(
            text.contains("render failed: \\x1b]2;owned\\x07\\x1b[2J"),
            "{text}"
        );
    }
}
