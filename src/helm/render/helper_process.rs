//! One running render helper process, shared by renders (`helper.rs`) and CEL questions
//! (`cel.rs`): started and asked to say it is ready, asked by request id over
//! newline-delimited JSON, its answers handed back, its stderr kept for errors, and its
//! exit seen, logged and counted.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::{Error, ReleaseOutput};

/// The longest the helper may take to say it is ready (less when the render waiting for
/// it may take less: starting a helper is part of the render's time).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How much of the helper's stderr an error quotes (it never writes values there).
const STDERR_KEEP: usize = 4096;

pub(super) const HOW: &str = "build it with src/helm/render/helper/build.sh (it prints the directory), \
     put wheelhouse-render beside wheelhouse or on PATH, or point WHEELHOUSE_RENDER_HELPER \
     (or `--render-helper`) at it; `--renderer helm` renders with the helm CLI instead";

/// The running helper, shared by renders and CEL evaluations.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<Arc<Process>>>>;

/// Why a render helper was taken out of use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperFault {
    /// It exited (killed, crashed), with the status the system reported.
    Exited(String),
    /// A render got no answer within the render timeout (the helper frozen, or a
    /// `lookup` that never returns).
    Hung(Duration),
    /// It wrote a line that is not an answer.
    Garbage,
}

impl HelperFault {
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Exited(_) => "exited",
            Self::Hung(_) => "hung",
            Self::Garbage => "garbage",
        }
    }
}

impl std::fmt::Display for HelperFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(status) => write!(f, "exited ({status})"),
            Self::Hung(timeout) => write!(f, "gave no answer within {}s", timeout.as_secs()),
            Self::Garbage => f.write_str("wrote what is not an answer"),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct FaultLabels {
    cause: String,
}

impl FaultLabels {
    /// The labels of one cause (`exited`, `hung`, `garbage`).
    pub fn new(cause: &str) -> Self {
        Self {
            cause: cause.to_owned(),
        }
    }
}

/// Render helpers replaced in this process, by cause (`wheelhouse_render_helper_restarts`).
pub fn helper_restarts() -> &'static prometheus_client::metrics::family::Family<
    FaultLabels,
    prometheus_client::metrics::counter::Counter,
> {
    static RESTARTS: std::sync::LazyLock<
        prometheus_client::metrics::family::Family<
            FaultLabels,
            prometheus_client::metrics::counter::Counter,
        >,
    > = std::sync::LazyLock::new(Default::default);
    &RESTARTS
}

/// Why a helper did not start.
#[derive(Debug)]
pub(super) enum StartError {
    /// It cannot run, or is not the helper: the engine's setup is wrong.
    Unavailable(Error),
    /// A signal killed it before it said it was ready (an OOM kill, an operator's
    /// `kill`), or it hung there (frozen, starved): it is stopped, and the next start
    /// may well succeed.
    Failed(HelperFault),
}

impl StartError {
    pub(super) fn into_error(self) -> Error {
        match self {
            Self::Unavailable(e) => e,
            Self::Failed(fault) => Error::Helper { fault },
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(e) => e.fmt(f),
            Self::Failed(fault) => write!(f, "the render helper {fault} as it started"),
        }
    }
}

/// Why an ask got no answer.
pub(super) enum Asked {
    /// The helper is gone (exited, or taken out of use): see [`Process::fault`].
    Gone,
    Error(Error),
}

/// The helper in `slot`, started if there is none or the last one exited.
pub(super) async fn running(
    program: &Path,
    slot: &Slot,
    within: Duration,
) -> Result<Arc<Process>, StartError> {
    let mut slot = slot.lock().await;
    if let Some(p) = slot.as_ref().filter(|p| !p.exited()) {
        return Ok(p.clone());
    }
    // Every render waits on this start (the slot is held): it is bounded like a render.
    let process = Arc::new(Process::start(program, START_TIMEOUT.min(within)).await?);
    *slot = Some(process.clone());
    Ok(process)
}

/// A request line: its id, then the request's own fields.
#[derive(Serialize)]
pub(super) struct Numbered<'a, T> {
    pub(super) id: u64,
    #[serde(flatten)]
    pub(super) body: &'a T,
}

#[derive(Deserialize, Default)]
pub(super) struct Response {
    #[serde(default)]
    id: u64,
    #[serde(flatten)]
    pub(super) release: ReleaseOutput,
    #[serde(default)]
    pub(super) partial: bool,
    #[serde(default)]
    pub(super) error: Option<String>,
    /// CEL answers (`cel.go`): kstatus' word for an object, or a dependency's readiness.
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) message: Option<String>,
    #[serde(default)]
    pub(super) ready: Option<bool>,
    /// A client-side patch (`patch.go`): how it is sent, and the patch.
    #[serde(default, rename = "patchType")]
    pub(super) patch_type: Option<String>,
    #[serde(default)]
    pub(super) patch: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Ready {
    ready: bool,
    #[serde(default)]
    helm: String,
}

type Pending = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Response>>>>>;

/// One running helper: its stdin, the renders waiting for an answer, and what it said
/// on stderr (for the error when it exits).
pub(super) struct Process {
    stdin: tokio::sync::Mutex<ChildStdin>,
    /// `None` once the helper exited: nothing more will be answered.
    pending: Pending,
    next_id: AtomicU64,
    stderr: Arc<Mutex<String>>,
    pub(super) helm: String,
    /// Why it stopped answering, once it did.
    fault: Arc<Mutex<Option<HelperFault>>>,
    /// Stops the helper when this is dropped (the reaper owns the child).
    _kill: oneshot::Sender<()>,
}

impl Process {
    async fn start(program: &Path, start_timeout: Duration) -> Result<Self, StartError> {
        let unavailable =
            |what: String| StartError::Unavailable(Error::Unavailable(format!("{what}; {HOW}")));
        let mut child = Command::new(program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| unavailable(format!("cannot run {}: {e}", program.display())))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let stderr = Arc::new(Mutex::new(String::new()));
        tokio::spawn(keep_stderr(
            child.stderr.take().expect("stderr is piped"),
            stderr.clone(),
        ));

        let mut first = String::new();
        let ready = tokio::time::timeout(start_timeout, stdout.read_line(&mut first)).await;
        let said = || stderr.lock().unwrap().trim().to_owned();
        let ready: Ready = match ready {
            // Stopped as `child` is dropped (`kill_on_drop`).
            Err(_) => return Err(StartError::Failed(HelperFault::Hung(start_timeout))),
            Ok(Err(e)) => return Err(unavailable(format!("{}: {e}", program.display()))),
            Ok(Ok(_)) => match serde_json::from_str(&first) {
                Ok(ready @ Ready { ready: true, .. }) => ready,
                _ => {
                    // Give a dying helper a moment to finish its last words.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Ok(Some(status)) = child.try_wait()
                        && std::os::unix::process::ExitStatusExt::signal(&status).is_some()
                    {
                        return Err(StartError::Failed(HelperFault::Exited(status.to_string())));
                    }
                    return Err(unavailable(format!(
                        "{} is not a working render helper (it said {:?}{})",
                        program.display(),
                        first.trim(),
                        match said() {
                            s if s.is_empty() => String::new(),
                            s => format!(", and on stderr: {s}"),
                        }
                    )));
                }
            },
        };

        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let fault = Arc::new(Mutex::new(None));
        tokio::spawn(answer(stdout, pending.clone(), fault.clone()));
        let (kill, killed) = oneshot::channel();
        tokio::spawn(reap(child, killed, fault.clone(), pending.clone()));
        Ok(Self {
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            stderr,
            helm: ready.helm,
            fault,
            _kill: kill,
        })
    }

    /// Why the helper stopped answering (it exited if nothing else was seen).
    pub(super) fn fault(&self) -> HelperFault {
        self.fault
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| HelperFault::Exited(self.said()))
    }

    /// The end of what it said on stderr, or that it said nothing.
    fn said(&self) -> String {
        let said = self.stderr.lock().unwrap().trim().to_owned();
        if said.is_empty() {
            "it said nothing on stderr".into()
        } else {
            said
        }
    }

    pub(super) fn exited(&self) -> bool {
        self.pending.lock().unwrap().is_none()
    }

    /// Sends one request and waits for its answer.
    pub(super) async fn ask<T: Serialize>(&self, body: &T) -> Result<Response, Asked> {
        let request = Numbered {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            body,
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| Asked::Error(Error::Values(e)))?;
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        match self.pending.lock().unwrap().as_mut() {
            Some(pending) => pending.insert(request.id, tx),
            None => return Err(Asked::Gone),
        };
        // Dropped before its answer (a timeout): forget the request.
        let forget = Forget {
            pending: &self.pending,
            id: request.id,
        };
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin.write_all(&line).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if written.is_err() {
            return Err(Asked::Gone);
        }
        let response = rx.await.map_err(|_| Asked::Gone)?;
        drop(forget);
        Ok(response)
    }
}

/// Owns the helper's process: stops it when its [`Process`] is dropped, and says when it
/// exits by itself (with its status, logged and counted: a death the engine survives, but
/// an operator should see).
async fn reap(
    mut child: Child,
    killed: oneshot::Receiver<()>,
    fault: Arc<Mutex<Option<HelperFault>>>,
    pending: Pending,
) {
    tokio::select! {
        status = child.wait() => {
            let status = status.map_or_else(|e| format!("unknown: {e}"), |s| s.to_string());
            let first = {
                let mut fault = fault.lock().unwrap();
                let first = fault.is_none();
                fault.get_or_insert_with(|| HelperFault::Exited(status.clone()));
                first
            };
            // Every render still waiting learns it at once.
            pending.lock().unwrap().take();
            if first {
                tracing::error!(%status, "the render helper exited; a new one takes the next renders, and the renders it held are tried again there");
                helper_restarts()
                    .get_or_create(&FaultLabels { cause: "exited".into() })
                    .inc();
            }
        }
        _ = killed => {
            // Dropped right as it died (its renders failed over before its exit was
            // seen): still an exit to log and count. Otherwise it is stopped here.
            let exited = fault.lock().unwrap().is_none() && pending.lock().unwrap().is_none();
            match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                Ok(Ok(status)) if exited => {
                    tracing::error!(status = %status, "the render helper exited; a new one takes the next renders, and the renders it held are tried again there");
                    helper_restarts()
                        .get_or_create(&FaultLabels { cause: "exited".into() })
                        .inc();
                }
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill().await;
                }
            }
        }
    }
}

struct Forget<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.lock().unwrap().as_mut() {
            pending.remove(&self.id);
        }
    }
}

/// Hands each answer to the render waiting for it; at the helper's end, fails them all.
/// A line that is not an answer means the helper is broken: every render it holds fails
/// over to a new one.
async fn answer(
    mut stdout: BufReader<tokio::process::ChildStdout>,
    pending: Pending,
    fault: Arc<Mutex<Option<HelperFault>>>,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdout.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(response) = serde_json::from_slice::<Response>(&line) else {
            // Not an answer wheelhouse can read: never quoted (it may hold values).
            tracing::error!(
                bytes = line.len(),
                "the render helper wrote a line that is not an answer; a new one takes its renders"
            );
            fault.lock().unwrap().get_or_insert(HelperFault::Garbage);
            break;
        };
        let waiting = pending
            .lock()
            .unwrap()
            .as_mut()
            .and_then(|p| p.remove(&response.id));
        if let Some(tx) = waiting {
            let _ = tx.send(response);
        }
    }
    // Dropping the senders wakes every render still waiting, with an error.
    pending.lock().unwrap().take();
}

/// Keeps the end of the helper's stderr (it writes there only when something is wrong).
async fn keep_stderr(mut stderr: tokio::process::ChildStderr, kept: Arc<Mutex<String>>) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut kept = kept.lock().unwrap();
        kept.push_str(&String::from_utf8_lossy(&buf[..n]));
        if kept.len() > STDERR_KEEP {
            let cut = kept.len() - STDERR_KEEP;
            let cut = (cut..kept.len())
                .find(|&i| kept.is_char_boundary(i))
                .unwrap_or(cut);
            kept.drain(..cut);
        }
    }
}

/// Asks the running helper (started if need be) a question other than a render; a helper
/// that died meanwhile is replaced and asked once more. `Err`: why nothing could answer.
pub(super) async fn ask_running<T: Serialize>(
    program: &Path,
    process: &Slot,
    body: &T,
    timeout: Duration,
) -> Result<Response, String> {
    let mut last = String::new();
    for _ in 0..2 {
        let running = match running(program, process, timeout).await {
            Ok(p) => p,
            Err(StartError::Unavailable(e)) => return Err(e.to_string()),
            Err(e @ StartError::Failed(_)) => {
                last = e.to_string();
                continue;
            }
        };
        match tokio::time::timeout(timeout, running.ask(body)).await {
            Ok(Ok(response)) => return Ok(response),
            Ok(Err(Asked::Error(e))) => return Err(e.to_string()),
            Ok(Err(Asked::Gone)) => last = "the render helper exited".into(),
            Err(_) => {
                return Err(format!(
                    "the render helper did not answer within {}s",
                    timeout.as_secs()
                ));
            }
        }
    }
    Err(last)
}
