//! What the fleet's clusters report, taken in by the dashboard's state: only the reporting
//! cluster's rows move (the data itself is `fleet_model`).

use super::App;
use crate::engine::{ReleaseKey, Views, changed_keys};
use crate::frontend::inventory::{Kind, Others};
use crate::frontend::tui::fleet_model::{FleetUpdate, Link, remanage};
use crate::frontend::tui::view_model::{Cluster, RowKey};
use crate::health::replicas::ReplicaMap;

impl App {
    /// What a cluster of the fleet reported: only its own rows move.
    pub fn on_fleet(&mut self, cluster: &Cluster, update: FleetUpdate) {
        if **cluster == *self.context {
            // The dashboard's own Lease is its engine's role.
            if let FleetUpdate::Link(link) = update {
                let old = self.fleet.home_link.take().unwrap_or(Link::Connecting);
                self.fleet.home_link = Some(old.after(link));
            }
            return;
        }
        let Some(member) = self.fleet.members.get_mut(cluster) else {
            return;
        };
        let c = Some(cluster);
        let changed: Vec<RowKey> = match update {
            // Its rows say "last known" (or no longer do) as they are drawn: nothing moves.
            FleetUpdate::Link(link) => {
                member.link = member.link.after(link);
                return;
            }
            FleetUpdate::Role(role) => {
                member.role = role;
                return;
            }
            FleetUpdate::LeaseHolder(holder) => {
                member.lease_holder = holder;
                return;
            }
            FleetUpdate::Views(views) => {
                let d = &mut member.data;
                let old = std::mem::replace(&mut d.views, views);
                let mut changed: Vec<RowKey> = changed_keys(&old, &d.views)
                    .into_iter()
                    .map(|k| RowKey::wheelhouse(k).in_cluster(c))
                    .collect();
                let moved = remanage(
                    &d.views,
                    &d.others,
                    &mut d.managed,
                    &mut d.manages,
                    &changed,
                    c,
                );
                changed.extend(moved);
                changed
            }
            FleetUpdate::Others(others) => {
                let d = &mut member.data;
                let old = std::mem::replace(&mut d.others, others);
                let of = |kind: Kind| move |k: ReleaseKey| RowKey::new(kind, k).in_cluster(c);
                let mut changed: Vec<RowKey> = changed_keys(&old.flux, &d.others.flux)
                    .into_iter()
                    .map(of(Kind::Flux))
                    .chain(
                        changed_keys(&old.helm, &d.others.helm)
                            .into_iter()
                            .map(of(Kind::Helm)),
                    )
                    .collect();
                if old.chart_sources != d.others.chart_sources {
                    changed.extend(
                        d.others
                            .flux
                            .iter()
                            .filter(|(_, hr)| hr.spec.chart_ref.is_some())
                            .map(|(k, _)| RowKey::new(Kind::Flux, k.clone()).in_cluster(c)),
                    );
                }
                let flux: Vec<RowKey> = changed
                    .iter()
                    .filter(|k| k.kind == Kind::Flux)
                    .cloned()
                    .collect();
                let moved = remanage(
                    &d.views,
                    &d.others,
                    &mut d.managed,
                    &mut d.manages,
                    &flux,
                    c,
                );
                changed.extend(moved);
                changed
            }
            FleetUpdate::Replicas(replicas) => {
                let d = &mut member.data;
                let old = std::mem::replace(&mut d.replicas, replicas);
                self.table
                    .rows_of(&changed_keys(&old, &d.replicas))
                    .into_iter()
                    .filter(|k| k.cluster.as_ref() == c)
                    .collect()
            }
        };
        let (table, source) = self.table_and_source();
        table.update(&source, &changed);
    }

    /// The data of the cluster a row lives in.
    pub fn data_of(&self, cluster: Option<&Cluster>) -> Option<(&Views, &Others, &ReplicaMap)> {
        match cluster {
            None => Some((&self.views, &self.others, &self.replicas)),
            Some(c) => self
                .fleet
                .data(c)
                .map(|d| (&*d.views, &*d.others, &*d.replicas)),
        }
    }
}

impl App {
    /// The grid's columns: the dashboard's own cluster, then the others by name.
    pub fn grid_clusters(&self) -> Vec<Option<Cluster>> {
        std::iter::once(None)
            .chain(self.fleet.members.keys().cloned().map(Some))
            .collect()
    }

    /// `:grid`, `:grid chart`: where each release (or chart) is, cluster by cluster.
    pub fn open_grid(&mut self, by_chart: bool) {
        self.grid = Some(crate::frontend::tui::components::grid::GridView {
            by_chart,
            selected: 0,
        });
    }

    /// The grid's keys: moving, the table's filter, back.
    pub(super) fn on_grid_action(
        &mut self,
        action: crate::frontend::tui::keymap::Action,
    ) -> Vec<crate::frontend::tui::effect::Effect> {
        use crate::frontend::tui::effect::Effect;
        use crate::frontend::tui::keymap::Action;
        let clusters = self.grid_clusters();
        let Some(grid) = self.grid.as_mut() else {
            return Vec::new();
        };
        let rows = crate::frontend::tui::components::grid::rows(
            &self.table.rows,
            &clusters,
            grid.by_chart,
        )
        .len();
        if grid.on_action(action, rows, self.page) {
            return Vec::new();
        }
        match action {
            Action::Back => self.grid = None,
            Action::Quit => return vec![Effect::Quit],
            Action::Filter | Action::Help | Action::Command | Action::Redraw => {
                return self.on_action(action);
            }
            _ => {}
        }
        Vec::new()
    }
}
