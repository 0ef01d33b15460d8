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
pub mod fleet;
pub mod fleet_model;
pub mod io;
pub mod keymap;
pub mod session;
pub mod suspension;
pub mod theme;
pub mod view;
pub mod view_model;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyEventKind};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cluster::client::{self, Scope};
use crate::engine::{self, EngineHandle};
use app::App;
use effect::{Effect, IoResult};
use fleet::{FleetMessage, MemberIo};
pub use session::{Error, Options};
use session::{Session, stop};
use theme::Theme;
use view_model::Cluster;

/// How often the open detail view re-reads pods, workloads and tracked config, which
/// change without the release object changing.
const DETAIL_REFRESH: Duration = Duration::from_secs(3);
/// Runs the dashboard until the operator quits.
pub async fn run(opts: Options) -> Result<(), Error> {
    let config_dir: Option<PathBuf> = theme::config_dir();
    let theme = Theme::resolve(opts.theme.as_deref(), config_dir.as_deref())?;
    // Connect before touching the terminal, so a missing kubeconfig is a plain message.
    let (session, opts) = connect_home(opts).await?;
    let mut app = App::new(
        session.context.clone(),
        session.scope.clone(),
        opts.readonly,
        theme,
        Timestamp::now(),
    );
    app.coverage = session.handle.coverage().clone();
    app.fleet = fleet_model::Fleet::of(&opts.fleet, &opts.engine_contexts);
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

/// The dashboard's own session. In a fleet, a context that cannot be connected (or whose
/// credentials its server refuses) does not stop the dashboard: the next context of the
/// fleet becomes its own, and the failed one a tile that says why.
async fn connect_home(mut opts: Options) -> Result<(Session, Options), Error> {
    let mut tries = opts.fleet.len() + 1;
    loop {
        let context = opts.cluster.context.clone();
        let checked = match (&context, opts.fleet.is_empty()) {
            (Some(name), false) => crate::cluster::fleet::connect_context(&opts.cluster, name)
                .await
                .map(|_| ())
                .map_err(|f| Error::Connect(format!("{name}: {}", f.message()))),
            _ => Ok(()),
        };
        let connected = match checked {
            Ok(()) => Session::connect(&opts, context.clone(), None, None).await,
            Err(e) => Err(e),
        };
        tries -= 1;
        match (connected, context) {
            (Ok(session), _) => return Ok((session, opts)),
            (Err(e), Some(failed)) if !opts.fleet.is_empty() && tries > 0 => {
                tracing::warn!(error = %e, "fleet: the dashboard's own context failed; the next one is");
                let next = opts.fleet.remove(0);
                // The engine runs where it was asked to, never moved to another cluster.
                if opts.engine {
                    opts.engine_contexts.push(failed.clone());
                }
                opts.engine = opts.engine_contexts.contains(&next);
                opts.engine_contexts.retain(|c| *c != next);
                opts.fleet.push(failed);
                opts.cluster.context = Some(next);
            }
            (Err(e), _) => return Err(e),
        }
    }
}

/// From `q` to the process gone: quitting never waits on the network longer than this.
const QUIT_BUDGET: Duration = Duration::from_millis(100);

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
    // The fleet's other clusters, each on its own tasks (see `fleet`), and the IO of
    // those connected; the dashboard's own cluster is probed as they are.
    let (fleet_tx, mut fleet_rx) = mpsc::unbounded_channel::<FleetMessage>();
    let mut members: HashMap<Cluster, MemberIo> = HashMap::new();
    let fleet_stop = CancellationToken::new();
    let _fleet_stopped = fleet_stop.clone().drop_guard();
    start_fleet(opts, &session, &fleet_tx, &fleet_stop);
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
    let mut tasks = Tasks {
        io: io_tx,
        sessions: session_tx,
        log_stream: None,
        detail_seen: None,
        detail_in_flight: false,
        detail_loaded: Instant::now(),
        servers: crate::cluster::fleet::servers(opts.cluster.kubeconfig.as_deref()),
    };
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
            Some(message) = fleet_rx.recv() => match message {
                FleetMessage::Up(cluster, io) => {
                    members.insert(cluster, *io);
                }
                FleetMessage::Update(cluster, update) => app.on_fleet(&cluster, update),
            },
            Some(result) = io_rx.recv() => {
                if let IoResult::Detail { .. } = &result {
                    tasks.detail_in_flight = false;
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
        reload_detail(app, &session, &members, &mut tasks);
        // The Timeline's rows follow what is watched; the records on screen are read.
        effects.extend(app.refresh_timeline());
        for effect in effects {
            if let Flow::Quit = perform(effect, terminal, &session, &members, &mut tasks, opts)? {
                quit(session, &members).await;
                return Ok(());
            }
        }
    }
}

/// The fleet's other clusters, each on tasks of its own (see `fleet`), and the probe of
/// the dashboard's own cluster beside them.
fn start_fleet(
    opts: &Options,
    session: &Session,
    fleet_tx: &mpsc::UnboundedSender<FleetMessage>,
    fleet_stop: &CancellationToken,
) {
    if opts.fleet.is_empty() {
        return;
    }
    let view_all = matches!(session.scope, Scope::All);
    for name in &opts.fleet {
        let engine = opts.engine_contexts.contains(name);
        fleet::start_member(
            opts,
            Cluster::from(name.as_str()),
            engine,
            view_all,
            fleet_tx.clone(),
            fleet_stop.clone(),
        );
    }
    fleet::probe(
        session.client.clone(),
        Cluster::from(session.context.as_str()),
        fleet_tx.clone(),
        fleet_stop.clone(),
    );
}

/// Reloads the detail data when its release changed (new resourceVersion), and every
/// few seconds for what the release object does not show (pods, tracked config).
fn reload_detail(
    app: &App,
    session: &Session,
    members: &HashMap<Cluster, MemberIo>,
    tasks: &mut Tasks,
) {
    if let Some(d) = &app.detail
        && let Some((target, version)) = app.detail_target()
    {
        let version = (d.key.clone(), version);
        let opened = d.data == view_model::DetailData::default();
        let stale = tasks.detail_loaded.elapsed() >= DETAIL_REFRESH;
        if (opened || stale || tasks.detail_seen.as_ref() != Some(&version))
            && !tasks.detail_in_flight
        {
            tasks.detail_in_flight = true;
            tasks.detail_loaded = Instant::now();
            tasks.detail_seen = Some(version);
            // A fleet row's detail is read from its own cluster; a remote release's
            // records in whichever connected cluster its kubeconfig names.
            let client = io_of(d.key.cluster.as_ref(), session, members).map(|(c, _)| c.clone());
            let fleet = match target.remote {
                Some(_) => reachable(session, members, &tasks.servers),
                None => Vec::new(),
            };
            let (tx, key) = (tasks.io.clone(), d.key.clone());
            if let Some(client) = client {
                tokio::spawn(async move {
                    let data = io::load_detail(client, target, fleet).await;
                    let _ = tx.send(IoResult::Detail {
                        key,
                        data: Box::new(data),
                    });
                });
            }
        }
    } else {
        tasks.detail_seen = None;
    }
}

/// The clusters the dashboard is connected to, with the server each one's context names.
fn reachable(
    session: &Session,
    members: &HashMap<Cluster, MemberIo>,
    servers: &[(String, String)],
) -> Vec<io::Reachable> {
    let server = |context: &str| {
        servers
            .iter()
            .find(|(c, _)| c == context)
            .map(|(_, s)| s.clone())
    };
    let own = server(&session.context).map(|server| io::Reachable {
        cluster: None,
        context: session.context.clone(),
        server,
        client: session.client.clone(),
    });
    let others = members.iter().filter_map(|(cluster, m)| {
        Some(io::Reachable {
            cluster: Some(cluster.clone()),
            context: cluster.to_string(),
            server: server(cluster)?,
            client: m.client.clone(),
        })
    });
    own.into_iter().chain(others).collect()
}

/// What the loop keeps of the IO it started: where the tasks' results go, the open log
/// stream, and when the detail view's data was loaded.
struct Tasks {
    io: mpsc::UnboundedSender<IoResult>,
    sessions: mpsc::UnboundedSender<Result<Session, String>>,
    /// The open log stream's task, aborted when the logs view closes or changes.
    log_stream: Option<tokio::task::JoinHandle<()>>,
    /// The detail view's release and resourceVersion its data was loaded for.
    detail_seen: Option<(view_model::RowKey, String)>,
    /// The API server each context of the kubeconfig names (a remote release is read in
    /// the one its kubeconfig names).
    servers: Vec<(String, String)>,
    detail_in_flight: bool,
    detail_loaded: Instant,
}

enum Flow {
    Go,
    Quit,
}

/// Carries out one effect of the app: IO on a task whose result comes back as an
/// [`IoResult`], never awaited here. Long by design: one short arm per kind of effect, so
/// everything the dashboard does to the world reads as one table.
fn perform(
    effect: Effect,
    terminal: &mut ratatui::DefaultTerminal,
    session: &Session,
    members: &HashMap<Cluster, MemberIo>,
    tasks: &mut Tasks,
    opts: &Options,
) -> Result<Flow, Error> {
    // A write is audited once it is done (`io::audit`).
    let audit = app::audit_of(&effect).map(|a| (session.client.clone(), a));
    match effect {
        Effect::Quit => return Ok(Flow::Quit),
        Effect::Redraw => terminal.clear()?,
        // Fetched by the reload check above on the next turn.
        Effect::LoadDetail(_) => tasks.detail_seen = None,
        Effect::StopLogs => {
            if let Some(old) = tasks.log_stream.take() {
                old.abort();
            }
        }
        read @ (Effect::StreamLogs(_)
        | Effect::LoadChanges { .. }
        | Effect::LoadAudit { .. }
        | Effect::ReadRevisions(_)) => read_in_its_cluster(read, session, members, tasks),
        Effect::LoadUser => {
            let (client, tx) = (session.client.clone(), tasks.io.clone());
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
        write @ (Effect::Send { .. } | Effect::Flux { .. } | Effect::Stored { .. }) => {
            spawn_write(write, &session.client, &session.handle, &tasks.io);
        }
        // Another cluster's write: with its own client and engine handle only.
        Effect::In { cluster, effect } => match members.get(&cluster) {
            Some(m) => spawn_write(*effect, &m.client, &m.handle, &tasks.io),
            None => {
                if let Some(id) = app::write_id(&effect) {
                    let refused = io::WriteError::Refused(format!(
                        "{cluster} is not connected: nothing was sent"
                    ));
                    refuse_write(id, refused, &tasks.io);
                }
            }
        },
        Effect::PatchValues {
            id,
            key,
            original,
            values,
        } => {
            let (client, tx) = (session.client.clone(), tasks.io.clone());
            tokio::spawn(async move {
                let result = io::patch_values(client, key, original, values).await;
                report_write(id, result, tx, audit).await;
            });
        }
        Effect::LoadCompletions => {
            let (client, tx) = (session.client.clone(), tasks.io.clone());
            tokio::spawn(async move {
                let _ = tx.send(IoResult::Namespaces(io::list_namespaces(client).await));
            });
            let (path, tx) = (opts.cluster.kubeconfig.clone(), tasks.io.clone());
            tokio::task::spawn_blocking(move || {
                let _ = tx.send(IoResult::Contexts(io::kubeconfig_contexts(path.as_deref())));
            });
        }
        Effect::SaveFavourites(favourites) => {
            let tx = tasks.io.clone();
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
            let (client, tx) = (session.client.clone(), tasks.io.clone());
            tokio::spawn(async move {
                let result = io::freeze(client, names, duration, reason).await;
                let _ = tx.send(IoResult::Done { id, result });
            });
        }
        Effect::Thaw { id, names } => {
            let (client, tx) = (session.client.clone(), tasks.io.clone());
            tokio::spawn(async move {
                let result = io::thaw(client, names).await;
                let _ = tx.send(IoResult::Done { id, result });
            });
        }
        Effect::SwitchContext(context) => {
            let (opts, tx) = (opts.clone(), tasks.sessions.clone());
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
    Ok(Flow::Go)
}

/// A read of a row's cluster: with that cluster's own client and engine handle, and
/// answered "not connected" when it has none (never read through another cluster).
fn read_in_its_cluster(
    effect: Effect,
    session: &Session,
    members: &HashMap<Cluster, MemberIo>,
    tasks: &mut Tasks,
) {
    match effect {
        Effect::StreamLogs(source) => {
            if let Some(old) = tasks.log_stream.take() {
                old.abort();
            }
            // Another cluster's pod: with its own client.
            let tx = tasks.io.clone();
            match io_of(source.cluster.as_ref(), session, members) {
                Some((client, _)) => {
                    let client = client.clone();
                    tasks.log_stream = Some(tokio::spawn(io::stream_logs(client, source, tx)));
                }
                None => {
                    let failed = Some(format!(
                        "{} is not connected",
                        cluster_name(&source.cluster)
                    ));
                    let stream = source.stream;
                    let _ = tx.send(IoResult::LogEnd { stream, failed });
                }
            }
        }
        Effect::LoadChanges {
            request,
            of,
            cluster,
        } => {
            let tx = tasks.io.clone();
            // Another cluster's revisions and engine: with its own client and handle.
            let Some((client, handle)) = io_of(cluster.as_ref(), session, members) else {
                let result = Err(format!("{} is not connected", cluster_name(&cluster)));
                let _ = tx.send(IoResult::Changes { request, result });
                return;
            };
            let (client, handle) = (client.clone(), handle.clone());
            tokio::spawn(async move {
                let result = io::load_changes(client, handle, of).await;
                let _ = tx.send(IoResult::Changes { request, result });
            });
        }
        Effect::LoadAudit { cluster, scope } => {
            if let Some((client, _)) = io_of(cluster.as_ref(), session, members) {
                let (client, tx) = (client.clone(), tasks.io.clone());
                tokio::spawn(async move {
                    let audited = crate::frontend::timeline::collect::audited(&client, &scope);
                    let changes = tokio::time::timeout(io::LIMIT, audited).await.ok();
                    let _ = tx.send(IoResult::Audited { cluster, changes });
                });
            }
        }
        Effect::ReadRevisions(records) => {
            for record in records {
                // Not connected: its row keeps what its labels say.
                let Some((client, _)) = io_of(record.cluster.as_ref(), session, members) else {
                    continue;
                };
                let client = client.clone();
                let tx = tasks.io.clone();
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
        // `perform` sends only the reads above here.
        _ => {}
    }
}

/// The terminal first, then the Lease handed back without waiting for the engine's step
/// (one call, a few ms), within a budget: a step cut short by the exit leaves its revision
/// pending, which the next engine unlocks, and a Lease not handed back in time expires.
async fn quit(session: Session, members: &HashMap<Cluster, MemberIo>) {
    let pressed = Instant::now();
    let _ = ratatui::try_restore();
    let left = QUIT_BUDGET.saturating_sub(pressed.elapsed());
    tracing::debug!(
        ms = pressed.elapsed().as_millis(),
        "quit: terminal restored"
    );
    // The fleet's engines let their Leases go at the same time.
    let engines: Vec<EngineHandle> = std::iter::once(session.handle.clone())
        .chain(
            members
                .values()
                .filter(|m| m.engine)
                .map(|m| m.handle.clone()),
        )
        .collect();
    let abandon = futures::future::join_all(engines.iter().map(|h| h.abandon()));
    if tokio::time::timeout(left, abandon).await.is_ok() {
        tracing::debug!(ms = pressed.elapsed().as_millis(), "quit: lease let go");
    } else {
        tracing::warn!(
            "quit before the engine ended its step ({} ms); its Lease expires on its own",
            QUIT_BUDGET.as_millis()
        );
    }
    // The process ends now, without freeing what it watches (`main` forgets the
    // runtime): freeing tens of thousands of watched objects one by one, the fleet's
    // members' in their tasks, took longer than the rest of the quit. What the exit
    // would not tidy, the remote clusters' kubeconfig files of every engine, goes first.
    session.handle.remove_credentials();
    for member in members.values() {
        member.handle.remove_credentials();
    }
    std::mem::forget(session);
}

/// The client and engine handle of `cluster` (`None`: the dashboard's own); `None` for a
/// fleet member not connected. Nothing falls back to another cluster's.
fn io_of<'a>(
    cluster: Option<&Cluster>,
    session: &'a Session,
    members: &'a HashMap<Cluster, MemberIo>,
) -> Option<(&'a kube::Client, &'a EngineHandle)> {
    match cluster {
        None => Some((&session.client, &session.handle)),
        Some(c) => members.get(c).map(|m| (&m.client, &m.handle)),
    }
}

/// A cluster's name in a message (`None`: the dashboard's own).
fn cluster_name(cluster: &Option<Cluster>) -> &str {
    cluster.as_deref().unwrap_or("this cluster")
}

/// Carries out a write (`Send`, `Flux` or `Stored`) on a task with `client` and `handle`:
/// those of the cluster the release lives in.
fn spawn_write(
    write: Effect,
    client: &kube::Client,
    handle: &EngineHandle,
    tx: &mpsc::UnboundedSender<IoResult>,
) {
    let (client, handle, tx) = (client.clone(), handle.clone(), tx.clone());
    // Audited in the write's own cluster, as the identity that made it there.
    let audit = app::audit_of(&write).map(|a| (client.clone(), a));
    tokio::spawn(async move {
        let (id, result) = match write {
            Effect::Send { id, command } => (id, io::send(handle, command).await),
            Effect::Flux { id, key, request } => (id, io::send_flux(client, key, request).await),
            Effect::Stored { id, key, action } => {
                (id, io::act_on_stored(handle, key, action).await)
            }
            _ => return,
        };
        report_write(id, result, tx, audit).await;
    });
}

/// A write refused before it was sent, reported as its answer.
fn refuse_write(id: u64, refused: io::WriteError, tx: &mpsc::UnboundedSender<IoResult>) {
    let _ = tx.send(IoResult::written(id, Err(refused)));
}

/// Tells the UI loop how a write ended (and, for one still in flight when the dashboard
/// stopped waiting, how it ended after all), and audits it once it is known to be done
/// (at once, or when a late answer says it was applied).
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
