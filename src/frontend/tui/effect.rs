//! What the dashboard's state asks of the run loop ([`Effect`]: IO, performed on tasks)
//! and what comes back ([`IoResult`]). The state never performs IO itself.

use crate::cluster::client::Scope;
use crate::engine::stored_actions::StoredAction;
use crate::engine::{Command, ReleaseKey};
use crate::frontend::inventory::flux::Request;
use crate::frontend::tui::components::logs::LogSource;
use crate::frontend::tui::favourites::Favourites;
use crate::frontend::tui::io::{Expect, LateOutcome, WriteError};
use crate::frontend::tui::view_model::DetailData;
use crate::frontend::tui::view_model::RowKey;

/// IO the run loop performs on a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Send {
        id: u64,
        command: Command,
    },
    /// A request on a Flux HelmRelease, written in Flux's API.
    Flux {
        id: u64,
        key: ReleaseKey,
        request: Request,
    },
    /// A rollback or uninstall of a release no HelmRelease manages, by the engine.
    Stored {
        id: u64,
        key: ReleaseKey,
        action: StoredAction,
    },
    /// A write (`Send`, `Flux`, `Stored`) to another cluster of the fleet: carried out
    /// with that cluster's own client and engine handle, never the dashboard's own.
    In {
        cluster: crate::frontend::tui::view_model::Cluster,
        effect: Box<Effect>,
    },
    LoadDetail(RowKey),
    /// What a changes view shows, loaded (and rendered) on a task.
    LoadChanges {
        request: u64,
        of: ChangesOf,
        /// Of another cluster of the fleet: read with its own client and engine handle.
        cluster: Option<crate::frontend::tui::view_model::Cluster>,
    },
    /// Who the operator is to the API server (pins name them).
    LoadUser,
    /// The audit Events of `cluster` (`None`: the dashboard's own) in `scope`, for the
    /// Timeline: freezes, thaws and the dashboards' writes.
    LoadAudit {
        cluster: Option<crate::frontend::tui::view_model::Cluster>,
        scope: Scope,
    },
    /// Read these Timeline records whole (the revisions on screen).
    ReadRevisions(Vec<crate::frontend::tui::components::timeline::RecordRef>),
    /// Stream a pod's logs (any stream already open is stopped).
    StreamLogs(LogSource),
    /// Stop the open log stream.
    StopLogs,
    /// Merge patch for `spec.values`, guarded by the resourceVersion the edit started from.
    PatchValues {
        id: u64,
        key: ReleaseKey,
        original: serde_json::Value,
        values: serde_json::Value,
    },
    SwitchContext(String),
    /// An incident freeze of these releases (of every kind by name), as the caller the API
    /// server knows (`engine/freeze.rs`).
    Freeze {
        id: u64,
        names: Vec<ReleaseKey>,
        duration: std::time::Duration,
        reason: String,
    },
    /// The thaw of these releases by the engine's rule.
    Thaw {
        id: u64,
        names: Vec<ReleaseKey>,
    },
    /// What `:` completes: the cluster's namespaces (listed with a time limit; an
    /// identity that may not list them gets the releases' namespaces only) and the
    /// kubeconfig's contexts.
    LoadCompletions,
    /// Write the namespace favourites to the config directory.
    SaveFavourites(Favourites),
    Redraw,
    Quit,
}

/// What a changes view is of.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangesOf {
    /// Two stored revisions of a release (`release`: storage namespace and release name),
    /// from `from` to `to`.
    Revisions {
        release: ReleaseKey,
        from: i32,
        to: i32,
        /// Where the release's values come from, to mask those from Secrets by origin.
        values: Option<crate::helm::values::ValuesSources>,
    },
    /// One stored revision, whole.
    Revision {
        release: ReleaseKey,
        revision: i32,
        values: Option<crate::helm::values::ValuesSources>,
    },
    /// The wheelhouse HelmRelease `key` as its spec would be applied (with `values` in
    /// place of its spec.values when given), rendered by the engine, against the
    /// release's newest stored revision.
    Render {
        key: ReleaseKey,
        values: Option<serde_json::Value>,
    },
    /// The wheelhouse HelmRelease `key`'s live objects against its newest revision.
    Drift { key: ReleaseKey },
}

/// Results of IO tasks.
#[derive(Debug)]
pub enum IoResult {
    Done {
        id: u64,
        result: Result<(), String>,
    },
    /// A write whose answer never came: it may still be applied; `expect` says what the
    /// object shows once it is.
    Unknown {
        id: u64,
        why: String,
        expect: Expect,
    },
    /// The answer of a write that was reported outcome unknown came after all.
    Late {
        id: u64,
        outcome: LateOutcome,
    },
    Detail {
        key: RowKey,
        data: Box<DetailData>,
    },
    /// The lines of changes load `request` and their summary, or why there are none.
    Changes {
        request: u64,
        result: Result<(Vec<crate::frontend::tui::diff::DiffLine>, String), String>,
    },
    /// The operator's username, as the API server knows them.
    User(String),
    /// Lines of the log stream `stream`.
    LogLines {
        stream: u64,
        lines: Vec<String>,
    },
    /// The log stream `stream` ended, or why it failed.
    LogEnd {
        stream: u64,
        failed: Option<String>,
    },
    /// A new session started (namespace or context switch), or failed to.
    Switched(Result<(String, Scope, crate::engine::Coverage), String>),
    /// The cluster's namespaces, or why they cannot be listed.
    Namespaces(Result<Vec<String>, String>),
    /// The kubeconfig's contexts.
    Contexts(Vec<String>),
    /// The favourites were written, or why not.
    FavouritesSaved(Result<(), String>),
    /// `cluster`'s audit Events as Timeline changes (`None`: no answer in time).
    Audited {
        cluster: Option<crate::frontend::tui::view_model::Cluster>,
        changes: Option<Vec<crate::frontend::timeline::Change>>,
    },
    /// A Timeline record read whole (`None`: gone, or it does not decode).
    TimelineRevision(
        crate::frontend::tui::components::timeline::RecordRef,
        Option<Vec<crate::frontend::timeline::Change>>,
    ),
}

impl IoResult {
    /// How a write ended, as the UI loop hears it.
    pub fn written(id: u64, result: Result<(), WriteError>) -> Self {
        match result {
            Ok(()) => Self::Done { id, result: Ok(()) },
            Err(WriteError::Refused(e)) => Self::Done { id, result: Err(e) },
            Err(WriteError::Unknown { why, expect, .. }) => Self::Unknown { id, why, expect },
        }
    }
}
