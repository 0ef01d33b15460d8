//! What changed: every change to a Helm release of the cluster, newest first, joined from
//! the records that keep them durably: Helm's storage (every revision, whoever made it:
//! wheelhouse, Flux's helm-controller, the helm CLI, another tool) and the changes
//! wheelhouse's HelmReleases keep in their status (`status.changes`: suspends, pins,
//! cancelled waits, failures, remediations, drift; see `engine::change_log`).
//! Nothing here writes: `collect.rs` reads, this file says what each record means.

pub mod collect;

use std::io::Write;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::api::conditions::reason;
use crate::api::{ChangeRecord, HelmRelease};
use crate::helm::release::{Release, Status};

/// What kind of change a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Install,
    Upgrade,
    Rollback,
    Uninstall,
    Test,
    Suspend,
    Resume,
    Pin,
    Unpin,
    Cancel,
    FailFast,
    Failure,
    Remediation,
    Drift,
    DriftCorrected,
    External,
    ConfigRollout,
    /// An incident freeze took the release (`wheelhouse freeze`, `z`).
    Freeze,
    /// A thaw let it go.
    Thaw,
    /// An operator's write from a dashboard (suspend, resume, reconcile, cancel, rollback,
    /// pin, values, uninstall), as its audit Event says.
    Operator,
}

impl Kind {
    pub const ALL: [Kind; 20] = [
        Kind::Install,
        Kind::Upgrade,
        Kind::Rollback,
        Kind::Uninstall,
        Kind::Test,
        Kind::Suspend,
        Kind::Resume,
        Kind::Pin,
        Kind::Unpin,
        Kind::Cancel,
        Kind::FailFast,
        Kind::Failure,
        Kind::Remediation,
        Kind::Drift,
        Kind::DriftCorrected,
        Kind::External,
        Kind::ConfigRollout,
        Kind::Freeze,
        Kind::Thaw,
        Kind::Operator,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Install => "install",
            Kind::Upgrade => "upgrade",
            Kind::Rollback => "rollback",
            Kind::Uninstall => "uninstall",
            Kind::Test => "test",
            Kind::Suspend => "suspend",
            Kind::Resume => "resume",
            Kind::Pin => "pin",
            Kind::Unpin => "unpin",
            Kind::Cancel => "cancel",
            Kind::FailFast => "fail-fast",
            Kind::Failure => "failure",
            Kind::Remediation => "remediation",
            Kind::Drift => "drift",
            Kind::DriftCorrected => "drift-corrected",
            Kind::External => "external",
            Kind::ConfigRollout => "config-rollout",
            Kind::Freeze => "freeze",
            Kind::Thaw => "thaw",
            Kind::Operator => "operator",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.label() == text)
    }

    /// Whether it made a Helm revision (its diff is the revision's against the one
    /// before).
    pub fn is_revision(self) -> bool {
        matches!(
            self,
            Kind::Install | Kind::Upgrade | Kind::Rollback | Kind::Uninstall
        )
    }
}

/// One change to one release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The cluster (kubeconfig context) it was made in, where several are listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub at: Timestamp,
    /// The release's storage namespace (the HelmRelease's, for wheelhouse's changes).
    pub namespace: String,
    pub release: String,
    pub kind: Kind,
    pub what: String,
    pub who: String,
    /// The Helm revision it made or concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i32>,
}

/// Longest text of a Helm description shown (a failed action's quotes the API server).
const DESCRIPTION_SHOWN: usize = 200;

/// Who wrote a storage record (see [`crate::helm::release::written_by`]).
pub fn author(release: &Release) -> String {
    crate::helm::release::written_by(
        &release.labels,
        release.managers.first().map(String::as_str),
    )
}

/// The reporting controllers whose Events are audit records, and the Event reasons they
/// write (`engine::freeze`, the dashboard's writes).
pub const AUDIT_REASONS: [(&str, &str, Kind); 3] = [
    (crate::engine::FREEZE_MANAGER, reason::FROZEN, Kind::Freeze),
    (crate::engine::FREEZE_MANAGER, reason::THAWED, Kind::Thaw),
    (AUDIT_CONTROLLER, reason::AUDITED, Kind::Operator),
];

/// The reporting controller of the dashboard's audit Events; the reporting instance is
/// the operator, as the API server knows them.
pub const AUDIT_CONTROLLER: &str = "wheelhouse-dashboard";

/// An audit Event as a change: who is its reporting instance (the caller the API server
/// knew), what its note says. `None` for an Event of anyone else.
pub fn of_audit(event: &k8s_openapi::api::core::v1::Event) -> Option<Change> {
    let reason = event.reason.as_deref()?;
    let controller = event.reporting_component.as_deref()?;
    let (_, _, kind) = AUDIT_REASONS
        .iter()
        .find(|(c, r, _)| *c == controller && *r == reason)?;
    let at = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.last_timestamp.as_ref().map(|t| t.0))?;
    let regarding = &event.involved_object;
    let what: String = event
        .message
        .as_deref()
        .unwrap_or_default()
        .chars()
        .take(DESCRIPTION_SHOWN)
        .collect();
    Some(Change {
        cluster: None,
        at,
        namespace: regarding.namespace.clone().unwrap_or_default(),
        release: regarding.name.clone().unwrap_or_default(),
        kind: *kind,
        what: format!(
            "{} {}: {what}",
            regarding.kind.as_deref().unwrap_or("object"),
            regarding.name.as_deref().unwrap_or_default()
        ),
        who: event.reporting_instance.clone().unwrap_or_default(),
        revision: None,
    })
}

/// A Helm revision as a change: when it was last written (deployed, failed, superseded
/// or uninstalled), what it was by Helm's description, who wrote it.
pub fn of_revision(release: &Release, storage_namespace: &str) -> Change {
    let info = release.info.clone().unwrap_or_default();
    let description = info.description.lines().next().unwrap_or_default();
    let kind = if info.status == Status::Uninstalled || description.starts_with("Uninstall") {
        Kind::Uninstall
    } else if description.starts_with("Rollback") || info.rollback_revision > 0 {
        Kind::Rollback
    } else if release.version == 1 || description.starts_with("Install") {
        Kind::Install
    } else {
        Kind::Upgrade
    };
    let chart = release
        .chart
        .as_ref()
        .and_then(|c| c.metadata.as_ref())
        .map(|m| format!("{} {}", m.name, m.version))
        .unwrap_or_default();
    let description: String = description.chars().take(DESCRIPTION_SHOWN).collect();
    Change {
        cluster: None,
        at: info
            .deleted
            .or(info.last_deployed)
            .or(info.first_deployed)
            .unwrap_or(Timestamp::UNIX_EPOCH),
        namespace: storage_namespace.to_owned(),
        release: release.name.clone(),
        kind,
        what: format!(
            "revision {} {} ({chart}): {description}",
            release.version,
            info.status.as_str()
        ),
        who: author(release),
        revision: Some(release.version),
    }
}

/// The last test run of a revision (`helm test`, or an engine's `test.enable`), from its
/// test hooks' last runs as Helm stores them: when the last of them ended, and how the
/// run went (failed if any hook failed). `None` when its tests never ran.
pub fn of_tests(release: &Release, storage_namespace: &str) -> Option<Change> {
    use crate::helm::release::{HookPhase, hook_event};
    let ran: Vec<_> = release
        .hooks
        .iter()
        .filter(|h| h.events.iter().any(|e| e == hook_event::TEST))
        .filter(|h| h.last_run.phase != HookPhase::NotRun)
        .collect();
    let at = ran
        .iter()
        .filter_map(|h| h.last_run.completed_at.or(h.last_run.started_at))
        .max()?;
    let failed: Vec<&str> = ran
        .iter()
        .filter(|h| h.last_run.phase == HookPhase::Failed)
        .map(|h| h.name.as_str())
        .collect();
    let running = ran.iter().any(|h| h.last_run.phase == HookPhase::Running);
    let outcome = if !failed.is_empty() {
        format!("failed ({})", failed.join(", "))
    } else if running {
        "running".to_owned()
    } else {
        "passed".to_owned()
    };
    Some(Change {
        cluster: None,
        at,
        namespace: storage_namespace.to_owned(),
        release: release.name.clone(),
        kind: Kind::Test,
        what: format!(
            "revision {} tests {outcome}: {} test hook(s)",
            release.version,
            ran.len()
        ),
        who: author(release),
        revision: Some(release.version),
    })
}

/// A record read whole as rows: its revision, and its last test run when it had one.
pub fn of_record_read(release: &Release, storage_namespace: &str) -> Vec<Change> {
    let mut rows = vec![of_revision(release, storage_namespace)];
    rows.extend(of_tests(release, storage_namespace));
    rows
}

/// A Helm revision as its record's labels and metadata tell it, without reading it
/// whole: when its action began (when it was uninstalled, for an uninstalled one), its
/// status, who wrote it. Whether a later revision was an upgrade or a rollback, and its
/// chart, are in the record only: [`of_revision`] on the record read whole says so.
pub fn of_stored(stored: &crate::frontend::inventory::Stored) -> Change {
    let uninstalled = matches!(stored.status, Status::Uninstalled | Status::Uninstalling);
    let kind = if uninstalled {
        Kind::Uninstall
    } else if stored.revision == 1 {
        Kind::Install
    } else {
        Kind::Upgrade
    };
    let at = if uninstalled {
        stored.updated.or(stored.created)
    } else {
        stored.created.or(stored.updated)
    };
    Change {
        cluster: None,
        at: at.unwrap_or(Timestamp::UNIX_EPOCH),
        namespace: stored.key.namespace.clone(),
        release: stored.key.name.clone(),
        kind,
        what: format!("revision {} {}", stored.revision, stored.status.as_str()),
        who: stored.author.clone(),
        revision: Some(stored.revision),
    }
}

/// Every change at or after `since` in the namespaces `in_view` keeps, from what a
/// dashboard already holds: the records the inventory watches by their labels, and the
/// changes its HelmReleases keep.
/// Newest first. `settled` gives a record read whole, where one was (see [`of_stored`]):
/// its rows say what the record says (its time to the nanosecond, where the labels give
/// the second; its last test run, which its labels do not show).
pub fn from_watched<'a>(
    revisions: &imbl::OrdMap<
        (crate::engine::ReleaseKey, i32),
        std::sync::Arc<crate::frontend::inventory::Stored>,
    >,
    releases: impl Iterator<Item = &'a HelmRelease>,
    since: Timestamp,
    in_view: impl Fn(&str) -> bool,
    settled: impl Fn(&crate::frontend::inventory::Stored) -> Option<Vec<Change>>,
) -> Vec<Change> {
    let mut found: Vec<Change> = revisions
        .values()
        .filter(|stored| in_view(&stored.key.namespace))
        .flat_map(|stored| {
            let change = of_stored(stored);
            if change.at < since {
                return Vec::new();
            }
            let mut rows = settled(stored).unwrap_or_else(|| vec![change]);
            rows.retain(|c| c.at >= since);
            rows
        })
        .collect();
    for hr in releases.filter(|hr| in_view(hr.metadata.namespace.as_deref().unwrap_or_default())) {
        let kept = hr
            .status
            .as_ref()
            .map(|s| s.changes.as_slice())
            .unwrap_or_default();
        found.extend(
            kept.iter()
                .filter_map(|r| of_record(hr, r))
                .filter(|c| c.at >= since),
        );
    }
    newest_first(&mut found);
    found
}

/// A change a wheelhouse HelmRelease kept in its status.
pub fn of_record(hr: &HelmRelease, record: &ChangeRecord) -> Option<Change> {
    let kind = Kind::parse(&record.kind)?;
    Some(Change {
        cluster: None,
        at: record.at.0,
        namespace: hr.metadata.namespace.clone().unwrap_or_default(),
        release: hr.metadata.name.clone().unwrap_or_default(),
        kind,
        what: record.message.clone(),
        who: record.by.clone().unwrap_or_else(|| "wheelhouse".into()),
        revision: record.revision,
    })
}

/// Newest first; ties in a stable order.
pub fn newest_first(changes: &mut [Change]) {
    changes.sort_by(|a, b| {
        b.at.cmp(&a.at)
            .then_with(|| a.cluster.cmp(&b.cluster))
            .then_with(|| a.namespace.cmp(&b.namespace))
            .then_with(|| a.release.cmp(&b.release))
            .then_with(|| b.revision.cmp(&a.revision))
            .then_with(|| a.kind.cmp(&b.kind))
    });
}

/// How `wheelhouse timeline` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

/// Writes `changes` (newest first) as `format`.
pub fn write(changes: &[Change], format: Format, out: &mut impl Write) -> std::io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, changes).map_err(std::io::Error::other)?;
            writeln!(out)
        }
        Format::Text => {
            if changes.is_empty() {
                return writeln!(out, "No changes.");
            }
            let rows: Vec<[String; 5]> = changes.iter().map(cells).collect();
            let header = ["TIME", "RELEASE", "KIND", "WHO", "WHAT"];
            let mut widths = header.map(str::len);
            for row in &rows {
                for (w, cell) in widths.iter_mut().zip(row).take(4) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            let line = |cells: [&str; 5]| {
                let mut text = String::new();
                for (i, cell) in cells.iter().enumerate() {
                    if i < 4 {
                        text.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                    } else {
                        text.push_str(cell);
                    }
                }
                text
            };
            writeln!(out, "{}", line(header))?;
            for row in &rows {
                writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
            }
            Ok(())
        }
        Format::Markdown => {
            writeln!(out, "| time | release | kind | who | what |")?;
            writeln!(out, "|---|---|---|---|---|")?;
            for row in changes.iter().map(cells) {
                let escaped = row.map(|c| c.replace('|', "\\|").replace('\n', " "));
                writeln!(out, "| {} |", escaped.join(" | "))?;
            }
            Ok(())
        }
    }
}

/// A change's columns for text and markdown, its cluster-written text (names, who, a
/// Helm description, a message) escaped for the terminal (`crate::text::escape`).
pub fn cells(c: &Change) -> [String; 5] {
    let safe = |text: &str| crate::text::escape::escape(text).into_owned();
    [
        c.at.strftime("%Y-%m-%d %H:%M:%SZ").to_string(),
        safe(&format!("{}/{}", c.namespace, c.release)),
        c.kind.label().to_owned(),
        safe(&c.who),
        safe(&c.what),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helm::release::Info;

    fn release(version: i32, status: Status, description: &str, managers: &[&str]) -> Release {
        Release {
            name: "web".into(),
            version,
            info: Some(Info {
                last_deployed: Some(
                    Timestamp::from_second(1_800_000_000 + i64::from(version)).unwrap(),
                ),
                description: description.into(),
                status,
                ..Info::default()
            }),
            managers: managers.iter().map(|m| (*m).to_owned()).collect(),
            ..Release::default()
        }
    }

    /// A Helm description a hand set with `helm upgrade --description` is the cluster's
    /// text: text and markdown print its control characters escaped.
    #[test]
    fn descriptions_print_escaped() {
        let r = release(
            2,
            Status::Deployed,
            "\u{1b}]2;owned\u{7}\u{1b}[2Jdone",
            &["Helm"],
        );
        let change = of_revision(&r, "apps");
        for format in [Format::Text, Format::Markdown] {
            let mut out = Vec::new();
            write(std::slice::from_ref(&change), format, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}'),
                "{text:?}"
            );
            assert!(text.contains("\\x1b]2;owned\\x07\\x1b[2Jdone"), "{text}");
        }
    }

    #[test]
    fn a_test_run_is_a_row_at_the_end_of_its_last_hook_failed_if_any_hook_failed() {
        use crate::helm::release::{Hook, HookExecution, HookPhase};
        let hook = |name: &str, phase: HookPhase, end: i64| Hook {
            name: name.into(),
            events: vec!["test".into()],
            last_run: HookExecution {
                started_at: Some(Timestamp::from_second(1_800_000_100).unwrap()),
                completed_at: Some(Timestamp::from_second(1_800_000_100 + end).unwrap()),
                phase,
            },
            ..Hook::default()
        };
        let mut r = release(2, Status::Deployed, "Upgrade complete", &["Helm"]);
        assert!(of_tests(&r, "apps").is_none(), "never ran");
        r.hooks = vec![
            hook("web-test", HookPhase::Succeeded, 5),
            hook("db-test", HookPhase::Failed, 9),
        ];
        let run = of_tests(&r, "apps").unwrap();
        assert_eq!((run.kind, run.at.as_second()), (Kind::Test, 1_800_000_109));
        assert_eq!(
            run.what,
            "revision 2 tests failed (db-test): 2 test hook(s)"
        );
        assert_eq!(run.who, "helm CLI");
        assert_eq!(of_record_read(&r, "apps").len(), 2);
    }

    #[test]
    fn a_record_by_its_labels_is_an_install_an_upgrade_or_an_uninstall_at_its_time() {
        let stored = |revision: i32, status: Status| crate::frontend::inventory::Stored {
            key: crate::engine::ReleaseKey::new("apps", "web"),
            target_namespace: "apps".into(),
            revision,
            status,
            chart: String::new(),
            chart_version: String::new(),
            app_version: String::new(),
            updated: Some(Timestamp::from_second(1_800_000_900).unwrap()),
            description: String::new(),
            created: Some(Timestamp::from_second(1_800_000_000).unwrap()),
            author: "helm CLI".into(),
        };
        let first = of_stored(&stored(1, Status::Superseded));
        assert_eq!(
            (first.kind, first.at.as_second()),
            (Kind::Install, 1_800_000_000)
        );
        assert_eq!(first.who, "helm CLI");
        assert_eq!(first.what, "revision 1 superseded");
        let next = of_stored(&stored(2, Status::Deployed));
        assert_eq!(
            (next.kind, next.at.as_second()),
            (Kind::Upgrade, 1_800_000_000)
        );
        // Uninstalled: when it was (its record's last write).
        let gone = of_stored(&stored(2, Status::Uninstalled));
        assert_eq!(
            (gone.kind, gone.at.as_second()),
            (Kind::Uninstall, 1_800_000_900)
        );
    }

    #[test]
    fn revisions_say_what_they_were_and_who_made_them() {
        let cases = [
            (
                release(1, Status::Superseded, "Install complete", &["Helm"]),
                Kind::Install,
                "helm CLI",
            ),
            (
                release(
                    2,
                    Status::Superseded,
                    "Upgrade complete",
                    &["helm-controller"],
                ),
                Kind::Upgrade,
                "Flux helm-controller",
            ),
            (
                release(3, Status::Deployed, "Rollback to 1", &["argocd-x"]),
                Kind::Rollback,
                "argocd-x",
            ),
            (
                release(
                    4,
                    Status::Uninstalled,
                    "Uninstallation complete",
                    &["wheelhouse"],
                ),
                Kind::Uninstall,
                "wheelhouse",
            ),
        ];
        for (rel, kind, who) in cases {
            let c = of_revision(&rel, "apps");
            assert_eq!((c.kind, c.who.as_str()), (kind, who), "{c:?}");
            assert_eq!(c.revision, Some(rel.version));
        }
        let mut ours = release(
            5,
            Status::Failed,
            "Upgrade \"web\" failed: boom\nsecond line",
            &[],
        );
        ours.labels.insert(
            crate::helm::release::MADE_BY_LABEL.into(),
            "wheelhouse".into(),
        );
        let c = of_revision(&ours, "apps");
        assert_eq!((c.kind, c.who.as_str()), (Kind::Upgrade, "wheelhouse"));
        assert_eq!(c.what, "revision 5 failed (): Upgrade \"web\" failed: boom");
    }

    #[test]
    fn newest_first_in_every_format() {
        let mut changes: Vec<Change> = (1..=3)
            .map(|v| {
                of_revision(
                    &release(v, Status::Superseded, "Upgrade complete", &["helm"]),
                    "apps",
                )
            })
            .collect();
        newest_first(&mut changes);
        assert_eq!(
            changes
                .iter()
                .map(|c| c.revision.unwrap())
                .collect::<Vec<_>>(),
            [3, 2, 1]
        );
        let mut text = Vec::new();
        write(&changes, Format::Text, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("TIME "), "{text}");
        assert_eq!(text.lines().count(), 4);
        let mut md = Vec::new();
        write(&changes, Format::Markdown, &mut md).unwrap();
        let md = String::from_utf8(md).unwrap();
        assert!(
            md.lines()
                .nth(2)
                .unwrap()
                .contains("| apps/web | upgrade | helm CLI |"),
            "{md}"
        );
        let mut json = Vec::new();
        write(&changes, Format::Json, &mut json).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(json[0]["kind"], "upgrade");
        assert_eq!(json[0]["revision"], 3);
    }
}
