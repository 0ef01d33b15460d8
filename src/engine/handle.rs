//! What front ends (the dashboard, the controller) hold of a running engine: the views,
//! the live states, commands, pushes, and the engine's lifecycle. The vocabulary these
//! speak is in `vocabulary`, below every part of the engine.

use std::sync::Arc;

use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::coverage::Coverage;
use super::lease::Role;
use super::vocabulary::{
    Command, Connection, LiveMap, ReleaseKey, Views, new_token, write_command,
};
use crate::api::HelmRelease;

/// Hands pushes to an engine's releases (see [`EngineHandle::pusher`]).
#[derive(Clone)]
pub struct Pusher {
    tx: tokio::sync::broadcast::Sender<Arc<crate::helm::source::pushed::Wake>>,
    views: watch::Receiver<Arc<Views>>,
}

impl crate::helm::source::pushed::Wakes for Pusher {
    /// Wakes every release `wake` wakes, each once; how many those are (0: nothing of
    /// this engine's is woken, and nothing is sent).
    fn wake(&self, wake: crate::helm::source::pushed::Wake) -> usize {
        let named = self
            .views
            .borrow()
            .values()
            .filter(|v| v.problem.is_none() && wake.wakes(&v.release))
            .count();
        if named > 0 {
            let _ = self.tx.send(Arc::new(wake));
        }
        named
    }
}

/// A handle on a running engine (or on the cluster, when another process holds the
/// engine lease). Cheap to clone.
#[derive(Clone)]
pub struct EngineHandle {
    /// Lets the Lease go at once (see `abandon`), and says when it has been.
    pub(super) lease_stop: CancellationToken,
    pub(super) lease_done: watch::Receiver<bool>,
    /// What actions run with: the stored-release actions run on it in the caller's task.
    pub(super) ctx: Arc<super::run::Context>,
    pub(super) client: Client,
    pub(super) views: watch::Receiver<Arc<Views>>,
    pub(super) live: watch::Receiver<LiveMap>,
    pub(super) role: watch::Receiver<Role>,
    pub(super) connection: watch::Receiver<Connection>,
    pub(super) direct: mpsc::UnboundedSender<(Command, String)>,
    pub(super) stop: CancellationToken,
    pub(super) coverage: Coverage,
    /// True while no worker of this engine runs (see `working`).
    pub(super) idle: watch::Receiver<bool>,
    /// True once a shut-down engine has finished: workers done, Lease handed back.
    pub(super) stopped: watch::Receiver<bool>,
    pub(super) tracker: watch::Receiver<Option<crate::tracking::TrackerHandle>>,
}

impl EngineHandle {
    /// For a process about to exit at once (the dashboard's `q`): stops the workers and
    /// lets the Lease go without waiting for their step to end, and returns once it is
    /// let go. The process exit then ends any step in flight, as a kill would: its
    /// revision stays pending for the next engine to unlock; the API calls it already
    /// sent are the only writes that can still land.
    pub async fn abandon(&self) {
        self.stop.cancel();
        self.lease_stop.cancel();
        let mut done = self.lease_done.clone();
        let _ = done.wait_for(|d| *d).await;
    }

    /// Rolls back or uninstalls a release no HelmRelease manages, as the helm CLI does,
    /// with this engine's action code; returns what Helm would print.
    pub async fn act_on_stored(
        &self,
        key: &ReleaseKey,
        action: super::stored_actions::StoredAction,
    ) -> Result<String, String> {
        super::stored_actions::act(&self.ctx, key, action, &self.stop).await
    }

    /// What applying `hr`'s spec would write, rendered by this engine's renderer; nothing
    /// is written (see [`super::preview`]).
    pub async fn preview(&self, hr: &HelmRelease) -> Result<super::preview::Preview, String> {
        super::preview::preview(&self.ctx, hr).await
    }

    /// How `hr`'s live objects differ from its newest revision now (for the dashboard).
    pub async fn drift(&self, hr: &HelmRelease) -> Result<super::release_drift::DriftView, String> {
        super::release_drift::view(&self.ctx, hr).await
    }

    /// What this engine reconciles (while it holds its Lease).
    pub fn coverage(&self) -> &Coverage {
        &self.coverage
    }

    /// Every release in scope, updated from watches.
    pub fn views(&self) -> watch::Receiver<Arc<Views>> {
        self.views.clone()
    }

    /// Whether the API server is reachable, as the HelmRelease watch sees it.
    pub fn connection(&self) -> watch::Receiver<Connection> {
        self.connection.clone()
    }

    /// Whether this process runs the engine, or who does.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// What a webhook receiver hands the pushes it hears to.
    pub fn pusher(&self) -> Pusher {
        Pusher {
            tx: self.ctx.signals.pushed.clone(),
            views: self.views.clone(),
        }
    }

    /// The tenancy policy this engine enforces (the cluster's, read when it took the
    /// lease and kept current since): whom each release acts as.
    pub fn policy(&self) -> crate::cluster::tenancy::Policy {
        self.ctx.policy()
    }

    /// Carries out a command: writes it to the cluster, and hands it to the local engine
    /// when this process runs it.
    pub async fn send(&self, command: Command) -> Result<(), kube::Error> {
        self.send_as(command, new_token()).await
    }

    /// [`EngineHandle::send`] with the token the caller chose, so a caller that never got
    /// an answer can still tell whether the write landed ([`Command::landed`]).
    pub async fn send_as(&self, command: Command, token: String) -> Result<(), kube::Error> {
        write_command(&self.client, &command, &token).await?;
        if *self.role.borrow() == Role::Leader {
            // The worker reacts now instead of after the watch round trip. A pin ends a
            // running wait at once, as the cancelWaitAt it writes does.
            if let Command::Pin { key, .. } = &command {
                let _ = self
                    .direct
                    .send((Command::CancelWait(key.clone()), token.clone()));
            }
            let _ = self.direct.send((command, token));
        }
        Ok(())
    }

    /// Stops the engine's workers and gives up the lease.
    /// Whether this engine's workers may act: from the start of a term (once the namespace
    /// engines' Leases were read and the views say which namespaces it leaves to them)
    /// until the workers of a term that ended have finished their step. Holding the Lease
    /// alone is not enough to act.
    pub fn working(&self) -> bool {
        !*self.idle.borrow()
    }

    /// Removes the remote clusters' kubeconfigs the engine wrote for its renderer: for a
    /// process about to exit without dropping what it holds.
    pub fn remove_credentials(&self) {
        self.ctx.identities.remove_files();
    }

    pub fn shutdown(&self) {
        if !self.stop.is_cancelled() {
            tracing::info!("stopping the engine");
        }
        self.stop.cancel();
    }

    /// Waits until a shut-down engine has finished: its workers' steps done and its Lease
    /// released. A process that exits before this cuts the release short, and a standby
    /// then waits for the Lease to expire instead of taking over at once.
    pub async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|s| *s).await;
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Live state of a release's worker in this process (empty for followers).
    /// The config tracker this engine runs while it holds its Lease (it tells what it has
    /// handled: see `TrackerHandle::caught_up`).
    pub fn tracker(&self) -> Option<crate::tracking::TrackerHandle> {
        self.tracker.borrow().clone()
    }

    pub fn live(&self) -> watch::Receiver<LiveMap> {
        self.live.clone()
    }
}
