//! The dashboard's state: what every view shares (the cluster context, the releases, the
//! clock, the theme) and its components (the table, the detail view, the values editor,
//! the overlays, the status line), with the routing of keys and IO results to them. Pure:
//! it never performs IO; it returns [`Effect`]s the run loop hands to tasks, and takes
//! their results back as [`IoResult`]s.

mod changes;
pub mod fleet;
mod freeze;
mod io_results;
mod keys;
mod timeline_rows;
mod writes;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use tui_textarea::TextArea;

use super::components::changes::ChangesView;
use super::components::command::{self, CommandLine, Completion, Typed};
use super::components::confirm::Answer;
use super::components::detail::{Detail, Tab};
use super::components::editor::{Edited, Editor};
use super::components::line_input;
use super::components::logs::{LogSource, LogView};
use super::components::status_line::{Notices, Progress};
use super::components::table::{ReleaseTable, Source};
use super::effect::{Effect, IoResult};
use super::favourites::Favourites;
use super::io::DetailTarget;
use super::keymap::{self, Action, Context};
use super::theme::Theme;
use super::view_model::{Row, RowKey};
use crate::cluster::client::Scope;
use crate::engine::{ReleaseKey, Role, Views, changed_keys};
use crate::frontend::inventory::{Kind, Others};
use crate::health::replicas::ReplicaMap;

/// What sits over the view in front and takes the keys first.
pub use crate::frontend::tui::components::Overlay;
pub use writes::audit_of;
pub use writes::effect_id as write_id;

pub struct App {
    pub context: String,
    /// The namespaces the table shows: a view filter, never what the engine reconciles.
    pub scope: Scope,
    /// What the in-process engine reconciles (and its watch covers), fixed per session.
    pub coverage: crate::engine::Coverage,
    /// The tenancy policy of the engine: whom each release acts as (detail view).
    pub tenancy: crate::cluster::tenancy::Policy,
    pub readonly: bool,
    pub theme: Theme,
    pub role: Role,
    /// Whether the API server answers the HelmRelease watch.
    pub connection: crate::engine::Connection,
    /// When the API server answered again after it last did not.
    pub answering_since: Option<Timestamp>,
    pub now: Timestamp,
    pub views: Arc<Views>,
    /// How many of `views` another engine reconciles (the header says so), kept as views
    /// change rather than counted at every frame.
    pub elsewhere: usize,
    /// The freeze record of every frozen release in view (wheelhouse and Flux), kept up
    /// to date per changed release: what the freeze banner says.
    pub frozen: std::collections::BTreeMap<RowKey, crate::engine::FreezeRecord>,
    /// Since when each release suspended outside any freeze has been, where the cluster
    /// says: the forgotten suspends the banner counts.
    pub suspended_since: std::collections::BTreeMap<RowKey, Timestamp>,
    /// Ready and desired replicas of every Helm release's workloads (READY column).
    pub replicas: Arc<ReplicaMap>,
    /// Flux HelmReleases and stored Helm releases.
    pub others: Arc<Others>,
    /// The stored releases (storage namespace, release name) a wheelhouse or Flux
    /// HelmRelease manages, with how many do: shown once, under their manager.
    pub managed: HashMap<ReleaseKey, usize>,
    /// The stored release each managing HelmRelease names, to update `managed` one
    /// manager at a time.
    manages: HashMap<RowKey, ReleaseKey>,
    pub table: ReleaseTable,
    pub detail: Option<Detail>,
    /// A pod's logs, in front of the detail view.
    pub logs: Option<LogView>,
    pub editor: Option<Editor>,
    /// A diff or what a write will change, in front of every view.
    pub changes: Option<ChangesView>,
    /// The Timeline, in front of the table and the detail view.
    pub timeline: Option<crate::frontend::tui::components::timeline::TimelineView>,
    /// The operator, as the API server knows them: pins name them.
    pub user: String,
    pub overlay: Option<Overlay>,
    pub status: Notices,
    /// Drafts of values edits left with esc, so nothing typed is lost: the whole text
    /// area, so reopening also puts back the cursor, the scroll position and undo; and
    /// the values the draft started from.
    pub drafts: HashMap<ReleaseKey, (TextArea<'static>, serde_json::Value)>,
    /// Rows per page, from the last draw.
    pub page: usize,
    pub switching: Option<String>,
    /// Namespace favourites of every context (keys `1`..`9`), kept in the config dir.
    pub favourites: Favourites,
    /// The cluster's namespaces, when this identity may list them (else empty).
    pub cluster_namespaces: Vec<String>,
    /// The kubeconfig's contexts, for `:ctx` completion.
    pub contexts: Vec<String>,
    /// Where is it? The release x cluster grid, in front of the table.
    pub grid: Option<crate::frontend::tui::components::grid::GridView>,
    /// The fleet's other clusters (empty on one cluster).
    pub fleet: crate::frontend::tui::fleet_model::Fleet,
    /// Saving the favourites failed once this session (said once, not on every switch).
    favourites_unsaved: bool,
    next_id: u64,
}

impl App {
    pub fn new(
        context: String,
        scope: Scope,
        readonly: bool,
        theme: Theme,
        now: Timestamp,
    ) -> Self {
        Self {
            context,
            coverage: crate::engine::Coverage::new(scope.clone(), None),
            tenancy: crate::cluster::tenancy::Policy::default(),
            scope,
            readonly,
            theme,
            role: Role::Unknown,
            connection: crate::engine::Connection::Connected,
            answering_since: None,
            now,
            views: Arc::default(),
            elsewhere: 0,
            frozen: Default::default(),
            suspended_since: Default::default(),
            replicas: Arc::default(),
            others: Arc::default(),
            managed: HashMap::new(),
            manages: HashMap::new(),
            table: ReleaseTable::default(),
            detail: None,
            logs: None,
            editor: None,
            changes: None,
            timeline: None,
            user: String::new(),
            overlay: None,
            status: Notices::default(),
            drafts: HashMap::new(),
            page: 10,
            switching: None,
            favourites: Favourites::default(),
            cluster_namespaces: Vec::new(),
            contexts: Vec::new(),
            grid: None,
            fleet: crate::frontend::tui::fleet_model::Fleet::default(),
            favourites_unsaved: false,
            next_id: 0,
        }
    }

    /// What the dashboard does once it runs: the namespace in view joins the favourites,
    /// and the completions load.
    pub fn on_start(&mut self) -> Vec<Effect> {
        let mut effects = self.remember_scope();
        effects.push(Effect::LoadCompletions);
        effects.push(Effect::LoadUser);
        effects
    }

    /// The namespace in view joins this context's favourites (a save when that changed
    /// them).
    fn remember_scope(&mut self) -> Vec<Effect> {
        match &self.scope {
            Scope::Namespace(ns) if self.favourites.visit(&self.context, ns) => {
                vec![Effect::SaveFavourites(self.favourites.clone())]
            }
            _ => Vec::new(),
        }
    }

    /// The namespaces `:ns` completes: the releases' and, when it could be listed, the
    /// cluster's.
    pub fn known_namespaces(&self) -> BTreeSet<String> {
        self.views
            .keys()
            .chain(self.others.flux.keys())
            .chain(self.others.helm.keys())
            .map(|k| k.namespace.clone())
            .chain(self.cluster_namespaces.iter().cloned())
            .collect()
    }

    /// What the command line completes for `line`.
    pub fn completions(&self, line: &str) -> Completion {
        command::completions(line, self.known_namespaces(), &self.contexts)
    }

    /// The table, and what its rows are made from.
    fn table_and_source(&mut self) -> (&mut ReleaseTable, Source<'_>) {
        let source = Source {
            views: &self.views,
            others: &self.others,
            managed: &self.managed,
            replicas: &self.replicas,
            scope: &self.scope,
            forgotten_before: self
                .now
                .checked_sub(crate::frontend::tui::suspension::FORGOTTEN_AFTER)
                .unwrap_or(self.now),
            home: &self.context,
            fleet: &self.fleet,
        };
        (&mut self.table, source)
    }

    /// Every row of the table again (the filter, scope or sort changed).
    fn refresh_rows(&mut self) {
        let (table, source) = self.table_and_source();
        table.refresh(&source);
    }

    /// Keeps `row`'s freeze record, or since when it is suspended outside a freeze (or
    /// neither), for the banner.
    fn note_frozen(
        &mut self,
        row: &RowKey,
        record: Option<crate::engine::FreezeRecord>,
        suspension: Option<crate::frontend::tui::suspension::Suspension>,
    ) {
        self.frozen.remove(row);
        self.suspended_since.remove(row);
        match (record, suspension.and_then(|s| s.since)) {
            (Some(r), _) => {
                self.frozen.insert(row.clone(), r);
            }
            (None, Some(since)) => {
                self.suspended_since.insert(row.clone(), since);
            }
            (None, None) => {}
        }
    }

    /// Whether `row` is in the namespaces in view (the banner speaks of those only).
    fn in_view(&self, row: &RowKey) -> bool {
        match &self.scope {
            Scope::All => true,
            Scope::Namespace(ns) => *ns == row.key.namespace,
        }
    }

    /// The freeze records of the releases in view.
    pub fn frozen_in_view(
        &self,
    ) -> std::collections::BTreeMap<RowKey, crate::engine::FreezeRecord> {
        self.frozen
            .iter()
            .filter(|(row, _)| self.in_view(row))
            .map(|(row, r)| (row.clone(), r.clone()))
            .collect()
    }

    /// How many releases in view have been suspended past the threshold without a freeze.
    pub fn forgotten_suspends(&self) -> usize {
        let before = self
            .now
            .checked_sub(crate::frontend::tui::suspension::FORGOTTEN_AFTER)
            .unwrap_or(self.now);
        self.suspended_since
            .iter()
            .filter(|(row, since)| self.in_view(row) && **since < before)
            .count()
    }

    /// Takes a new snapshot of the views. Only the releases that changed since the last
    /// snapshot are looked at (the persistent maps' `diff` skips what they share), and
    /// each moves to its sorted place, so thousands of releases cost nothing per event.
    pub fn set_views(&mut self, views: Arc<Views>) {
        let old = std::mem::replace(&mut self.views, views);
        let keys = changed_keys(&old, &self.views);
        let elsewhere = |views: &Views, k: &ReleaseKey| {
            views.get(k).is_some_and(|v| v.elsewhere.is_some()) as usize
        };
        for k in &keys {
            self.elsewhere =
                (self.elsewhere + elsewhere(&self.views, k)).saturating_sub(elsewhere(&old, k));
        }
        let mut changed: Vec<RowKey> = keys.into_iter().map(RowKey::wheelhouse).collect();
        for row in &changed {
            let view = self.views.get(&row.key);
            let record = view.and_then(|v| crate::engine::FreezeRecord::of(&v.release.metadata));
            let suspension = view
                .and_then(|v| crate::frontend::tui::suspension::of_wheelhouse(&v.release))
                .filter(|_| {
                    view.and_then(|v| v.release.status.as_ref())
                        .is_none_or(|s| s.pinned.is_none())
                });
            self.note_frozen(row, record, suspension);
        }
        let moved = self.remanage(&changed);
        changed.extend(moved);
        let (table, source) = self.table_and_source();
        table.update(&source, &changed);
        self.status
            .resolve_unknown(&self.views, &self.others, self.now);
    }

    /// Takes a new snapshot of the Flux HelmReleases and stored Helm releases: like
    /// the views, only the rows that changed move.
    pub fn set_others(&mut self, others: Arc<Others>) {
        let old = std::mem::replace(&mut self.others, others);
        let of = |kind: Kind| move |k: ReleaseKey| RowKey::new(kind, k);
        let mut changed: Vec<RowKey> = changed_keys(&old.flux, &self.others.flux)
            .into_iter()
            .map(of(Kind::Flux))
            .chain(
                changed_keys(&old.helm, &self.others.helm)
                    .into_iter()
                    .map(of(Kind::Helm)),
            )
            .collect();
        // A chart source that changed changes the rows of the releases on it.
        if old.chart_sources != self.others.chart_sources {
            changed.extend(
                self.others
                    .flux
                    .iter()
                    .filter(|(_, hr)| hr.spec.chart_ref.is_some())
                    .map(|(k, _)| RowKey::new(Kind::Flux, k.clone())),
            );
        }
        let flux: Vec<RowKey> = changed
            .iter()
            .filter(|k| k.kind == Kind::Flux)
            .cloned()
            .collect();
        for row in &flux {
            let hr = self.others.flux.get(&row.key);
            let record = hr.and_then(|hr| crate::engine::FreezeRecord::of(&hr.metadata));
            let suspension = hr.and_then(|hr| crate::frontend::tui::suspension::of_flux(hr));
            self.note_frozen(row, record, suspension);
        }
        changed.extend(self.remanage(&flux));
        let (table, source) = self.table_and_source();
        table.update(&source, &changed);
        self.status
            .resolve_unknown(&self.views, &self.others, self.now);
    }

    /// Which stored release each of the changed HelmReleases `managers` manages now
    /// (only those are looked at, so a snapshot costs what changed in it); returns the
    /// rows of the stored releases whose manager came or went.
    fn remanage(&mut self, managers: &[RowKey]) -> Vec<RowKey> {
        crate::frontend::tui::fleet_model::remanage(
            &self.views,
            &self.others,
            &mut self.managed,
            &mut self.manages,
            managers,
            None,
        )
    }

    /// The row under the cursor (in the detail view: the release shown), if it is in
    /// the table.
    pub fn selected_row(&self) -> Option<&Row> {
        match &self.detail {
            Some(d) => self.table.row(&d.key),
            None => self.table.selected_row(),
        }
    }

    /// Takes a new snapshot of the workloads' replica counts: like the views, only the
    /// rows of releases whose counts changed move.
    pub fn set_replicas(&mut self, replicas: Arc<ReplicaMap>) {
        let old = std::mem::replace(&mut self.replicas, replicas);
        let keys = self.table.rows_of(&changed_keys(&old, &self.replicas));
        let (table, source) = self.table_and_source();
        table.update(&source, &keys);
    }

    /// The clock moved on: a write of unknown outcome that the object still does not show
    /// a while after the API server answers again is reported not applied (and still
    /// watched).
    pub fn tick(&mut self, now: Timestamp) {
        self.now = now;
        if let crate::engine::Connection::Disconnected { .. } = self.connection {
            return;
        }
        self.status.expire_unknown(now, self.answering_since);
    }

    /// Whether the API server answers, and since when.
    pub fn set_connection(&mut self, connection: crate::engine::Connection) {
        let was_down = matches!(
            self.connection,
            crate::engine::Connection::Disconnected { .. }
        );
        if was_down && connection == crate::engine::Connection::Connected {
            self.answering_since = Some(self.now);
        }
        self.connection = connection;
    }

    /// How old the shown data may be: `Some(seconds)` while disconnected.
    pub fn stale_for(&self) -> Option<i64> {
        crate::frontend::tui::components::stale_for(&self.connection, self.now)
    }

    /// What every component draws with.
    pub fn look(&self) -> crate::frontend::tui::components::Look<'_> {
        crate::frontend::tui::components::Look {
            theme: &self.theme,
            now: self.now,
            readonly: self.readonly,
        }
    }

    /// What the status line says now (see [`Notices::notice`]).
    pub fn status_notice(&self) -> Option<(Progress, String, bool)> {
        self.status.notice(self.now)
    }

    pub fn selected_key(&self) -> Option<&RowKey> {
        match &self.detail {
            Some(d) => Some(&d.key),
            None => self.table.selected_key(),
        }
    }

    /// What the detail view loads for the release it shows, and a version that changes
    /// when the release does (its object's resourceVersion; a stored release's newest
    /// revision and status): `None` when the release is gone.
    pub fn detail_target(&self) -> Option<(DetailTarget, String)> {
        let d = self.detail.as_ref()?;
        let key = d.key.key.clone();
        let version_of =
            |meta: &kube::api::ObjectMeta| meta.resource_version.clone().unwrap_or_default();
        // A fleet row's release is read from its own cluster's data.
        let (views, others, _) = self.data_of(d.key.cluster.as_ref())?;
        match d.key.kind {
            Kind::Wheelhouse => {
                let hr = &views.get(&key)?.release;
                Some((DetailTarget::of_wheelhouse(hr), version_of(&hr.metadata)))
            }
            Kind::Flux => {
                let hr = others.flux.get(&key)?;
                Some((DetailTarget::of_flux(hr), version_of(&hr.metadata)))
            }
            Kind::Helm => {
                let s = others.helm.get(&key)?;
                let target = DetailTarget {
                    kind: Kind::Helm,
                    storage_namespace: key.namespace.clone(),
                    release_name: key.name.clone(),
                    target_namespace: s.target_namespace.clone(),
                    key,
                    remote: None,
                    kube_config: None,
                    uid: None,
                    values: None,
                };
                Some((target, format!("{}/{}", s.revision, s.status.as_str())))
            }
        }
    }

    /// Where the values of the Helm release stored as `stored` (storage namespace and
    /// release name) come from, when a wheelhouse or Flux HelmRelease manages it: for
    /// masking what came from Secrets in its revisions' diffs.
    pub fn values_sources_of(
        &self,
        stored: &ReleaseKey,
    ) -> Option<crate::helm::values::ValuesSources> {
        self.values_sources_in(None, stored)
    }

    /// As [`Self::values_sources_of`], of a release of `cluster` (`None`: the dashboard's
    /// own): another cluster's release is masked by its own HelmRelease's sources.
    pub fn values_sources_in(
        &self,
        cluster: Option<&str>,
        stored: &ReleaseKey,
    ) -> Option<crate::helm::values::ValuesSources> {
        let (views, others) = match cluster {
            None => (&self.views, &self.others),
            Some(c) => {
                let member = self.fleet.members.get(c)?;
                (&member.data.views, &member.data.others)
            }
        };
        let same = |ns: String, name: String| ns == stored.namespace && name == stored.name;
        if let Some(view) = views
            .values()
            .find(|v| same(v.release.storage_namespace(), v.release.release_name()))
        {
            return Some(crate::helm::values::ValuesSources::of(&view.release));
        }
        others
            .flux
            .values()
            .find(|hr| same(hr.storage_namespace(), hr.release_name()))
            .map(|hr| crate::helm::values::ValuesSources::of_flux(hr))
    }

    /// The wheelhouse HelmRelease under the cursor, if that is what it is.
    pub fn selected_wheelhouse(&self) -> Option<&ReleaseKey> {
        self.selected_key()
            .filter(|k| k.kind == Kind::Wheelhouse)
            .map(|k| &k.key)
    }

    /// The context of the view in front, whose keys apply.
    pub fn context(&self) -> Context {
        if self.changes.is_some() {
            Context::Changes
        } else if self.editor.is_some() {
            Context::Editor
        } else if self.timeline.is_some() {
            Context::Timeline
        } else if self.logs.is_some() {
            Context::Logs
        } else if self.detail.is_some() {
            Context::Detail
        } else {
            Context::Table
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn note(&mut self, what: String, progress: Progress) -> u64 {
        let id = self.id();
        self.status.note(id, what, progress, self.now);
        id
    }
}
