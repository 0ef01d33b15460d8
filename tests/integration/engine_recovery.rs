//! The engine picks up new chart versions from an HTTP repository, and recovers a
//! release left pending by an engine that was killed mid-upgrade.

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use support::engine::{
    self as eng, helm, helm_history, install_webapp, is, set_values, wait_for, waiting_on,
};
use support::source::{Entry, RepoServer, chart_tgz, index_yaml, sha256_hex};
use support::{TestNamespace, client, install_crd, kubeconfig_path, testbin};
use wheelhouse::api::HelmRelease;

fn publish(repo: &RepoServer, versions: &[&str]) {
    let mut entries = Vec::new();
    for v in versions {
        let tgz = chart_tgz("demo", v, v);
        let path = format!("/charts/demo-{v}.tgz");
        entries.push(Entry {
            name: "demo",
            version: v,
            app_version: v,
            url: repo.url(&path),
            digest: Some(sha256_hex(&tgz)),
        });
        repo.put(&path, tgz);
    }
    repo.put("/index.yaml", index_yaml(&entries));
}

#[tokio::test]
async fn upgrades_when_a_new_chart_version_is_published() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "eng-repo").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let repo = RepoServer::start().await;
    publish(&repo, &["1.0.0"]);
    let _engine = eng::start(&client, &ns.name).await;

    let hr: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
        "metadata": {"name": "demo"},
        "spec": {"chart": {"repository": repo.url(""), "name": "demo", "version": ">=1.0.0 <2.0.0"},
                 "interval": "2s"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &hr).await.unwrap();
    wait_for(&api, "demo", "1.0.0 installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // A new version in range appears; the next interval picks it up.
    publish(&repo, &["1.0.0", "1.1.0", "2.0.0"]);
    let hr = wait_for(&api, "demo", "upgraded to 1.1.0", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].chart_version == "1.1.0"
    })
    .await;
    assert_eq!(
        hr.status.unwrap().last_attempted_revision.as_deref(),
        Some("1.1.0")
    );
    let list: serde_json::Value =
        serde_json::from_str(&helm(&ns.name, &["list", "-o", "json"])).unwrap();
    assert_eq!(list[0]["chart"], "demo-1.1.0");
    ns.delete().await;
}

/// `wheelhouse controller` as a separate process, so the test can kill it.
struct Controller(Child);

impl Controller {
    fn start(ns: &str) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            .args(["controller", "--namespace", ns, "--lease-namespace", ns])
            .env("KUBECONFIG", kubeconfig_path())
            .env("WHEELHOUSE_HELM", testbin().join("helm"))
            .env("WHEELHOUSE_RENDER_HELPER", support::render_helper())
            .env("WHEELHOUSE_LOG", "info,kube=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start wheelhouse controller");
        Self(child)
    }

    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }

    /// SIGTERM, as Kubernetes stops a pod, and waits for the graceful exit.
    fn terminate(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let exit = self.0.wait().unwrap();
        assert!(exit.success(), "controller exit on SIGTERM: {exit:?}");
    }
}

#[tokio::test]
async fn an_engine_killed_mid_upgrade_is_recovered_on_restart() {
    recovers_after_stop("eng-killed", Controller::kill).await;
}

#[tokio::test]
async fn an_engine_terminated_mid_upgrade_leaves_it_pending_and_is_recovered() {
    recovers_after_stop("eng-term", Controller::terminate).await;
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An engine stopped (`stop`) while it waits on an upgrade: the revision stays pending,
/// and the next engine unlocks it and applies the newest desired state.
async fn recovers_after_stop(prefix: &str, stop: fn(Controller)) {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, prefix).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let controller = Controller::start(&ns.name);
    install_webapp(&api, "web", serde_json::json!({"timeout": "5m"})).await;

    // An upgrade whose pods never become ready: the engine sits in its wait...
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    waiting_on(&api, "web", 2).await;
    assert_eq!(helm_history(&ns.name, "web")[1].1, "pending-upgrade");

    // ...when it stops. Helm would now refuse every operation on the release.
    stop(controller);
    assert_eq!(helm_history(&ns.name, "web")[1].1, "pending-upgrade");
    set_values(&api, "web", serde_json::json!({"behavior": ""})).await;

    // A new engine takes the lease (at once after a graceful stop, which hands it back;
    // once it expires after a kill), unlocks revision 2 and applies the fix.
    let _controller = Controller::start(&ns.name);
    let hr = tokio::time::timeout(
        Duration::from_secs(90),
        wait_for(&api, "web", "recovered", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
                && h.status.as_ref().unwrap().history[0].version == 3
        }),
    )
    .await
    .expect("recovered within 90s");
    assert!(hr.status.unwrap().wait.is_none());
    let history = helm_history(&ns.name, "web");
    let described: Vec<_> = history
        .iter()
        .map(|(r, s, d)| format!("{r} {s} {d}"))
        .collect();
    assert_eq!(history.len(), 3, "{described:#?}");
    assert!(
        history[1]
            .2
            .starts_with("Release was left pending-upgrade by an engine that stopped"),
        "{described:#?}"
    );
    assert_eq!(
        (history[2].1.as_str(), history[2].2.as_str()),
        ("deployed", "Upgrade complete")
    );
    ns.delete().await;
}

/// Issue #17: an engine stopped (SIGTERM, as in a rolling restart) during a health check,
/// the desired state unchanged: the next engine resumes that wait where it was (same
/// start, same deadline) instead of marking the revision failed and applying it again.
#[tokio::test]
async fn a_wait_left_by_a_terminated_engine_is_resumed_not_failed() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "eng-resume").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let controller = Controller::start(&ns.name);
    install_webapp(&api, "web", serde_json::json!({"timeout": "5m"})).await;
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    let before = waiting_on(&api, "web", 2).await;
    let began = before.status.unwrap().wait.unwrap();
    controller.terminate();
    assert_eq!(helm_history(&ns.name, "web")[1].1, "pending-upgrade");

    let _controller = Controller::start(&ns.name);
    eng::assert_wait_resumed_then_deployed(&client, &api, &ns.name, &began).await;
    ns.delete().await;
}

/// Issue #35: wheelhouse upgraded during a wait. The controller of the previous build
/// (`tests/previous_build.sh`, with its own render helper) stopped by SIGTERM while it
/// waits on a rollout, then this build started: it resumes the wait the previous build
/// began (same window) instead of failing the revision. The cluster holds this build's
/// CRD throughout (other tests share it); its changes are additive, which is what lets the
/// previous build run on it.
#[tokio::test]
async fn a_wait_left_by_the_previous_build_is_resumed_by_this_one() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "eng-upgrade").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let args = ["--namespace", &ns.name, "--lease-namespace", &ns.name];
    let mut previous =
        support::controller::Controller::start_other_build(&support::previous_build(), &args);
    install_webapp(&api, "web", serde_json::json!({"timeout": "5m"})).await;
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    let before = waiting_on(&api, "web", 2).await;
    let began = before.status.unwrap().wait.unwrap();
    previous.terminate();
    assert!(
        previous.exited_within(support::PATIENCE).await,
        "the previous build did not stop on SIGTERM:\n{}",
        previous.log()
    );
    assert_eq!(helm_history(&ns.name, "web")[1].1, "pending-upgrade");

    let this = support::controller::Controller::start(&args);
    eng::assert_wait_resumed_then_deployed(&client, &api, &ns.name, &began).await;
    let log = this.log();
    assert!(!log.contains("\"level\":\"ERROR\""), "{log}");
    ns.delete().await;
}

/// `helm upgrade --wait` by hand is still running when a HelmRelease for the same release
/// appears: the engine leaves helm's pending revision alone (and says so) instead of
/// marking it failed under helm's feet, and takes over once helm's operation has ended.
#[tokio::test]
async fn a_helm_upgrade_still_running_by_hand_is_never_unlocked_under_it() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "other-actor").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let webapp = support::engine::chart("webapp");
    support::engine::helm(&ns.name, &["install", "web", &webapp, "--wait"]);
    // helm waits on pods that never become ready, for up to 20 s.
    let by_hand = Command::new(testbin().join("helm"))
        .args(["upgrade", "web", &webapp, "--set", "behavior=never-ready"])
        .args([
            "--wait",
            "--timeout",
            "20s",
            "--namespace",
            &ns.name,
            "--kubeconfig",
        ])
        .arg(kubeconfig_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("helm runs");
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !support::engine::helm_try(&ns.name, &["history", "web"])
        .1
        .contains("pending-upgrade")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "helm never stored its pending revision"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let _engine = support::engine::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &support::engine::webapp("web", serde_json::json!({"values": {"message": "mine"}})),
    )
    .await
    .unwrap();
    let waiting = support::engine::wait_for(&api, "web", "left alone", |h| {
        h.condition("Reconciling")
            .is_some_and(|c| c.message.contains("written by another tool"))
    })
    .await;
    let message = waiting.condition("Reconciling").unwrap().message.clone();
    assert!(
        message.contains("revision 2 is pending-upgrade"),
        "{message}"
    );
    let history = support::engine::helm_history(&ns.name, "web");
    assert_eq!(history[1].1, "pending-upgrade", "{history:?}");

    // helm ends on its own terms (its wait times out) ...
    let output = tokio::task::spawn_blocking(move || by_hand.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && said.contains("UPGRADE FAILED"),
        "{said}"
    );
    // ... then the HelmRelease's own upgrade runs.
    support::engine::wait_for(&api, "web", "upgraded by wheelhouse", |h| {
        support::engine::is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    let history = support::engine::helm_history(&ns.name, "web");
    assert_eq!(history.len(), 3, "{history:#?}");
    assert_eq!(history[1].1, "failed", "{history:#?}");
    assert!(
        !history[1].2.starts_with("Release was left"),
        "helm's own failure: {history:#?}"
    );
    assert_eq!(history[2].1, "deployed");
    ns.delete().await;
}

/// The engine's own render helper killed twice (kill -9) and then frozen for longer than
/// the render timeout, while 12 releases install and then upgrade, all with default
/// retries: every render the helper held is tried again on a new helper, each death is
/// logged with its status, and every release ends Ready with no failure counted, none
/// Stalled.
#[tokio::test]
async fn a_dying_and_freezing_render_helper_costs_no_release_anything() {
    use support::process::children_named;
    let (_client, ns, api) = eng::setup("helper-faults").await;
    let controller = support::controller::Controller::start_with_env(
        &["-n", &ns.name, "--lease-namespace", &ns.name],
        &[("WHEELHOUSE_RENDER_TIMEOUT", "4s")],
    );
    let pid = controller.pid();
    let helper = || {
        let deadline = std::time::Instant::now() + support::PATIENCE;
        loop {
            if let Some(p) = children_named(pid, "wheelhouse-render").first() {
                return *p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no render helper under the controller; its log:\n{}",
                controller.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let signal = |sig: &str, p: u32| {
        assert!(
            Command::new("kill")
                .args([sig, &p.to_string()])
                .status()
                .unwrap()
                .success()
        );
    };
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !controller.log().contains("engine lease acquired") {
        assert!(std::time::Instant::now() < deadline, "{}", controller.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    const RELEASES: usize = 12;
    let names: Vec<String> = (0..RELEASES).map(|i| format!("web-{i}")).collect();
    for name in &names {
        api.create(
            &PostParams::default(),
            &eng::webapp(name, serde_json::json!({"values": {"replicaCount": 1}})),
        )
        .await
        .unwrap();
    }
    // Killed while the installs render, twice.
    let first = helper();
    signal("-KILL", first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = loop {
        let p = helper();
        if p != first {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    signal("-KILL", second);
    for name in &names {
        wait_for(&api, name, "installed", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
    }
    // Frozen for longer than the render timeout while the releases upgrade. The first
    // upgrade is seen through first, so the helper frozen is one that is up and renders
    // (one frozen as it starts is `render::helper`'s unit test): the freeze hits renders.
    set_values(
        &api,
        &names[0],
        serde_json::json!({"replicaCount": 1, "message": "v2"}),
    )
    .await;
    wait_for(&api, &names[0], "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    let frozen: Vec<u32> = children_named(pid, "wheelhouse-render")
        .into_iter()
        .filter(|p| *p != first && *p != second)
        .collect();
    assert!(!frozen.is_empty(), "{}", controller.log());
    for p in &frozen {
        signal("-STOP", *p);
    }
    for name in &names[1..] {
        set_values(
            &api,
            name,
            serde_json::json!({"replicaCount": 1, "message": "v2"}),
        )
        .await;
    }
    // Held frozen until the engine gives it up (its renders time out after 4 s), then
    // let go: stopped by the engine by then, or free to go on if it was not.
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !controller.log().contains("the render helper is replaced") {
        assert!(
            std::time::Instant::now() < deadline,
            "the freeze is not logged:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for p in &frozen {
        let _ = Command::new("kill")
            .args(["-CONT", &p.to_string()])
            .status();
    }
    for name in &names {
        wait_for(&api, name, "upgraded", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
        })
        .await;
    }
    for hr in api.list(&Default::default()).await.unwrap() {
        let status = hr.status.clone().unwrap_or_default();
        assert_eq!(
            (
                status.failures,
                status.install_failures,
                status.upgrade_failures
            ),
            (0, 0, 0),
            "{:?} counted a failure: {status:#?}",
            hr.metadata.name
        );
        assert!(hr.condition("Stalled").is_none_or(|c| c.status != "True"));
        assert_eq!(
            helm_history(&ns.name, hr.metadata.name.as_deref().unwrap()).len(),
            2
        );
    }
    let log = controller.log();
    let deaths = log
        .lines()
        .filter(|l| {
            // Seen by its reaper, or by its start when it was killed before it was ready.
            (l.contains("the render helper exited") || l.contains("failed as it started"))
                && l.contains("signal: 9")
        })
        .count();
    assert_eq!(deaths, 2, "each kill is logged with its status:\n{log}");
    ns.delete().await;
}
