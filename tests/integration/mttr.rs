//! The fix arrives at once, whatever carries it (issue #32): every kind of new desired
//! state is tried after a stall with fresh retries (and an unchanged one never resets
//! them); a registry's push notification and a signed GitHub push wake their releases
//! at once while bad calls wake nothing; and a fix takes the next render slot ahead of
//! a burst of routine upgrades.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::engine::{self as eng, helm_history, is, wait_for, waiting_on};
use support::git::{Repo, server};
use support::hooks::{github_signature, post, receiver};
use support::oci::{NotifyingRegistry, Pusher, registries};
use wheelhouse::api::HelmRelease;

fn oci_release(name: &str, registry: &str, path: &str, spec: serde_json::Value) -> HelmRelease {
    let mut value = serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
        "spec": {"chart": {"repository": format!("oci://{registry}/{path}"), "name": "webapp", "version": "1.x"},
                 "timeout": "30s"}
    });
    eng::merge_into(&mut value["spec"], spec);
    serde_json::from_value(value).unwrap()
}

fn stalled(h: &HelmRelease) -> bool {
    h.condition("Stalled")
        .is_some_and(|c| c.status == "True" && c.reason == "RetriesExceeded")
}

fn failures(h: &HelmRelease) -> (i64, i64) {
    let s = h.status.clone().unwrap_or_default();
    (s.failures, s.upgrade_failures)
}

fn newest(h: &HelmRelease) -> (i32, String, Option<String>) {
    let s = &h.status.as_ref().unwrap().history[0];
    (s.version, s.chart_version.clone(), s.digest.clone())
}

fn ready_at(h: &HelmRelease, version: &str) -> bool {
    is(h, "Ready", "True", "UpgradeSucceeded")
        && h.status.as_ref().unwrap().history[0].chart_version == version
}

/// The `overrides` ConfigMap the release takes values from, holding `values` (YAML).
async fn set_overrides(api: &Api<ConfigMap>, values: &str) {
    let cm: ConfigMap = support::from_yaml(&format!(
        "metadata: {{name: overrides}}\ndata: {{values.yaml: '{values}'}}"
    ));
    api.patch(
        "overrides",
        &PatchParams::apply("wheelhouse-tests").force(),
        &Patch::Apply(&cm),
    )
    .await
    .unwrap();
}

/// After a failed upgrade that stalled the release (default retries), each kind of new
/// desired state is tried by itself, with fresh retries: a new chart version in range, a
/// tag pushed again with new content (told apart by its digest in history), valuesFrom
/// data, a new Git commit. An unchanged desired state (a reconcile request) leaves it
/// stalled, its counters as they were.
#[tokio::test]
async fn each_new_desired_state_is_tried_after_a_stall_with_fresh_retries() {
    let r = registries();
    let pusher = Pusher::new();
    let path = format!("stall-{:08x}", support::rand_u32());
    pusher.push(&r.plain, &path, "1.0.0", "", None);
    let (client, ns, api) = eng::setup("mttr-stall").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    set_overrides(&configmaps, "note: none").await;
    let _engine = eng::start(&client, &ns.name).await;
    // The chart is fetched every 2 s while the release is idle (Flux's chart.interval):
    // how a tag moved under a Ready release is seen without a push.
    let spec = serde_json::json!({"valuesFrom": [{"kind": "ConfigMap", "name": "overrides", "optional": true}],
                                  "values": {"replicaCount": 1}, "chart": {"interval": "2s"}});
    api.create(
        &PostParams::default(),
        &oci_release("web", &r.plain, &path, spec),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // 1.1.0 crash-loops (a reconcile request picks it up, the release being idle): its
    // upgrade fails fast and, with no retries, stalls.
    pusher.push(&r.plain, &path, "1.1.0", "crash-loop", None);
    eng::annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/requestedAt",
        "take-1.1.0",
    )
    .await;
    let hr = wait_for(&api, "web", "1.1.0 failed and stalled", stalled).await;
    assert_eq!(failures(&hr), (1, 1));
    // Unchanged: a reconcile request is answered, and the release stays as it was.
    eng::annotate(&api, "web", "reconcile.wheelhouse.dev/requestedAt", "again").await;
    let hr = wait_for(&api, "web", "the request answered", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("again")
    })
    .await;
    assert!(stalled(&hr), "{:?}", hr.status);
    assert_eq!(
        failures(&hr),
        (1, 1),
        "an unchanged desired state resets nothing"
    );
    assert_eq!(newest(&hr).0, 2);

    // A new version in range: tried at once (no annotation), fresh retries.
    pusher.push(&r.plain, &path, "1.1.1", "", None);
    let hr = wait_for(&api, "web", "1.1.1 deployed", |h| ready_at(h, "1.1.1")).await;
    assert_eq!(failures(&hr), (0, 0));
    let good = newest(&hr);
    assert!(good.2.is_some(), "history records the manifest digest");

    // 1.1.1 pushed again, broken: the same version, a new digest, a new revision.
    pusher.push(&r.plain, &path, "1.1.1", "crash-loop", None);
    let hr = wait_for(&api, "web", "the moved tag tried and stalled", |h| {
        stalled(h) && newest(h).0 == good.0 + 1
    })
    .await;
    let moved = newest(&hr);
    assert_eq!(moved.1, "1.1.1");
    assert_ne!(moved.2, good.2, "two contents of one tag are told apart");

    // valuesFrom data that fixes it (the chart's broken default overridden): tried at once.
    set_overrides(&configmaps, "behavior: \"\"").await;
    let hr = wait_for(&api, "web", "the values fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && newest(h).0 == moved.0 + 1
    })
    .await;
    assert_eq!(failures(&hr), (0, 0));
    let statuses: Vec<String> = helm_history(&ns.name, "web")
        .into_iter()
        .map(|h| h.1)
        .collect();
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("deployed"),
        "{statuses:?}"
    );

    // The spec: values that break it stall it; the next spec is tried by itself.
    eng::set_values(
        &api,
        "web",
        serde_json::json!({"replicaCount": 1, "behavior": "crash-loop"}),
    )
    .await;
    let hr = wait_for(&api, "web", "the broken spec stalled", |h| {
        stalled(h) && h.status.as_ref().unwrap().observed_generation == h.metadata.generation
    })
    .await;
    let broken = newest(&hr).0;
    eng::set_values(&api, "web", serde_json::json!({"behavior": null})).await;
    let hr = wait_for(&api, "web", "the fixed spec deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded") && newest(h).0 == broken + 1
    })
    .await;
    assert_eq!(failures(&hr), (0, 0));

    // A Git chart: a broken commit stalls it, the next commit is tried by itself.
    let s = server();
    let repo = Repo::new(&s, "stall");
    repo.commit_chart("main", "deploy/web", "1.0.0", "", "one");
    let git: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "git"},
        "spec": {"chart": {"git": {"url": format!("{}/{}", s.http, repo.name), "ref": {"branch": "main"}, "path": "deploy/web"}, "interval": "2s"},
                 "timeout": "30s", "values": {"replicaCount": 1}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &git).await.unwrap();
    wait_for(&api, "git", "installed from Git", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    repo.commit_chart("main", "deploy/web", "1.0.0", "crash-loop", "two");
    wait_for(&api, "git", "the broken commit stalled", stalled).await;
    let fix = repo.commit_chart("main", "deploy/web", "1.0.0", "", "three");
    let hr = wait_for(&api, "git", "the fixing commit deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].commit.as_deref() == Some(fix.as_str())
    })
    .await;
    assert_eq!(failures(&hr), (0, 0));
    ns.delete().await;
}

/// A refused call: what it is, its headers, its body, the status it gets.
type BadCall<'a> = (&'a str, Vec<(&'a str, String)>, Vec<u8>, u16);

/// A stalled release of a chart that is not polled (a path): its valuesFrom ConfigMap is
/// watched, so new data is tried at once with fresh retries, and data that changes nothing
/// (a new resourceVersion, the same values) leaves it stalled.
#[tokio::test]
async fn a_stalled_release_takes_new_values_data_at_once() {
    let (client, ns, api) = eng::setup("mttr-values").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    set_overrides(&configmaps, "behavior: crash-loop").await;
    let _engine = eng::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &eng::webapp(
            "web",
            serde_json::json!({"valuesFrom": [{"kind": "ConfigMap", "name": "overrides"}],
                               "values": {"replicaCount": 1}, "timeout": "30s", "interval": "1h"}),
        ),
    )
    .await
    .unwrap();
    let hr = wait_for(&api, "web", "the install failed and stalled", |h| {
        h.condition("Stalled").is_some_and(|c| c.status == "True")
    })
    .await;
    let history = hr.status.as_ref().unwrap().history.len();
    // The same values written again (a comment added): no new desired state.
    set_overrides(&configmaps, "behavior: crash-loop # again").await;
    // The fix.
    set_overrides(&configmaps, "note: fixed").await;
    let hr = wait_for(&api, "web", "the values fix deployed", |h| {
        h.condition("Ready").is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(failures(&hr), (0, 0));
    assert_eq!(
        hr.status.as_ref().unwrap().history.len(),
        history + 1,
        "only the fix was tried: {:?}",
        hr.status
    );
    ns.delete().await;
}

/// Push, not poll: the charts are checked every hour (chart.interval), yet a registry's
/// notification upgrades an idle release and supersedes a stuck wait at once, and a
/// signed GitHub-format push upgrades a Git release. Unsigned, wrongly signed, malformed,
/// unknown, oversized and flooding calls are refused, logged without their bodies, and
/// wake nothing.
#[tokio::test]
async fn pushes_wake_their_releases_at_once_and_bad_calls_wake_nothing() {
    let (client, ns, api) = eng::setup("mttr-push").await;
    let port = support::free_port();
    let registry_token = format!("reg-{:08x}", support::rand_u32());
    let github_token = format!("gh-{:08x}", support::rand_u32());
    let registry_path = receiver(&client, &ns.name, "registry", "registry", &registry_token).await;
    let github_path = receiver(&client, &ns.name, "github", "github", &github_token).await;
    let registry = NotifyingRegistry::start(
        &format!("http://127.0.0.1:{port}{registry_path}"),
        &registry_token,
    );
    let pusher = Pusher::new();
    pusher.push(&registry.address, "charts", "1.0.0", "", None);
    let controller = support::controller::Controller::start(&[
        "-n",
        &ns.name,
        "--lease-namespace",
        &ns.name,
        "--receiver-addr",
        &format!("127.0.0.1:{port}"),
    ]);
    let hourly = serde_json::json!({"chart": {"interval": "1h"}, "interval": "1h", "timeout": "5m",
                                    "values": {"replicaCount": 1}});
    api.create(
        &PostParams::default(),
        &oci_release("web", &registry.address, "charts", hourly.clone()),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // The receivers are in force once the controller says so.
    let deadline = Instant::now() + support::PATIENCE;
    while !(controller.log().contains("webhook receivers in force")
        && controller.log().contains("github (Github)"))
    {
        assert!(Instant::now() < deadline, "{}", controller.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An idle release: the push of a new version upgrades it (to a stuck rollout).
    pusher.push(&registry.address, "charts", "1.1.0", "never-ready", None);
    let deadline = Instant::now() + support::PATIENCE;
    while api
        .get("web")
        .await
        .unwrap()
        .status
        .and_then(|s| s.wait)
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "the push woke nothing:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    waiting_on(&api, "web", 2).await;
    // The fix, pushed while it waits: superseded at once.
    pusher.push(&registry.address, "charts", "1.1.1", "", None);
    let pushed = Instant::now();
    wait_for(&api, "web", "1.1.1 deployed", |h| ready_at(h, "1.1.1")).await;
    println!("registry push -> fix deployed: {:?}", pushed.elapsed());
    assert!(controller.log().contains("a push woke its releases"));

    // GitHub: a signed push of a new commit upgrades the Git release.
    let s = server();
    let repo = Repo::new(&s, "push");
    repo.commit_chart("main", "deploy/web", "1.0.0", "", "one");
    let url = format!("{}/{}", s.http, repo.name);
    let mut git = hourly.clone();
    git["chart"] = serde_json::json!({"git": {"url": url, "ref": {"branch": "main"}, "path": "deploy/web"}, "interval": "1h"});
    let git_hr: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "git"}, "spec": git,
    }))
    .unwrap();
    api.create(&PostParams::default(), &git_hr).await.unwrap();
    wait_for(&api, "git", "installed from Git", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;

    // Bad calls first, each answered (the sign it was handled), none waking anything.
    let marker = "BODY-MARKER-never-logged";
    let other = format!(
        r#"{{"ref": "refs/heads/main", "repository": {{"clone_url": "{}/elsewhere.git"}}, "m": "{marker}"}}"#,
        s.http
    );
    let malformed = format!("not json {marker}");
    let signed = |body: &str| github_signature(&github_token, body.as_bytes());
    let push = |sig: String| -> Vec<(&str, String)> {
        vec![
            ("X-GitHub-Event", "push".into()),
            ("X-Hub-Signature-256", sig),
        ]
    };
    let big = "x".repeat(2 * 1024 * 1024);
    let cases: Vec<BadCall> = vec![
        (
            "unsigned",
            vec![("X-GitHub-Event", "push".into())],
            other.clone().into_bytes(),
            401,
        ),
        (
            "wrongly signed",
            vec![
                ("X-GitHub-Event", "push".into()),
                ("X-Hub-Signature-256", signed("something else")),
            ],
            other.clone().into_bytes(),
            401,
        ),
        (
            "malformed",
            push(signed(&malformed)),
            malformed.clone().into_bytes(),
            400,
        ),
        // Proven: answered without saying whether any release comes from there.
        (
            "unknown repository",
            push(signed(&other)),
            other.clone().into_bytes(),
            202,
        ),
        (
            "oversized",
            vec![("X-GitHub-Event", "push".into())],
            big.into_bytes(),
            413,
        ),
    ];
    for (what, headers, body, expected) in &cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            post(port, &github_path, &headers, body),
            *expected,
            "{what}"
        );
    }
    assert_eq!(post(port, "/hook/not-a-receiver", &[], b"{}"), 404);
    // Flooding: past the burst, calls are refused before they are read. Sent at once, as a
    // flood comes: one by one, on a loaded machine, they may come slower than the rate.
    let codes: Vec<u16> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..60)
            .map(|_| s.spawn(|| post(port, &github_path, &[("X-GitHub-Event", "push")], b"{}")))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(codes.contains(&429), "{codes:?}");
    let log = controller.log();
    assert!(!log.contains(marker), "a body reached the log");
    let refusals = log.lines().filter(|l| l.contains("a call refused")).count();
    assert!(refusals >= 4, "each refusal is logged:\n{log}");
    assert!(
        log.contains("no release this receiver may wake comes from there"),
        "the unknown repository is the log's to say:\n{log}"
    );
    let hr = api.get("git").await.unwrap();
    assert_eq!(hr.status.unwrap().history.len(), 1, "nothing was woken");

    // The real thing: a new commit and its signed push event.
    let c2 = repo.commit_chart("main", "deploy/web", "1.0.0", "", "two");
    tokio::time::sleep(Duration::from_secs(1)).await; // past the flood's rate limit
    let body = format!(
        r#"{{"ref": "refs/heads/main", "after": "{c2}", "repository": {{"clone_url": "{url}"}}}}"#
    );
    let sig = signed(&body);
    let pushed = Instant::now();
    assert_eq!(
        post(
            port,
            &github_path,
            &[("X-GitHub-Event", "push"), ("X-Hub-Signature-256", &sig)],
            body.as_bytes()
        ),
        202
    );
    wait_for(&api, "git", "the pushed commit deployed", |h| {
        h.status.as_ref().unwrap().history[0].commit.as_deref() == Some(c2.as_str())
            && is(h, "Ready", "True", "UpgradeSucceeded")
    })
    .await;
    println!(
        "signed GitHub push -> commit deployed: {:?}",
        pushed.elapsed()
    );
    ns.delete().await;
}

/// A burst of routine upgrades (each render taking a while) behind one render slot, and
/// the fix of a stuck release pushed as the burst starts: the fix takes the next slot,
/// ahead of the routine renders still in line.
#[tokio::test]
async fn a_fix_takes_the_next_render_slot_ahead_of_a_burst() {
    let (client, ns, api) = eng::setup("mttr-slot").await;
    let (mut config, cache) = eng::config(&ns.name, "test-engine-slot");
    config.concurrent = 1;
    let _engine = eng::start_leading(&client, config, cache).await;
    const ROUTINE: usize = 12;
    for i in 0..ROUTINE {
        api.create(
            &PostParams::default(),
            &eng::release(&format!("bulk-{i}"), "slow-render", serde_json::json!({})),
        )
        .await
        .unwrap();
    }
    api.create(
        &PostParams::default(),
        &eng::webapp(
            "stuck",
            serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}}),
        ),
    )
    .await
    .unwrap();
    for i in 0..ROUTINE {
        wait_for(&api, &format!("bulk-{i}"), "installed", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
    }
    wait_for(&api, "stuck", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    eng::set_values(
        &api,
        "stuck",
        serde_json::json!({"replicaCount": 1, "behavior": "never-ready"}),
    )
    .await;
    waiting_on(&api, "stuck", 2).await;

    // Revisions are stored right after their render: the order in which their records
    // appear is the order in which the renders got a slot.
    let records: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), &ns.name);
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watching = {
        let order = order.clone();
        let config = kube::runtime::watcher::Config::default().labels("owner=helm");
        let events = kube::runtime::watcher(records, config);
        tokio::spawn(async move {
            use futures::StreamExt;
            use kube::runtime::watcher::Event;
            let mut events = std::pin::pin!(events);
            while let Some(Ok(event)) = events.next().await {
                if let Event::Apply(secret) | Event::InitApply(secret) = event {
                    let name = secret.metadata.name.unwrap_or_default();
                    let mut order = order.lock().unwrap();
                    if !order.contains(&name) {
                        order.push(name);
                    }
                }
            }
        })
    };
    let stored = |name: &str| order.lock().unwrap().iter().any(|n| n == name);
    let started = Instant::now();
    while !stored("sh.helm.release.v1.stuck.v2") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the watch saw no records"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The burst (sent at once, as a GitOps sync applies a fleet), then the fix. Each
    // routine render takes long enough that the fix's event arrives while the first
    // ones still hold the slot, however loaded the machine is.
    let names: Vec<String> = (0..ROUTINE).map(|i| format!("bulk-{i}")).collect();
    futures::future::join_all(names.iter().map(|name| {
        eng::set_values(
            &api,
            name,
            serde_json::json!({"message": "burst", "spin": 800_000}),
        )
    }))
    .await;
    eng::set_values(
        &api,
        "stuck",
        serde_json::json!({"replicaCount": 1, "behavior": ""}),
    )
    .await;
    wait_for(&api, "stuck", "the fix deployed", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 3
    })
    .await;
    for i in 0..ROUTINE {
        wait_for(&api, &format!("bulk-{i}"), "upgraded", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
        })
        .await;
    }
    watching.abort();
    let order = order.lock().unwrap().clone();
    let fix_at = order
        .iter()
        .position(|n| n == "sh.helm.release.v1.stuck.v3")
        .expect("the fix's revision was stored");
    let ahead = order[..fix_at]
        .iter()
        .filter(|n| n.starts_with("sh.helm.release.v1.bulk-") && n.ends_with(".v2"))
        .count();
    println!("routine upgrades rendered and stored before the fix: {ahead} of {ROUTINE}");
    assert!(
        ahead <= 3,
        "{ahead} of {ROUTINE} routine upgrades went ahead of the fix"
    );
    ns.delete().await;
}
