//! The dashboard: `wheelhouse` with no subcommand. A table of HelmReleases live from the
//! engine's views, a detail view, actions, a values editor, themes.
//!
//! Shape (as gitui and television): [`app::App`] holds the state and turns keys into
//! effects; [`view`] draws from it; [`io`] runs every API call on a task with a time
//! limit; the loop here only moves messages between them, so it never awaits the API.

pub mod app;
pub mod components;
#[cfg(any(test, feature = "fixtures"))]
pub mod demo;
pub mod diff;
pub mod effect;
pub mod favourites;
pub mod io;
pub mod keymap;
pub mod suspension;
pub mod theme;
pub mod view;
pub mod view_model;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyEventKind};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cluster::client::{self, Scope, Target};
use crate::engine::{self, EngineConfig, EngineHandle};
use crate::frontend::inventory::Inventory;
use crate::health::replicas::Replicas;
use app::App;
use effect::{Effect, IoResult};
use theme::Theme;

/// How often the open detail view re-reads pods, workloads and tracked config, which
/// change without the release object changing.
const DETAIL_REFRESH: Duration = Duration::from_secs(3);
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Theme(String),
    #[error("cannot connect to the cluster: {0}")]
    Connect(String),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// What `wheelhouse` (no subcommand) was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub cluster: Target,
    /// What a relative `chart.path` is relative to (the engine's `chart_root`).
    pub chart_root: Option<PathBuf>,
    /// What renders charts for the engine.
    pub render: crate::helm::render::Choice,
    pub readonly: bool,
    pub theme: Option<String>,
    /// Namespace of the engine Lease (default: `default`, as every wheelhouse).
    pub lease_namespace: Option<String>,
    /// Where the in-process engine serves webhook receivers (none: it does not).
    pub receiver_addr: Option<std::net::SocketAddr>,
}

/// The table first: the in-process engine takes its Lease and lists Helm's records and the
/// workloads, and the READY column's workload watch starts, once the dashboard's first
/// screen is whole (its wheelhouse releases and Helm's records listed, and Flux's
/// HelmReleases, or a little later on a cluster without Flux), and at the latest
/// [`ENGINE_START_AT_MOST`] after it started.
async fn open_when_listed(
    mut views: tokio::sync::watch::Receiver<Arc<crate::engine::Views>>,
    mut others: tokio::sync::watch::Receiver<Arc<crate::frontend::inventory::Others>>,
    open: tokio::sync::watch::Sender<bool>,
) {
    let listed = async {
        let _ = views.wait_for(|v| v.listed).await;
        let _ = others.wait_for(|o| o.helm_listed).await;
        // Without Flux's CRDs its watch never lists.
        let _ = tokio::time::timeout(FLUX_LIST_GRACE, others.wait_for(|o| o.flux_listed)).await;
    };
    if tokio::time::timeout(ENGINE_START_AT_MOST, listed)
        .await
        .is_err()
    {
        tracing::debug!("the first screen is not whole yet: the engine starts anyway");
    } else {
        tracing::debug!("the first screen is whole: the engine starts");
    }
    open.send_replace(true);
}

/// See [`open_when_listed`].
const ENGINE_START_AT_MOST: Duration = Duration::from_secs(10);
const FLUX_LIST_GRACE: Duration = Duration::from_secs(2);

/// One connection: a client for a context and the engine (or engine client) on it.
struct Session {
    client: Client,
    /// How this session connected (kubeconfig and context), for helm to do the same.
    context: String,
    scope: Scope,
    handle: EngineHandle,
    /// Replica counts of the workloads in the engine's namespaces (READY column).
    replicas: Replicas,
    /// Flux HelmReleases and stored Helm releases in the same namespaces.
    inventory: Inventory,
    /// Stops this session's webhook receivers (when it serves them).
    receivers: CancellationToken,
}

impl Session {
    async fn connect(
        opts: &Options,
        context: Option<String>,
        scope: Option<Scope>,
        previous: Option<(EngineHandle, CancellationToken)>,
    ) -> Result<Self, Error> {
        let mut args = opts.cluster.clone();
        args.context = context;
        let (client, default_ns) = client::connect(&args).await.map_err(|e| {
            let home_config = std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".kube/config"))
                .is_some_and(|p| p.is_file());
            let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
            if args.kubeconfig.is_none() && !home_config && !in_cluster {
                Error::Connect(format!(
                    "no kubeconfig found ($KUBECONFIG and ~/.kube/config are not set): pass \
                     --kubeconfig, or run tests/run.sh to use the project's local control plane ({e})"
                ))
            } else {
                Error::Connect(e.to_string())
            }
        })?;
        let view = scope.unwrap_or_else(|| Scope::of(&args, default_ns.clone()));
        let coverage = client::engine_scope(&client, &view, &default_ns).await;
        // A view the engine's watch cannot show falls back to the engine's namespace.
        let scope = match (&coverage, view) {
            (Scope::Namespace(ns), Scope::All) => Scope::Namespace(ns.clone()),
            (_, view) => view,
        };
        let name = args
            .context
            .clone()
            .unwrap_or_else(|| current_context(&args));
        // Connected: now the old engine may go (it hands back the lease first), and its
        // receivers' address with it.
        if let Some((previous, receivers)) = previous {
            receivers.cancel();
            stop(&previous).await;
        }
        Self::start(opts, &args, client, name, scope, coverage).await
    }

    async fn start(
        opts: &Options,
        args: &Target,
        client: Client,
        context: String,
        scope: Scope,
        coverage: Scope,
    ) -> Result<Self, Error> {
        // The table first (see `open_when_listed`): the in-process engine's start-up and
        // the READY column's workload list wait for it.
        let (first_screen, listed) = tokio::sync::watch::channel(false);
        let replicas = Replicas::start_after(client.clone(), &coverage, Some(listed.clone()));
        let inventory =
            Inventory::start_reading_after(client.clone(), &coverage, Some(listed.clone()));
        let mut config = EngineConfig::new(coverage);
        config.chart_root = opts.chart_root.clone();
        // Rendering talks to the same cluster, as the same identity.
        let selected =
            client::selected_context(args.kubeconfig.as_deref(), args.context.as_deref());
        config.renderer = opts
            .render
            .renderer(args.kubeconfig.as_deref(), selected.as_deref());
        config.passive = opts.readonly;
        config.metrics = crate::telemetry::Metrics::unscraped();
        if let Some(ns) = &opts.lease_namespace {
            config.lease_namespace = ns.clone();
        }
        let (metrics, lease_namespace) = (config.metrics.clone(), config.lease_namespace.clone());
        config.start_after = Some(listed);
        let handle =
            engine::start(client.clone(), config).map_err(|e| Error::Connect(e.to_string()))?;
        tokio::spawn(open_when_listed(
            handle.views(),
            inventory.subscribe(),
            first_screen,
        ));
        let receivers = CancellationToken::new();
        if let Some(addr) = opts.receiver_addr {
            // A previous session's server lets the address go as its task ends.
            let mut tries = 0;
            loop {
                match crate::webhooks::receive::serve(
                    addr,
                    client.clone(),
                    lease_namespace.clone(),
                    std::sync::Arc::new(handle.pusher()),
                    metrics.clone(),
                    receivers.clone(),
                )
                .await
                {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 40 => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => {
                        handle.shutdown();
                        return Err(Error::Connect(format!(
                            "cannot serve webhook receivers on {addr}: {e}"
                        )));
                    }
                }
            }
        }
        Ok(Self {
            client,
            context,
            scope,
            handle,
            replicas,
            inventory,
            receivers,
        })
    }
}

fn current_context(args: &Target) -> String {
    let kubeconfig = match &args.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path).ok(),
        None => kube::config::Kubeconfig::read().ok(),
    };
    kubeconfig
        .and_then(|k| k.current_context)
        .unwrap_or_else(|| "in-cluster".into())
}

/// Runs the dashboard until the operator quits.
pub async fn run(opts: Options) -> Result<(), Error> {
    let config_dir: Option<PathBuf> = theme::config_dir();
    let theme = Theme::resolve(opts.theme.as_deref(), config_dir.as_deref())?;
    // Connect before touching the terminal, so a missing kubeconfig is a plain message.
    let session = Session::connect(&opts, opts.cluster.context.clone(), None, None).await?;
    let mut app = App::new(
        session.context.clone(),
        session.scope.clone(),
        opts.readonly,
        theme,
        Timestamp::now(),
    );
    app.coverage = session.handle.coverage().clone();
    app.set_favourites(match &config_dir {
        Some(dir) => favourites::Favourites::load(dir),
        None => Ok(Default::default()),
    });
    // Raw mode and the alternate screen, with a panic hook that restores the terminal.
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &mut app, session, &opts).await;
    tracing::debug!("quit: event loop left");
    // As the session: the rows of every release are the exit's to free.
    std::mem::forget(app);
    ratatui::try_restore()?;
    result
}

/// From `q` to the process gone: quitting never waits on the network longer than this.
const QUIT_BUDGET: Duration = Duration::from_millis(100);

/// Stops the engine and gives it a moment to hand back the lease, so the next wheelhouse
/// takes over at once instead of after the lease expires. The lease task drops the role
/// sender when it is done.
async fn stop(handle: &EngineHandle) {
    handle.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(3), handle.stopped()).await;
}

async fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    mut session: Session,
    opts: &Options,
) -> Result<(), Error> {
    let (input_tx, mut input) = mpsc::unbounded_channel();
    // crossterm's reader blocks; it gets its own thread and the loop a channel.
    std::thread::spawn(move || {
        while let Ok(ev) = crossterm::event::read() {
            if input_tx.send(ev).is_err() {
                break;
            }
        }
    });
    let (io_tx, mut io_rx) = mpsc::unbounded_channel::<IoResult>();
    let (session_tx, mut sessions) = mpsc::unbounded_channel::<Result<Session, String>>();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    // The terminal went away (window closed, tmux killed): quit cleanly too.
    let mut hangup = signal(SignalKind::hangup())?;
    let mut views = session.handle.views();
    let mut role = session.handle.role();
    let mut connection = session.handle.connection();
    let mut replicas = session.replicas.subscribe();
    app.set_replicas(replicas.borrow_and_update().clone());
    let mut others = session.inventory.subscribe();
    app.set_others(others.borrow_and_update().clone());
    app.set_views(views.borrow_and_update().clone());
    app.role = role.borrow_and_update().clone();
    app.tenancy = session.handle.policy();
    app.set_connection(connection.borrow_and_update().clone());
    // The detail view's data is fetched when it opens and again when the release changes.
    let mut detail_seen: Option<(view_model::RowKey, String)> = None;
    // The open log stream's task, aborted when the logs view closes or changes.
    let mut log_stream: Option<tokio::task::JoinHandle<()>> = None;
    let mut detail_in_flight = false;
    let mut detail_loaded = Instant::now();
    let mut startup = app.on_start();
    loop {
        let size = terminal.size()?;
        // Header, favourites, table borders and column header, status and hints.
        app.page = size.height.saturating_sub(8).max(1) as usize;
        terminal.draw(|f| view::draw(f, app))?;
        let mut effects = std::mem::take(&mut startup);
        tokio::select! {
            Some(ev) = input.recv() => match ev {
                Event::Key(key) if key.kind != KeyEventKind::Release => effects.extend(app.on_key(key)),
                Event::Paste(text) => {
                    if let Some(ed) = &mut app.editor {
                        ed.text.insert_str(text);
                    }
                }
                _ => {} // resize: the next draw fits the new size
            },
            Ok(()) = views.changed() => {
                app.set_views(views.borrow_and_update().clone());
            }
            Ok(()) = replicas.changed() => app.set_replicas(replicas.borrow_and_update().clone()),
            Ok(()) = others.changed() => app.set_others(others.borrow_and_update().clone()),
            Ok(()) = role.changed() => app.role = role.borrow_and_update().clone(),
            Ok(()) = connection.changed() => app.set_connection(connection.borrow_and_update().clone()),
            Some(result) = io_rx.recv() => {
                if let IoResult::Detail { .. } = &result {
                    detail_in_flight = false;
                }
                effects.extend(app.on_io(result));
            }
            Some(next) = sessions.recv() => match next {
                Ok(next) => {
                    // Already stopped by the switch; this only makes sure.
                    let old = std::mem::replace(&mut session, next);
                    tokio::spawn(async move { stop(&old.handle).await });
                    views = session.handle.views();
                    role = session.handle.role();
                    connection = session.handle.connection();
                    replicas = session.replicas.subscribe();
                    app.set_replicas(replicas.borrow_and_update().clone());
                    others = session.inventory.subscribe();
                    app.set_others(others.borrow_and_update().clone());
                    effects.extend(app.on_io(IoResult::Switched(Ok((session.context.clone(), session.scope.clone(), session.handle.coverage().clone())))));
                    app.set_views(views.borrow_and_update().clone());
                    app.role = role.borrow_and_update().clone();
                }
                Err(e) => effects.extend(app.on_io(IoResult::Switched(Err(e)))),
            },
            _ = tick.tick() => {
                app.tenancy = session.handle.policy();
                app.tick(Timestamp::now());
            }
            _ = tokio::signal::ctrl_c() => effects.push(Effect::Quit),
            _ = term.recv() => effects.push(Effect::Quit),
            _ = hangup.recv() => effects.push(Effect::Quit),
        }
        // Reload the detail data when its release changed (new resourceVersion), and every
        // few seconds for what the release object does not show (pods, tracked config).
        if let Some(d) = &app.detail
            && let Some((target, version)) = app.detail_target()
        {
            let version = (d.key.clone(), version);
            let opened = d.data == view_model::DetailData::default();
            let stale = detail_loaded.elapsed() >= DETAIL_REFRESH;
            if (opened || stale || detail_seen.as_ref() != Some(&version)) && !detail_in_flight {
                detail_in_flight = true;
                detail_loaded = Instant::now();
                detail_seen = Some(version);
                let (client, tx, key) = (session.client.clone(), io_tx.clone(), d.key.clone());
                tokio::spawn(async move {
                    let data = io::load_detail(client, target).await;
                    let _ = tx.send(IoResult::Detail { key, data });
                });
            }
        } else {
            detail_seen = None;
        }
        // The Timeline's rows follow what is watched; the records on screen are read.
        effects.extend(app.refresh_timeline());
        for effect in effects {
            // A write is audited once it is done (`io::audit`).
            let audit = app::audit_of(&effect).map(|a| (session.client.clone(), a));
            match effect {
                Effect::Quit => {
                    // The terminal first, then the Lease handed back without waiting for
                    // the engine's step (one call, a few ms), within a budget: a step cut
                    // short by the exit leaves its revision pending, which the next
                    // engine unlocks, and a Lease not handed back in time expires.
                    let pressed = Instant::now();
                    let _ = ratatui::try_restore();
                    let left = QUIT_BUDGET.saturating_sub(pressed.elapsed());
                    tracing::debug!(
                        ms = pressed.elapsed().as_millis(),
                        "quit: terminal restored"
                    );
                    if tokio::time::timeout(left, session.handle.abandon())
                        .await
                        .is_ok()
                    {
                        tracing::debug!(ms = pressed.elapsed().as_millis(), "quit: lease let go");
                    } else {
                        tracing::warn!(
                            "quit before the engine ended its step ({} ms); its Lease expires on its own",
                            QUIT_BUDGET.as_millis()
                        );
                    }
                    // The process ends now: freeing tens of thousands of watched objects
                    // one by one took longer than the rest of the quit. What the exit
                    // would not tidy, the remote clusters' kubeconfig files, goes first.
                    session.handle.remove_credentials();
                    std::mem::forget(session);
                    return Ok(());
                }
                Effect::Redraw => terminal.clear()?,
                // Fetched by the reload check above on the next turn.
                Effect::LoadDetail(_) => detail_seen = None,
                Effect::StreamLogs(source) => {
                    if let Some(old) = log_stream.take() {
                        old.abort();
                    }
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    log_stream = Some(tokio::spawn(io::stream_logs(client, source, tx)));
                }
                Effect::StopLogs => {
                    if let Some(old) = log_stream.take() {
                        old.abort();
                    }
                }
                Effect::LoadChanges { request, of } => {
                    let (client, handle, tx) = (
                        session.client.clone(),
                        session.handle.clone(),
                        io_tx.clone(),
                    );
                    tokio::spawn(async move {
                        let result = io::load_changes(client, handle, of).await;
                        let _ = tx.send(IoResult::Changes { request, result });
                    });
                }
                Effect::ReadRevisions(records) => {
                    for record in records {
                        let (client, tx) = (session.client.clone(), io_tx.clone());
                        tokio::spawn(async move {
                            let change =
                                tokio::time::timeout(io::LIMIT, io::read_revision(client, &record))
                                    .await
                                    .ok()
                                    .flatten();
                            let _ = tx.send(IoResult::TimelineRevision(record, change));
                        });
                    }
                }
                Effect::LoadUser => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    let fallback = session.context.clone();
                    tokio::spawn(async move {
                        let user = tokio::time::timeout(io::LIMIT, client::username(&client))
                            .await
                            .ok()
                            .flatten()
                            .unwrap_or_else(|| format!("a user of context {fallback}"));
                        let _ = tx.send(IoResult::User(user));
                    });
                }
                Effect::Send { id, command } => {
                    let (handle, tx) = (session.handle.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::send(handle, command).await;
                        report_write(id, result, tx, audit).await;
                    });
                }
                Effect::Flux { id, key, request } => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::send_flux(client, key, request).await;
                        report_write(id, result, tx, audit).await;
                    });
                }
                Effect::Stored { id, key, action } => {
                    let (handle, tx) = (session.handle.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::act_on_stored(handle, key, action).await;
                        report_write(id, result, tx, audit).await;
                    });
                }
                Effect::PatchValues {
                    id,
                    key,
                    original,
                    values,
                } => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::patch_values(client, key, original, values).await;
                        report_write(id, result, tx, audit).await;
                    });
                }
                Effect::LoadCompletions => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let _ = tx.send(IoResult::Namespaces(io::list_namespaces(client).await));
                    });
                    let (path, tx) = (opts.cluster.kubeconfig.clone(), io_tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let _ =
                            tx.send(IoResult::Contexts(io::kubeconfig_contexts(path.as_deref())));
                    });
                }
                Effect::SaveFavourites(favourites) => {
                    let tx = io_tx.clone();
                    tokio::task::spawn_blocking(move || {
                        let result = match theme::config_dir() {
                            Some(dir) => favourites.save(&dir),
                            None => Err("no config directory (is HOME set?)".to_owned()),
                        };
                        let _ = tx.send(IoResult::FavouritesSaved(result));
                    });
                }
                Effect::Freeze {
                    id,
                    names,
                    duration,
                    reason,
                } => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::freeze(client, names, duration, reason).await;
                        let _ = tx.send(IoResult::Done { id, result });
                    });
                }
                Effect::Thaw { id, names } => {
                    let (client, tx) = (session.client.clone(), io_tx.clone());
                    tokio::spawn(async move {
                        let result = io::thaw(client, names).await;
                        let _ = tx.send(IoResult::Done { id, result });
                    });
                }
                Effect::SwitchContext(context) => {
                    let (opts, tx) = (opts.clone(), session_tx.clone());
                    let keep_all = matches!(session.scope, Scope::All).then_some(Scope::All);
                    let old = (session.handle.clone(), session.receivers.clone());
                    tokio::spawn(async move {
                        let next = tokio::time::timeout(
                            io::LIMIT,
                            Session::connect(&opts, Some(context), keep_all, Some(old)),
                        )
                        .await
                        .unwrap_or_else(|_| Err(Error::Connect("timed out".into())));
                        let _ = tx.send(next.map_err(|e| e.to_string()));
                    });
                }
            }
        }
    }
}

/// Tells the UI loop how a write ended, and, for one still in flight when the dashboard
/// stopped waiting, how it ended after all.
/// Reports a write's end, and audits it once it is known to be done (at once, or when a
/// late answer says it was applied).
async fn report_write(
    id: u64,
    mut result: Result<(), io::WriteError>,
    tx: mpsc::UnboundedSender<IoResult>,
    audit: Option<(kube::Client, io::Audit)>,
) {
    let late = result.as_mut().err().and_then(io::WriteError::take_late);
    let done = result.is_ok();
    let _ = tx.send(IoResult::written(id, result));
    let applied = match late {
        Some(late) => {
            let outcome = late.outcome().await;
            let applied = outcome == io::LateOutcome::Applied;
            let _ = tx.send(IoResult::Late { id, outcome });
            applied
        }
        None => false,
    };
    if let (true, Some((client, audit))) = (done || applied, audit) {
        io::audit(client, audit).await;
    }
}

/// Draws the app into a test backend: what snapshot tests and the benchmark use.
pub fn render(
    app: &App,
    width: u16,
    height: u16,
) -> ratatui::Terminal<ratatui::backend::TestBackend> {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
        .expect("test backend");
    terminal.draw(|f| view::draw(f, app)).expect("draw");
    terminal
}

/// The shared views of a set of releases, for tests and the benchmark.
pub fn views_of(views: impl IntoIterator<Item = engine::ReleaseView>) -> Arc<engine::Views> {
    Arc::new(views.into_iter().collect())
}

#[cfg(test)]
mod tests;
