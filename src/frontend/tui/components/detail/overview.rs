//! The detail view's overview tab: conditions, what the release acts as, replicas and
//! workloads, and what config tracking looks after.

use ratatui::text::{Line, Span, Text};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::engine::{Phase, ReleaseView, Role};
use crate::frontend::inventory::Kind;
use crate::frontend::tui::view_model::{
    Fetch, Row, State, Workload, age, left, replicas_of, spinner,
};
use crate::tracking::Selection;

use super::events::events;
use super::history::{history, stored_history};
use super::{Detail, DetailScreen, acts_as, fetched, section};

/// The overview of a Flux HelmRelease or a stored release: state, replicas, its
/// conditions (Flux) or Helm status (stored), rollout with failing pods, history, events.
pub(super) fn other_overview<'a>(app: &DetailScreen<'_>, d: &Detail, row: &Row) -> Text<'a> {
    let t = &app.theme;
    let mut lines = vec![Line::from(vec![
        Span::styled("State    ", t.muted()),
        Span::styled(row.state_text(app.now), t.state(row.state)),
        Span::styled(
            format!(
                "   chart {} {}   revision {}",
                row.chart,
                row.version,
                row.revision.map_or("-".into(), |r| r.to_string())
            ),
            t.base(),
        ),
    ])];
    lines.push(Line::from(vec![
        Span::styled("Managed  ", t.muted()),
        Span::raw(match d.key.kind {
            Kind::Flux => {
                "by Flux's helm-controller (s/S suspend/resume, r reconcile, F force, R reset)"
            }
            _ => "by the helm CLI, no HelmRelease (h then b rolls back, D uninstalls)",
        }),
    ]));
    lines.push(Line::from(vec![
        Span::styled("Message  ", t.muted()),
        Span::raw(row.message.replace('\n', " ")),
    ]));
    lines.extend(release_replica_lines(app, row));
    lines.push(Line::raw(""));
    if d.key.kind == Kind::Flux {
        lines.push(section(app, "Conditions"));
        let hr = app.others.flux.get(&d.key.key);
        let conditions = hr
            .and_then(|hr| hr.status.as_ref())
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        lines.extend(condition_lines(app, conditions));
        if let Some(s) = hr.and_then(|hr| hr.status.as_ref()) {
            lines.push(Line::from(vec![
                Span::styled("  last attempted revision ", t.muted()),
                Span::raw(
                    s.last_attempted_revision
                        .clone()
                        .unwrap_or_else(|| "-".into()),
                ),
                Span::styled("   failures ", t.muted()),
                Span::raw(s.failures.to_string()),
            ]));
        }
    } else {
        lines.push(section(app, "Helm status"));
        lines.extend(
            fetched(app, &d.data.helm, |h| {
                Text::raw(format!(
                    "  {} (revision {}): {}",
                    h.status, h.revision, h.description
                ))
            })
            .lines,
        );
    }
    lines.push(Line::raw(""));
    lines.push(section(app, "Rollout"));
    lines.extend(workload_lines(app, d));
    lines.push(Line::raw(""));
    lines.push(section(app, "History (h for all)"));
    lines.extend(stored_history(app, d).lines.into_iter().take(4));
    lines.push(Line::raw(""));
    lines.push(section(app, "Events (E for all)"));
    lines.extend(events(app, d).lines.into_iter().take(5));
    Text::from(lines)
}

/// A release's replicas by workload, with each one's readiness by the engine's rules.
pub(super) fn release_replica_lines<'a>(app: &DetailScreen<'_>, row: &Row) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(replicas) = app
        .replicas
        .get(&row.release)
        .filter(|r| !r.workloads.is_empty())
    else {
        return vec![Line::from(vec![
            Span::styled("Ready    ", t.muted()),
            Span::styled(
                "- (no Deployment, StatefulSet or DaemonSet seen)",
                t.muted(),
            ),
        ])];
    };
    let (ready, desired) = replicas.total();
    let mut lines = vec![Line::from(vec![
        Span::styled("Ready    ", t.muted()),
        Span::raw(format!("{ready}/{desired} replicas")),
    ])];
    for w in &replicas.workloads {
        let (state, why) = match &w.readiness {
            crate::health::readiness::Readiness::Ready => (State::Ready, String::new()),
            crate::health::readiness::Readiness::InProgress(why) => {
                (State::Progressing, why.clone())
            }
            crate::health::readiness::Readiness::Failed(why) => (State::Failed, why.clone()),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("         {} ", state.symbol()), t.state(state)),
            Span::raw(format!("{}/{} {}/{} ", w.kind, w.name, w.ready, w.desired)),
            Span::styled(why, t.muted()),
        ]));
    }
    lines
}

pub(super) fn condition_lines<'a>(
    app: &DetailScreen<'_>,
    conditions: &[Condition],
) -> Vec<Line<'a>> {
    let t = &app.theme;
    if conditions.is_empty() {
        return vec![Line::styled("  none yet", t.muted())];
    }
    conditions
        .iter()
        .map(|c| {
            let (sym, state) = match (c.type_.as_str(), c.status.as_str()) {
                (_, "True") if c.type_ == "Stalled" || c.type_ == "Reconciling" => {
                    ("!", State::Progressing)
                }
                (_, "True") => ("✓", State::Ready),
                (_, "False") if c.type_ == "Stalled" || c.type_ == "Reconciling" => {
                    ("✓", State::Ready)
                }
                (_, "False") => ("✗", State::Failed),
                _ => ("?", State::Unknown),
            };
            Line::from(vec![
                Span::styled(
                    format!("  {sym} {:<12} {:<7} ", c.type_, c.status),
                    t.state(state),
                ),
                Span::styled(format!("{:<20} ", c.reason), t.base()),
                Span::styled(
                    format!("{:>6}  ", age(c.last_transition_time.0, app.now)),
                    t.muted(),
                ),
                Span::raw(c.message.replace('\n', " ")),
            ])
        })
        .collect()
}

/// The rollout section: each workload of the release's manifest, its counts, its pods
/// that are not ready and why, and its tracked config.
pub(super) fn workload_lines<'a>(app: &DetailScreen<'_>, d: &Detail) -> Vec<Line<'a>> {
    let t = &app.theme;
    let mut lines = Vec::new();
    if let Some(there) = &d.data.read_in {
        lines.push(Line::styled(
            format!(
                "  read in context {}, the cluster of its {}",
                there.context, there.via
            ),
            t.muted(),
        ));
    }
    match &d.data.workloads {
        Fetch::Loading => lines.push(Line::styled("  loading workloads…", t.muted())),
        Fetch::Failed(e) => lines.push(Line::styled(
            format!("  ✗ cannot read workloads: {e}"),
            t.base().fg(t.error),
        )),
        Fetch::Loaded(ws) if ws.is_empty() => lines.push(Line::styled(
            "  no Deployments, StatefulSets or DaemonSets",
            t.muted(),
        )),
        Fetch::Loaded(ws) => {
            for w in ws {
                let ok = w.ready >= w.desired && w.updated >= w.desired && w.failing.is_empty();
                let state = if ok { State::Ready } else { State::Progressing };
                lines.push(Line::from(vec![
                    Span::styled(
                        format!("  {} {:<32} ", state.symbol(), w.object),
                        t.state(state),
                    ),
                    Span::raw(format!(
                        "desired {}  updated {}  ready {}  available {}",
                        w.desired, w.updated, w.ready, w.available
                    )),
                ]));
                for (pod, why) in &w.failing {
                    lines.push(Line::from(vec![
                        Span::styled(format!("      ✗ pod {pod}: "), t.state(State::Failed)),
                        Span::raw(why.clone()),
                    ]));
                }
                lines.extend(tracking_lines(app, w));
            }
        }
    }
    lines
}

pub(super) fn overview<'a>(app: &DetailScreen<'_>, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let t = &app.theme;
    let row = Row::with_replicas(view, app.replicas);
    let hr = &view.release;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("State    ", t.muted()),
            Span::styled(row.state_text(app.now), t.state(row.state)),
            Span::styled(
                format!(
                    "   chart {} {}   revision {}",
                    row.chart,
                    row.version,
                    row.revision.map_or("-".into(), |r| r.to_string())
                ),
                t.base(),
            ),
        ]),
        Line::from(vec![
            Span::styled("Source   ", t.muted()),
            Span::raw(hr.source_text()),
        ]),
        Line::from(vec![
            Span::styled("Phase    ", t.muted()),
            Span::raw(
                if view.live.phase == Phase::Idle && !matches!(*app.role, Role::Leader) {
                    "(the engine runs elsewhere; status below is what it wrote)".to_owned()
                } else {
                    view.live.phase.to_string()
                },
            ),
        ]),
    ];
    // Tenancy in play: say whom everything done for the release is done as.
    if let Some(identity) = acts_as(app, hr) {
        lines.insert(
            2,
            Line::from(vec![
                Span::styled("Acts as  ", t.muted()),
                Span::raw(identity),
            ]),
        );
    }
    lines.extend(replica_lines(app, view, &row));
    if let Some(deadline) = row.deadline {
        let (r, total) = row.wait_progress.unwrap_or((0, 0));
        lines.push(Line::from(vec![
            Span::styled("Wait     ", t.muted()),
            Span::styled(
                format!(
                    "{} {} left · {r}/{total} resources ready",
                    spinner(app.now),
                    crate::text::age::precise(left(deadline, app.now).as_secs() as i64)
                ),
                t.state(State::Progressing),
            ),
        ]));
        // What happens at the deadline, from the release's remediation settings.
        if let Some(then) = &row.if_it_fails {
            lines.push(Line::from(vec![
                Span::styled("Then     ", t.muted()),
                Span::raw(format!("at {}: {then}", deadline.strftime("%H:%M:%S UTC"))),
            ]));
        }
    }
    if hr.spec.suspend {
        lines.push(Line::styled(
            if app.readonly {
                "Suspended: no new actions start"
            } else {
                "Suspended: no new actions start (S resumes)"
            },
            t.state(State::Suspended),
        ));
    }
    lines.push(Line::raw(""));
    lines.push(section(app, "Conditions"));
    let conditions = hr
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    lines.extend(condition_lines(app, conditions));
    lines.push(Line::raw(""));
    lines.push(section(app, "Rollout"));
    if let Some(w) = &view.live.wait {
        for (object, what) in &w.progress.pending {
            lines.push(Line::from(vec![
                Span::styled(format!("  ◐ {object}: "), t.state(State::Progressing)),
                Span::raw(what.clone()),
            ]));
        }
    }
    lines.extend(workload_lines(app, d));
    lines.push(Line::raw(""));
    lines.push(section(app, "History (h for all)"));
    lines.extend(history(app, d, view).lines.into_iter().take(4));
    lines.push(Line::raw(""));
    lines.push(section(app, "Events (E for all)"));
    lines.extend(events(app, d).lines.into_iter().take(5));
    Text::from(lines)
}

/// Ready replicas of the release's workloads: the READY column's sum, then each
/// workload's own count.
pub(super) fn replica_lines<'a>(
    app: &DetailScreen<'_>,
    view: &ReleaseView,
    row: &Row,
) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(replicas) = replicas_of(view, app.replicas) else {
        return vec![Line::from(vec![
            Span::styled("Ready    ", t.muted()),
            Span::styled(
                "- (no Deployment, StatefulSet or DaemonSet seen)",
                t.muted(),
            ),
        ])];
    };
    let (ready, desired) = row.ready.unwrap_or_default();
    let mut lines = vec![Line::from(vec![
        Span::styled("Ready    ", t.muted()),
        Span::raw(format!("{ready}/{desired} replicas")),
    ])];
    let release_ns = view.release.target_namespace();
    for w in &replicas.workloads {
        let state = if w.ready >= w.desired {
            State::Ready
        } else {
            State::Progressing
        };
        let object = if w.namespace == release_ns {
            format!("{}/{}", w.kind, w.name)
        } else {
            format!("{}/{}/{}", w.kind, w.namespace, w.name)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("         {} ", state.symbol()), t.state(state)),
            Span::raw(format!("{object} {}/{}", w.ready, w.desired)),
        ]));
    }
    lines
}

/// What config tracking looks after in one workload: each consumed object and whether it
/// exists, and whether the pods wait behind the config-pending gate.
pub(super) fn tracking_lines<'a>(app: &DetailScreen<'_>, w: &Workload) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(tracked) = &w.tracking else {
        return vec![Line::styled("      config not tracked", t.muted())];
    };
    let hash = tracked
        .hash
        .as_deref()
        .map(|h| format!(" (hash {})", &h[..h.len().min(12)]))
        .unwrap_or_default();
    let mut lines = vec![Line::styled(
        format!("      config tracked{hash}"),
        t.muted(),
    )];
    if tracked.objects.is_empty() {
        lines.push(Line::styled(
            "        consumes no ConfigMap or Secret",
            t.muted(),
        ));
    }
    for o in &tracked.objects {
        let (symbol, state) = match (o.exists, o.object.optional) {
            (true, _) => ("✓", State::Ready),
            (false, true) => ("·", State::Suspended),
            (false, false) => ("✗", State::Failed),
        };
        let mut spans = vec![
            Span::styled(format!("        {symbol} "), t.state(state)),
            Span::raw(format!("{}/{}", o.object.kind, o.object.name)),
        ];
        if let Selection::Keys(keys) = &o.object.selection {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            spans.push(Span::styled(
                format!("  keys {}", keys.join(", ")),
                t.muted(),
            ));
        }
        if o.object.optional {
            spans.push(Span::styled("  optional", t.muted()));
        }
        if !o.exists {
            spans.push(Span::styled("  missing", t.state(state)));
        }
        lines.push(Line::from(spans));
    }
    if tracked.gated || w.held > 0 {
        let waiting: Vec<String> = tracked
            .objects
            .iter()
            .filter(|o| !o.exists && !o.object.optional)
            .map(|o| format!("{}/{}", o.object.kind, o.object.name))
            .collect();
        let pods = match w.held {
            1 => "1 pod".to_owned(),
            n => format!("{n} pods"),
        };
        let why = if waiting.is_empty() {
            String::new()
        } else {
            format!(" until {} exists", waiting.join(", "))
        };
        lines.push(Line::from(vec![
            Span::styled("      ⏸ gated: ", t.state(State::Progressing)),
            Span::raw(format!(
                "{pods} held by {}{why}",
                crate::tracking::CONFIG_PENDING_GATE
            )),
        ]));
    }
    lines
}
