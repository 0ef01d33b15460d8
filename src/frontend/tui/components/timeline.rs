//! The Timeline view (`T`, `:timeline`): every change to any release the table can list,
//! newest first (see `crate::frontend::timeline`), built from what the dashboard already watches
//! (the records' labels, the HelmReleases' kept changes) again as they change; the
//! revisions on screen are read whole for what only the record says (upgrade or
//! rollback, chart, description). `/` filters (namespace, release, kind, who or text),
//! `enter` opens the diff of a revision's change.

use std::collections::{HashMap, HashSet};

use k8s_openapi::jiff::Timestamp;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{Look, fit};
use crate::engine::ReleaseKey;
use crate::frontend::timeline::Change;
use crate::frontend::tui::view_model::Cluster;
use crate::helm::release::Status;

/// A record as read whole: of which cluster (`None`: the dashboard's own), which
/// revision, at which status (a new status is read again).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordRef {
    pub cluster: Option<Cluster>,
    pub key: ReleaseKey,
    pub version: i32,
    pub status: Status,
}

#[derive(Default)]
pub struct TimelineView {
    /// Every change in the window, newest first, as last loaded.
    pub rows: Vec<Change>,
    /// The row under the cursor, among the visible ones.
    pub selected: usize,
    pub filter: String,
    /// When the rows were last loaded (`None`: never yet).
    pub loaded_at: Option<Timestamp>,
    /// Records read whole, as their rows then show (the revision's first).
    pub read: HashMap<RecordRef, Vec<Change>>,
    /// Records asked for (read or being read; one that cannot be read keeps its row).
    pub asked: HashSet<RecordRef>,
    /// Rows changed by records read since they were sorted.
    pub unsorted: bool,
    /// The change the cursor was on before the rows were changed by records read: the
    /// next [`Self::settle`] puts it back there (a row read whole replaces the one its
    /// labels gave, so the index alone would land on its neighbour).
    pub follow: Option<Change>,
    /// The namespaces the rows were built for (the table's).
    pub built_for: Option<crate::cluster::client::Scope>,
    /// What the rows were last built from (a fingerprint of the inventories' and the
    /// engines' snapshots of every cluster shown), and when.
    pub built_from: Option<(u64, Timestamp)>,
    /// The dashboard's own cluster, named when the rows span a fleet (a CLUSTER column
    /// then shows, and a row of no cluster is of this one).
    pub own_cluster: Option<Cluster>,
    /// Each cluster's audit Events (freezes, thaws, the dashboards' writes), as last
    /// listed: Events are not watched, so they are listed again while the view is open.
    pub audited: HashMap<Option<Cluster>, Vec<Change>>,
    /// When the audit Events were last asked for.
    pub audit_asked: Option<Timestamp>,
}

/// What `/` asks of a row: `cluster:NAME` (its cluster; several: any of them), `ns:NAME`
/// (its namespace; several: any of them), `kind:KIND`
/// (its kind of change: `kind:upgrade`, `kind:config-rollout`; several: any of them),
/// `since:DURATION` (within that long: `since:15m`, `since:2h`), and words, each of which
/// must appear in its namespace/release, kind, who or text (any case).
#[derive(Debug, Default, PartialEq)]
struct Filter {
    clusters: Vec<String>,
    namespaces: Vec<String>,
    kinds: Vec<String>,
    since: Option<Timestamp>,
    words: Vec<String>,
}

impl Filter {
    /// `now`: when the rows were built (what `since:` counts back from).
    fn parse(text: &str, now: Option<Timestamp>) -> Self {
        let mut f = Filter::default();
        for token in text.split_whitespace() {
            let lower = token.to_lowercase();
            if let Some(cluster) = lower.strip_prefix("cluster:") {
                f.clusters.push(cluster.to_owned());
            } else if let Some(ns) = lower.strip_prefix("ns:") {
                f.namespaces.push(ns.to_owned());
            } else if let Some(kind) = lower.strip_prefix("kind:") {
                f.kinds.push(kind.to_owned());
            } else if let Some(since) = lower.strip_prefix("since:")
                && let (Ok(d), Some(now)) = (since.parse::<crate::api::Duration>(), now)
            {
                f.since = now.checked_sub(d.as_std()).ok();
            } else {
                f.words.push(lower);
            }
        }
        f
    }

    /// `own`: the cluster of a row that names none.
    fn keeps(&self, c: &Change, own: Option<&str>) -> bool {
        let cluster = c.cluster.as_deref().or(own).unwrap_or_default();
        if !self.clusters.is_empty()
            && !self
                .clusters
                .iter()
                .any(|n| n.eq_ignore_ascii_case(cluster))
        {
            return false;
        }
        if !self.namespaces.is_empty() && !self.namespaces.contains(&c.namespace) {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| k == c.kind.label()) {
            return false;
        }
        if self.since.is_some_and(|since| c.at < since) {
            return false;
        }
        if self.words.is_empty() {
            return true;
        }
        let text = format!(
            "{cluster} {}/{} {} {} {}",
            c.namespace,
            c.release,
            c.kind.label(),
            c.who,
            c.what
        )
        .to_lowercase();
        self.words.iter().all(|w| text.contains(w.as_str()))
    }
}

impl TimelineView {
    /// The rows the filter keeps (see [`Filter`]).
    pub fn visible(&self) -> Vec<&Change> {
        if self.filter.trim().is_empty() {
            return self.rows.iter().collect();
        }
        let filter = Filter::parse(&self.filter, self.loaded_at);
        let own = self.own_cluster.as_deref();
        self.rows.iter().filter(|c| filter.keeps(c, own)).collect()
    }

    /// New rows from a load: the cursor stays on the change it was on (new ones appear
    /// above it), or on the top row.
    pub fn loaded(&mut self, rows: Vec<Change>, at: Timestamp) {
        let kept = self.follow.take().or_else(|| self.current().cloned());
        self.rows = rows;
        self.loaded_at = Some(at);
        self.selected = kept
            .and_then(|k| self.visible().iter().position(|c| **c == k))
            .unwrap_or(0);
    }

    /// A record read whole: its row says what the record says, at its time to the
    /// nanosecond (its labels give the second only: a change kept in status the same
    /// second sorts against it rightly only so). The rows are sorted again at the next
    /// [`Self::settle`].
    pub fn record_read(&mut self, record: RecordRef, read: Option<Vec<Change>>) {
        let Some(read) = read.filter(|r| !r.is_empty()) else {
            return;
        };
        let RecordRef {
            cluster,
            key,
            version,
            ..
        } = &record;
        let cluster = cluster.as_deref().map(str::to_owned);
        let read: Vec<Change> = read
            .into_iter()
            .map(|r| Change {
                cluster: cluster.clone(),
                ..r
            })
            .collect();
        let of_record = |r: &Change| {
            r.cluster == cluster
                && r.revision == Some(*version)
                && r.namespace == key.namespace
                && r.release == key.name
                && (r.kind.is_revision() || r.kind == crate::frontend::timeline::Kind::Test)
        };
        // The cursor's change, or the record's row that replaces it.
        if self.follow.is_none()
            && let Some(current) = self.current().cloned()
        {
            self.follow = Some(if of_record(&current) {
                read.iter()
                    .find(|r| r.kind == current.kind)
                    .unwrap_or(&read[0])
                    .clone()
            } else {
                current
            });
        }
        // Its rows as the record says them, in place of those its labels gave.
        self.rows.retain(|r| !of_record(r));
        self.rows.extend(read.iter().cloned());
        self.unsorted = true;
        self.read.insert(record, read);
    }

    /// `cluster`'s audit Events listed: the rows are built again with them at the next
    /// turn.
    pub fn audited_in(&mut self, cluster: Option<Cluster>, changes: Vec<Change>) {
        let name = cluster.as_deref().map(str::to_owned);
        let changes = changes
            .into_iter()
            .map(|c| Change {
                cluster: name.clone(),
                ..c
            })
            .collect();
        if self.audited.get(&cluster) != Some(&changes) {
            self.audited.insert(cluster, changes);
            self.built_from = None;
        }
    }

    /// Sorts the rows again after records were read; the cursor stays on its change.
    pub fn settle(&mut self) {
        if !std::mem::take(&mut self.unsorted) {
            return;
        }
        let kept = self.follow.take().or_else(|| self.current().cloned());
        crate::frontend::timeline::newest_first(&mut self.rows);
        self.selected = kept
            .and_then(|k| self.visible().iter().position(|c| **c == k))
            .unwrap_or(0);
    }

    /// The revisions on the screen `height` rows tall that are not read whole nor asked
    /// for yet (marked asked).
    pub fn to_read(
        &mut self,
        height: usize,
        status_of: impl Fn(Option<&str>, &ReleaseKey, i32) -> Option<Status>,
    ) -> Vec<RecordRef> {
        let first = self.selected.saturating_sub(height.saturating_sub(1));
        let wanted: Vec<RecordRef> = self
            .visible()
            .iter()
            .skip(first)
            .take(height)
            .filter(|c| c.kind.is_revision())
            .filter_map(|c| {
                let key = ReleaseKey::new(c.namespace.clone(), c.release.clone());
                let version = c.revision?;
                let status = status_of(c.cluster.as_deref(), &key, version)?;
                Some(RecordRef {
                    cluster: c.cluster.as_deref().map(Cluster::from),
                    key,
                    version,
                    status,
                })
            })
            .filter(|r| !self.asked.contains(r))
            .collect();
        self.asked.extend(wanted.iter().cloned());
        wanted
    }

    pub fn current(&self) -> Option<&Change> {
        self.visible().get(self.selected).copied()
    }

    pub fn set_filter(&mut self, filter: String) {
        self.filter = filter;
        self.selected = 0;
    }

    /// Moves the cursor by `by` rows (negative: up), within the visible rows.
    pub fn step(&mut self, by: isize) {
        let last = self.visible().len().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(by).min(last);
    }

    pub fn bottom(&mut self) {
        self.selected = self.visible().len().saturating_sub(1);
    }
}

pub fn draw(f: &mut Frame, look: Look<'_>, v: &TimelineView, area: Rect) {
    let t = look.theme;
    let visible = v.visible();
    let mut title = match v.loaded_at {
        None => " Timeline · loading… ".to_owned(),
        Some(_) => format!(" Timeline · {} changes, newest first ", visible.len()),
    };
    if !v.filter.is_empty() {
        title.push_str(&format!("(filter: {}) ", v.filter));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(title, t.header()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let height = inner.height as usize;
    if height == 0 {
        return;
    }
    let width = inner.width as usize;
    let release_width = visible
        .iter()
        .map(|c| c.namespace.len() + c.release.len() + 1)
        .max()
        .unwrap_or(7)
        .clamp(7, 32);
    let who_width = visible
        .iter()
        .map(|c| c.who.chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 20);
    // Across a fleet, each row's cluster first (a row of none is the dashboard's own).
    let own = v.own_cluster.as_deref();
    let cluster_width = own.map(|own| {
        visible
            .iter()
            .map(|c| c.cluster.as_deref().unwrap_or(own).chars().count())
            .max()
            .unwrap_or(0)
            .clamp(7, 20)
    });
    let row = |cluster: &str, time: &str, release: &str, kind: &str, who: &str, what: &str| {
        let cluster = match cluster_width {
            Some(w) => format!("{:<w$} ", fit(cluster, w)),
            None => String::new(),
        };
        let head = format!(
            "{cluster}{:<8} {:<rw$} {:<15} {:<ww$} ",
            time,
            fit(release, release_width),
            kind,
            fit(who, who_width),
            rw = release_width,
            ww = who_width
        );
        let rest = width.saturating_sub(head.chars().count());
        fit(&format!("{head}{}", fit(what, rest)), width)
    };
    let mut lines = vec![Line::styled(
        row("CLUSTER", "AGE", "RELEASE", "KIND", "WHO", "WHAT"),
        t.header(),
    )];
    // The window of rows that keeps the cursor in view.
    let rows_shown = height - 1;
    let first = v.selected.saturating_sub(rows_shown.saturating_sub(1));
    for (i, c) in visible.iter().enumerate().skip(first).take(rows_shown) {
        let text = row(
            c.cluster.as_deref().or(own).unwrap_or_default(),
            &crate::text::age::since(c.at, look.now),
            &format!("{}/{}", c.namespace, c.release),
            c.kind.label(),
            &c.who,
            &c.what,
        );
        lines.push(if i == v.selected {
            Line::styled(text, t.selected())
        } else {
            Line::raw(text)
        });
    }
    if visible.is_empty() && v.loaded_at.is_some() {
        lines.push(Line::raw(if v.rows.is_empty() {
            "no changes in the last 24 hours"
        } else {
            "no change matches the filter"
        }));
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::timeline::Kind;

    fn change(release: &str, kind: Kind, who: &str, second: i64) -> Change {
        Change {
            cluster: None,
            at: Timestamp::from_second(1_800_000_000 + second).unwrap(),
            namespace: "apps".into(),
            release: release.into(),
            kind,
            what: format!("{} of {release}", kind.label()),
            who: who.into(),
            revision: Some(1),
        }
    }

    #[test]
    fn the_filter_keeps_rows_with_every_word_and_the_cursor_follows_its_change() {
        let mut v = TimelineView::default();
        let now = Timestamp::from_second(1_800_000_100).unwrap();
        v.loaded(
            vec![
                change("web", Kind::Upgrade, "wheelhouse", 3),
                change("cli", Kind::Upgrade, "helm CLI", 2),
                change("web", Kind::Install, "wheelhouse", 1),
            ],
            now,
        );
        v.step(1);
        assert_eq!(v.current().unwrap().release, "cli");
        // A newer change arrives: the cursor stays on the cli upgrade.
        let mut rows = vec![change("web", Kind::Suspend, "on-call", 4)];
        rows.extend(v.rows.clone());
        v.loaded(rows, now);
        assert_eq!(v.current().unwrap().release, "cli");
        v.set_filter("web WHEELHOUSE".into());
        assert_eq!(v.visible().len(), 2);
        v.set_filter("helm upgrade".into());
        assert_eq!(v.visible().len(), 1);
        v.step(5);
        assert_eq!(v.selected, 0);
    }

    /// The CI failure of 2026-12-01: the cursor on a row its labels gave, that row read
    /// whole (the record's row replaces it) moved the cursor to the row below, and
    /// `enter` opened the wrong revision's diff.
    #[test]
    fn a_row_read_whole_keeps_the_cursor_on_its_change() {
        let mut v = TimelineView::default();
        let now = Timestamp::from_second(1_800_000_100).unwrap();
        let mut upgrade = change("cli", Kind::Upgrade, "helm CLI", 3);
        upgrade.revision = Some(2);
        v.loaded(
            vec![
                upgrade.clone(),
                change("web", Kind::Install, "wheelhouse", 2),
                change("cli", Kind::Install, "helm CLI", 1),
            ],
            now,
        );
        assert_eq!(v.current(), Some(&upgrade));
        let mut read = upgrade.clone();
        read.at =
            Timestamp::from_second(1_800_000_003).unwrap() + std::time::Duration::from_millis(250);
        read.what = "revision 2 deployed (hello 0.1.0): Upgrade complete".into();
        let key = ReleaseKey::new("apps", "cli");
        let record = |version, status| RecordRef {
            cluster: None,
            key: key.clone(),
            version,
            status,
        };
        v.record_read(record(2, Status::Deployed), Some(vec![read.clone()]));
        v.settle();
        assert_eq!(v.current(), Some(&read));
        // A record of another row read: the cursor stays where it was.
        let mut install = change("cli", Kind::Install, "helm CLI", 1);
        install.what = "revision 1 superseded (hello 0.1.0): Install complete".into();
        v.record_read(record(1, Status::Superseded), Some(vec![install]));
        v.settle();
        assert_eq!(v.current(), Some(&read));
    }

    #[test]
    fn the_filter_narrows_by_namespace_kind_and_time_window_beside_words() {
        let now = Timestamp::from_second(1_800_000_100).unwrap();
        let mut other = change("web", Kind::Upgrade, "wheelhouse", 95);
        other.namespace = "shop".into();
        let mut v = TimelineView::default();
        v.loaded(
            vec![
                other,
                change("web", Kind::ConfigRollout, "wheelhouse", 90),
                change("cli", Kind::Upgrade, "helm CLI", 40),
                change("web", Kind::Install, "wheelhouse", 1),
            ],
            now,
        );
        let shown = |v: &TimelineView| -> Vec<(String, &'static str)> {
            v.visible()
                .iter()
                .map(|c| (c.namespace.clone(), c.kind.label()))
                .collect()
        };
        v.set_filter("ns:apps".into());
        assert_eq!(shown(&v).len(), 3);
        v.set_filter("kind:upgrade".into());
        assert_eq!(
            shown(&v),
            [("shop".into(), "upgrade"), ("apps".into(), "upgrade")]
        );
        v.set_filter("kind:upgrade kind:config-rollout ns:apps".into());
        assert_eq!(
            shown(&v),
            [
                ("apps".into(), "config-rollout"),
                ("apps".into(), "upgrade")
            ]
        );
        // The last 90 s of the load at 100 s: from 10 s on.
        v.set_filter("since:90s ns:apps".into());
        assert_eq!(
            shown(&v),
            [
                ("apps".into(), "config-rollout"),
                ("apps".into(), "upgrade")
            ]
        );
        v.set_filter("since:90s helm".into());
        assert_eq!(shown(&v), [("apps".into(), "upgrade")]);
    }

    #[test]
    fn draws_newest_first_with_who_made_each_change() {
        let theme = crate::frontend::tui::theme::Theme::builtin("dark").unwrap();
        let now = Timestamp::from_second(1_800_000_100).unwrap();
        let look = Look {
            theme: &theme,
            now,
            readonly: false,
        };
        let mut v = TimelineView::default();
        v.loaded(
            vec![
                change("web", Kind::Suspend, "on-call", 90),
                change("cli", Kind::Upgrade, "helm CLI", 40),
            ],
            now,
        );
        let backend = ratatui::backend::TestBackend::new(80, 6);
        let mut terminal = ratatui::Terminal::new(backend).unwrap();
        terminal.draw(|f| draw(f, look, &v, f.area())).unwrap();
        let screen: Vec<String> = (0..6)
            .map(|y| {
                (0..80)
                    .map(|x| terminal.backend().buffer()[(x, y)].symbol().to_owned())
                    .collect::<String>()
            })
            .collect();
        assert!(
            screen[0].contains("Timeline · 2 changes, newest first"),
            "{screen:#?}"
        );
        assert!(
            screen[1].contains("AGE") && screen[1].contains("WHO"),
            "{screen:#?}"
        );
        assert!(
            screen[2].contains("apps/web")
                && screen[2].contains("suspend")
                && screen[2].contains("on-call"),
            "{screen:#?}"
        );
        assert!(
            screen[3].contains("apps/cli")
                && screen[3].contains("upgrade")
                && screen[3].contains("helm CLI"),
            "{screen:#?}"
        );
    }
}
