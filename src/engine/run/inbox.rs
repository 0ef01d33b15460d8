//! The worker's messages and the one place they are read: every phase that waits (the
//! idle worker, a hook, a health check, a handover) hands what it received to
//! [`Memory::absorb`](super::Memory::absorb), which keeps what each message means for
//! the release and tells the phase, as a [`Heard`], what it may have to act on.

use std::sync::Arc;

use crate::api::HelmRelease;
use crate::engine::vocabulary::Command;

/// What reaches a worker.
pub enum Msg {
    Updated(Arc<HelmRelease>),
    Deleted,
    /// A command from a front end in this process, with the token it wrote. Boxed: the
    /// mailbox of every worker (thousands) allocates room for a block of messages.
    Command(Box<(Command, String)>),
    /// The config tracker rolled one of the release's workloads: a change to record.
    ConfigRolled(Box<crate::api::ChangeRecord>),
}

/// The worker's mailbox and what its messages said of the release.
pub struct Inbox {
    pub(in crate::engine) rx: crate::engine::mailbox::Receiver<Msg>,
    /// The newest HelmRelease the watch delivered.
    pub newest: Arc<HelmRelease>,
    /// The HelmRelease is gone.
    pub deleted: bool,
    /// The sender is gone (the engine stops): nothing more will arrive.
    pub(in crate::engine) closed: bool,
    /// The cancelWaitAt token a direct command carried, before the watch echoes it.
    pub(in crate::engine) handled_cancel: Option<String>,
    /// A command (an operator's, or the engine's own "look now") arrived while a step
    /// ran: the worker looks again as soon as the step ends.
    pub(in crate::engine) requested: bool,
}

/// What a message means to the phase that received it; [`Memory::absorb`] has kept
/// its bookkeeping already.
///
/// [`Memory::absorb`]: super::Memory::absorb
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// A newer HelmRelease, now [`Inbox::newest`]; `deleting` when it is the first one
    /// marked for deletion.
    Updated { deleting: bool },
    /// The HelmRelease is gone ([`Inbox::deleted`]).
    Deleted,
    /// An operator cancelled the wait, writing this cancelWaitAt token.
    CancelWait(String),
    /// Another command: someone waits for the release to be looked at now.
    Command,
    /// A rollout of the config tracker, kept for the next status write.
    ConfigRolled,
    /// The engine stops: the mailbox is closed.
    Closed,
}

impl Inbox {
    pub fn new(rx: crate::engine::mailbox::Receiver<Msg>, hr: Arc<HelmRelease>) -> Self {
        Self {
            rx,
            newest: hr,
            deleted: false,
            closed: false,
            handled_cancel: None,
            requested: false,
        }
    }

    /// The next message; `None` once closed (a closed mailbox is not waited on again,
    /// so a phase's `select!` keeps its other branches).
    pub async fn recv(&mut self) -> Option<Msg> {
        if self.closed {
            return std::future::pending().await;
        }
        self.rx.recv().await
    }
}
