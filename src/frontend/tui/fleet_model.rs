//! The fleet as plain data: the dashboard's other clusters (`--contexts`,
//! `--all-contexts`, `fleet:` in the config file), each with its own releases, connection
//! and role, which the one table's rows are made from. The dashboard's own cluster (the
//! current context) keeps the fields of `App` every single-cluster view reads; the others
//! are here, keyed by context name, and their rows carry the cluster in their [`RowKey`].
//! What each cluster's tasks report arrives as a [`FleetUpdate`] (`app/fleet.rs` takes
//! it in): one cluster's silence only marks its own tile and rows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::engine::{ReleaseKey, Role, Views};
use crate::frontend::inventory::{Kind, Others};
use crate::frontend::tui::view_model::{Cluster, RowKey};
use crate::health::replicas::ReplicaMap;

/// How a cluster answers, as its probe sees it (a request every second, each within 2 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not connected yet: its client is being made and its first answer awaited.
    Connecting,
    Connected,
    /// It answers, slowly (over a second), since `since`.
    Degraded {
        since: Timestamp,
        error: String,
    },
    /// It does not answer since `since`: its rows are its last known state.
    Unreachable {
        since: Timestamp,
        error: String,
    },
    /// It refused the context's credentials (or they could not be made) since `since`.
    Credentials {
        since: Timestamp,
        error: String,
    },
}

impl Link {
    /// For how many seconds this cluster's rows have been its last known state.
    pub fn stale_for(&self, now: Timestamp) -> Option<i64> {
        match self {
            Self::Unreachable { since, .. } | Self::Credentials { since, .. } => {
                Some(now.duration_since(*since).as_secs().max(0))
            }
            _ => None,
        }
    }

    /// The same link, keeping the older `since` when the kind did not change (a probe
    /// reports every second; the tile says since when).
    pub fn after(&self, next: Link) -> Link {
        match (self, next) {
            (Self::Degraded { since, .. }, Self::Degraded { error, .. }) => Self::Degraded {
                since: *since,
                error,
            },
            (Self::Unreachable { since, .. }, Self::Unreachable { error, .. }) => {
                Self::Unreachable {
                    since: *since,
                    error,
                }
            }
            (Self::Credentials { since, .. }, Self::Credentials { error, .. }) => {
                Self::Credentials {
                    since: *since,
                    error,
                }
            }
            (_, next) => next,
        }
    }
}

/// What one cluster's tasks report.
#[derive(Debug, Clone)]
pub enum FleetUpdate {
    Views(Arc<Views>),
    Others(Arc<Others>),
    Replicas(Arc<ReplicaMap>),
    Role(Role),
    Link(Link),
    /// Who holds the cluster's wheelhouse engine Lease (`None`: no live holder), for a
    /// cluster this dashboard runs no engine for.
    LeaseHolder(Option<String>),
}

/// One cluster's releases, as the table's rows are made from them.
#[derive(Default)]
pub struct ClusterData {
    pub views: Arc<Views>,
    pub others: Arc<Others>,
    pub replicas: Arc<ReplicaMap>,
    /// As `App::managed`: the stored releases a HelmRelease of this cluster manages.
    pub managed: HashMap<ReleaseKey, usize>,
    /// Which stored release each HelmRelease of this cluster manages.
    pub manages: HashMap<RowKey, ReleaseKey>,
}

/// Another cluster of the fleet.
pub struct Member {
    pub data: ClusterData,
    pub link: Link,
    pub role: Role,
    /// Whether this dashboard runs an engine for it (`--engine`).
    pub engine: bool,
    /// Who holds its wheelhouse engine Lease, as last read (`None`: no live holder, or
    /// not read yet).
    pub lease_holder: Option<String>,
}

/// The fleet's clusters besides the dashboard's own, and how its own answers.
#[derive(Default)]
pub struct Fleet {
    pub members: BTreeMap<Cluster, Member>,
    /// The dashboard's own cluster, as its probe sees it (its rows follow the engine's
    /// connection, as a single cluster's do).
    pub home_link: Option<Link>,
}

impl Fleet {
    /// A fleet of `members` (each not connected yet; `engine`: those this dashboard runs
    /// an engine for).
    pub fn of(members: &[String], engine: &[String]) -> Self {
        Self {
            members: members
                .iter()
                .map(|name| {
                    (
                        Cluster::from(name.as_str()),
                        Member {
                            data: ClusterData::default(),
                            link: Link::Connecting,
                            role: Role::Unknown,
                            engine: engine.contains(name),
                            lease_holder: None,
                        },
                    )
                })
                .collect(),
            home_link: None,
        }
    }

    /// Whether there is more than one cluster (the table then names each row's).
    pub fn is_fleet(&self) -> bool {
        !self.members.is_empty()
    }

    pub fn data(&self, cluster: &Cluster) -> Option<&ClusterData> {
        self.members.get(cluster).map(|m| &m.data)
    }

    /// For how many seconds each member's rows have been its last known state.
    pub fn stale(&self, now: Timestamp) -> HashMap<Cluster, i64> {
        self.members
            .iter()
            .filter_map(|(c, m)| Some((c.clone(), m.link.stale_for(now)?)))
            .collect()
    }
}

/// Which stored release each of the changed HelmReleases `managers` manages now; returns
/// the rows of the stored releases whose manager came or went (in `cluster`). The
/// single-cluster bookkeeping of `App::remanage`, over one cluster's data.
pub fn remanage(
    views: &Views,
    others: &Others,
    managed: &mut HashMap<ReleaseKey, usize>,
    manages: &mut HashMap<RowKey, ReleaseKey>,
    managers: &[RowKey],
    cluster: Option<&Cluster>,
) -> Vec<RowKey> {
    let mut moved = Vec::new();
    for manager in managers {
        let now = match manager.kind {
            Kind::Wheelhouse => views
                .get(&manager.key)
                .map(|v| ReleaseKey::new(v.release.storage_namespace(), v.release.release_name())),
            Kind::Flux => others
                .flux
                .get(&manager.key)
                .map(|hr| ReleaseKey::new(hr.storage_namespace(), hr.release_name())),
            Kind::Helm => None,
        };
        let before = match &now {
            Some(stored) => manages.insert(manager.clone(), stored.clone()),
            None => manages.remove(manager),
        };
        if before == now {
            continue;
        }
        if let Some(stored) = before
            && let Some(n) = managed.get_mut(&stored)
        {
            *n -= 1;
            if *n == 0 {
                managed.remove(&stored);
                moved.push(RowKey::new(Kind::Helm, stored).in_cluster(cluster));
            }
        }
        if let Some(stored) = now {
            let n = managed.entry(stored.clone()).or_default();
            *n += 1;
            if *n == 1 {
                moved.push(RowKey::new(Kind::Helm, stored).in_cluster(cluster));
            }
        }
    }
    moved
}
