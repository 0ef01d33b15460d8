//! The status line: what happened to each write (pending, done, failed, outcome unknown,
//! landed late), a bulk action reported as a whole, and the banner while the API server
//! does not answer.

use k8s_openapi::jiff::Timestamp;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::Overlay;
use super::draw_input;
use crate::engine::Views;
use crate::frontend::inventory::Others;
use crate::frontend::tui::io::{Expect, LateOutcome};
use crate::frontend::tui::view_model::State;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Information only (nothing was sent).
    Note,
    Pending,
    Done,
    Failed(String),
    /// No answer came: it may still be applied (why). Watched until the object shows it.
    Unknown(String),
    /// A write whose answer never came, seen applied on the object afterwards.
    Landed,
}

/// Feedback for one write: pending, then done or failed with the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    pub id: u64,
    pub what: String,
    pub progress: Progress,
    /// The bulk action this write belongs to (its verb and size), reported as a whole.
    pub group: Option<(u64, String)>,
    /// The cluster it went to, in a fleet (a bulk action over several reports each).
    pub cluster: Option<String>,
    /// When it was noted or last changed; finished notices expire.
    pub at: Timestamp,
    /// For a write whose outcome is unknown: what the object shows once it landed.
    pub watch: Option<Expect>,
}

/// How long after the API server answers again a write of unknown outcome may still not
/// show on its object before the dashboard says it was not applied (it keeps watching, and
/// says so if it lands after all).
pub const UNSEEN_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a finished notice stays on the status line.
pub const NOTICE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The notices of this session's writes, newest last.
#[derive(Default)]
pub struct Notices {
    pub feedback: Vec<Feedback>,
}

/// Notices kept; older ones go.
const KEPT: usize = 50;

impl Notices {
    /// Notes a write (or information) with its id.
    pub fn note(&mut self, id: u64, what: String, progress: Progress, now: Timestamp) {
        self.feedback.push(Feedback {
            id,
            what,
            progress,
            group: None,
            cluster: None,
            at: now,
            watch: None,
        });
        if self.feedback.len() > KEPT {
            self.feedback.remove(0);
        }
    }

    /// Marks a confirmed write pending (held back while its question was open), once.
    pub fn start(&mut self, id: u64, what: String, group: Option<(u64, String)>, now: Timestamp) {
        if !self.feedback.iter().any(|f| f.id == id) {
            self.note(id, what, Progress::Pending, now);
            if let Some(f) = self.feedback.last_mut() {
                f.group = group;
            }
        }
    }

    /// Says which cluster write `id` went to (a fleet's bulk action reports per cluster).
    pub fn in_cluster(&mut self, id: u64, cluster: &str) {
        if let Some(f) = self.feedback.iter_mut().find(|f| f.id == id) {
            f.cluster = Some(cluster.to_owned());
        }
    }

    /// The clock moved on: a write of unknown outcome that the object still does not
    /// show [`UNSEEN_AFTER`] after the API server answers again (`since`) is reported not
    /// applied (and still watched).
    pub fn expire_unknown(&mut self, now: Timestamp, since: Option<Timestamp>) {
        for f in &mut self.feedback {
            let Progress::Unknown(_) = f.progress else {
                continue;
            };
            let from = since.map_or(f.at, |s| s.max(f.at));
            if now.duration_since(from).as_secs() >= UNSEEN_AFTER.as_secs() as i64 {
                let key = f
                    .watch
                    .as_ref()
                    .map(|e| e.key().to_string())
                    .unwrap_or_default();
                f.progress = Progress::Failed(format!(
                    "not applied: the API server answers again and {key} does not show it (still watching; try again if it is still needed)"
                ));
                f.at = now;
            }
        }
    }

    /// Writes of unknown outcome that the objects now show are reported applied.
    pub fn resolve_unknown(&mut self, views: &Views, others: &Others, now: Timestamp) {
        for f in &mut self.feedback {
            let Some(expect) = &f.watch else { continue };
            let shown = expect.landed(views, others);
            if shown {
                f.progress = Progress::Landed;
                f.watch = None;
                f.at = now;
            }
        }
    }

    /// The answer of a write reported outcome unknown came after all.
    pub fn late(&mut self, id: u64, outcome: LateOutcome, now: Timestamp) {
        let Some(f) = self
            .feedback
            .iter_mut()
            .find(|f| f.id == id && f.watch.is_some())
        else {
            return;
        };
        match outcome {
            LateOutcome::Applied => f.progress = Progress::Landed,
            LateOutcome::Refused(e) => f.progress = Progress::Failed(format!("not applied: {e}")),
            LateOutcome::Unknown => return,
        }
        f.watch = None;
        f.at = now;
    }

    /// No answer came for write `id`: watched until `expect` shows on the object.
    pub fn unknown(&mut self, id: u64, why: String, expect: Expect, now: Timestamp) {
        if let Some(f) = self.feedback.iter_mut().find(|f| f.id == id) {
            f.progress = Progress::Unknown(why);
            f.watch = Some(expect);
            f.at = now;
        }
    }

    /// Write `id` was answered.
    pub fn done(&mut self, id: u64, result: &Result<(), String>, now: Timestamp) {
        if let Some(f) = self.feedback.iter_mut().find(|f| f.id == id) {
            f.progress = match result {
                Ok(()) => Progress::Done,
                Err(e) => Progress::Failed(e.clone()),
            };
            f.at = now;
        }
    }

    /// What the status line says now: the newest notice (a bulk action as a whole), or
    /// nothing once a finished one is older than [`NOTICE_TTL`]. `bool`: the text is a
    /// bulk summary that already says how each write ended.
    pub fn notice(&self, now: Timestamp) -> Option<(Progress, String, bool)> {
        let last = self.feedback.last()?;
        let Some((group, label)) = &last.group else {
            let expired = !matches!(last.progress, Progress::Pending | Progress::Unknown(_))
                && now.duration_since(last.at).as_secs() >= NOTICE_TTL.as_secs() as i64;
            return (!expired).then(|| (last.progress.clone(), last.what.clone(), false));
        };
        let members: Vec<&Feedback> = self
            .feedback
            .iter()
            .filter(|f| f.group.as_ref().is_some_and(|(g, _)| g == group))
            .collect();
        let newest = members.iter().map(|f| f.at).max().unwrap_or(now);
        let (pending, unknown, failed) = (
            members
                .iter()
                .filter(|f| f.progress == Progress::Pending)
                .count(),
            members
                .iter()
                .filter(|f| matches!(f.progress, Progress::Unknown(_)))
                .count(),
            members
                .iter()
                .filter(|f| matches!(f.progress, Progress::Failed(_)))
                .count(),
        );
        if pending + unknown == 0
            && now.duration_since(newest).as_secs() >= NOTICE_TTL.as_secs() as i64
        {
            return None;
        }
        // Over several clusters, each says how its writes ended.
        let mut clusters: Vec<&str> = members
            .iter()
            .filter_map(|f| f.cluster.as_deref())
            .collect();
        clusters.sort_unstable();
        clusters.dedup();
        let text = if clusters.len() > 1 {
            let each: Vec<String> = clusters
                .iter()
                .map(|c| {
                    let of: Vec<&Feedback> = members
                        .iter()
                        .copied()
                        .filter(|f| f.cluster.as_deref() == Some(*c))
                        .collect();
                    format!("{c} {}", tally(&of))
                })
                .collect();
            format!(
                "{}: {}",
                label.split(" (").next().unwrap_or(label),
                each.join("; ")
            )
        } else {
            format!("{label}: {}", tally(&members))
        };
        let progress = if pending > 0 {
            Progress::Pending
        } else if unknown > 0 {
            Progress::Unknown(String::new())
        } else if failed == 0 {
            Progress::Done
        } else {
            Progress::Failed(String::new())
        };
        Some((progress, text, true))
    }
}

/// How a set of writes ended: `2 done, 1 pending, 1 failed (apps/x: why)`.
fn tally(members: &[&Feedback]) -> String {
    let count = |p: fn(&Progress) -> bool| members.iter().filter(|f| p(&f.progress)).count();
    let pending = count(|p| *p == Progress::Pending);
    let unknown = count(|p| matches!(p, Progress::Unknown(_)));
    let done = count(|p| matches!(p, Progress::Done | Progress::Landed));
    let failed: Vec<String> = members
        .iter()
        .filter_map(|f| match &f.progress {
            Progress::Failed(e) => Some(format!("{}: {e}", f.what)),
            _ => None,
        })
        .collect();
    let mut text = format!("{done} done");
    if pending > 0 {
        text.push_str(&format!(", {pending} pending"));
    }
    if unknown > 0 {
        text.push_str(&format!(
            ", {unknown} outcome unknown (no answer; they may still be applied, watching)"
        ));
    }
    if !failed.is_empty() {
        text.push_str(&format!(
            ", {} failed ({})",
            failed.len(),
            failed.join("; ")
        ));
    }
    text
}

/// The status line (or, while a `/` or `:` line is open, that line).
/// What the status line shows: the connection, the overlay being typed in, and the
/// writes' notices.
pub struct StatusScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub connection: &'a crate::engine::Connection,
    pub overlay: Option<&'a Overlay>,
    pub stale_for: Option<i64>,
    pub notice: Option<(Progress, String, bool)>,
    pub status: &'a Notices,
}

pub fn draw(f: &mut Frame, app: &StatusScreen<'_>, area: Rect) {
    let t = &app.theme;
    let width = area.width as usize;
    if let (crate::engine::Connection::Disconnected { since, .. }, None) =
        (app.connection, app.overlay)
    {
        let age = app.stale_for.unwrap_or_default();
        let clock = since.strftime("%H:%M:%S UTC");
        let mut banner = format!(
            "⚠ API server unreachable since {clock} ({} ago): retrying the watch; rows show the last known state",
            crate::text::age::coarse(age)
        );
        // A write that got no answer is not hidden by the banner: it may still land.
        if let Some((Progress::Unknown(_), what, _)) = app.notice.clone() {
            banner = format!(
                "⚠ API server unreachable for {} · {what}: outcome unknown, it may still be applied",
                crate::text::age::coarse(age)
            );
        }
        f.render_widget(
            Paragraph::new(cut(
                width,
                banner,
                t.base().fg(t.error).add_modifier(Modifier::BOLD),
            )),
            area,
        );
        return;
    }
    let line = match app.overlay {
        Some(Overlay::Filter(text)) => return draw_input(f, app.theme, area, "/", text),
        Some(Overlay::Command(line)) => return draw_input(f, app.theme, area, ":", &line.text),
        _ => match app.notice.clone() {
            None => Line::raw(""),
            Some((progress, what, summary)) => {
                let pending = app
                    .status
                    .feedback
                    .iter()
                    .filter(|f| f.progress == Progress::Pending)
                    .count();
                let more = if pending > 1 && !summary {
                    format!("  ({pending} pending)")
                } else {
                    String::new()
                };
                match &progress {
                    Progress::Note => cut(width, format!("· {what}{more}"), t.muted()),
                    Progress::Pending if summary => {
                        cut(width, format!("⋯ {what}"), t.state(State::Progressing))
                    }
                    Progress::Pending => cut(
                        width,
                        format!("⋯ {what} (pending){more}"),
                        t.state(State::Progressing),
                    ),
                    Progress::Done if summary => {
                        cut(width, format!("✓ {what}"), t.state(State::Ready))
                    }
                    Progress::Done => cut(
                        width,
                        format!("✓ {what}: done{more}"),
                        t.state(State::Ready),
                    ),
                    Progress::Failed(_) if summary => {
                        cut(width, format!("✗ {what}"), t.base().fg(t.error))
                    }
                    Progress::Failed(e) => {
                        cut(width, format!("✗ {what}: {e}{more}"), t.base().fg(t.error))
                    }
                    Progress::Unknown(_) if summary => {
                        cut(width, format!("⚠ {what}"), t.state(State::Progressing))
                    }
                    Progress::Unknown(why) => cut(
                        width,
                        format!("⚠ {what}: outcome unknown, {why} (watching){more}"),
                        t.state(State::Progressing),
                    ),
                    Progress::Landed => cut(
                        width,
                        format!("✓ {what}: applied after the API server answered again{more}"),
                        t.state(State::Ready),
                    ),
                }
            }
        },
    };
    f.render_widget(Paragraph::new(line).style(t.base()), area);
}

/// One line, cut to `width` with `…` when longer.
fn cut<'a>(width: usize, text: impl AsRef<str>, style: ratatui::style::Style) -> Line<'a> {
    Line::styled(super::fit(text.as_ref(), width), style)
}
