//! Who reconciles what (issue #11, docs/design.md, "Who reconciles what"), on the local control plane:
//! shards split the releases between controllers with one Lease each, and a namespace
//! engine never acts beside a cluster-wide engine of its shard.
//!
//! Which engine acted on a release is read from the Events it recorded: each engine
//! reports under its own identity (`reportingInstance`).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use support::PATIENCE;
use support::controller::Controller;
use support::engine::{self as eng, condition, events_about, set_values, setup, wait_for, webapp};
use wheelhouse::api::HelmRelease;
use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::{self, Coverage, EngineHandle, Role, SHARD_LABEL};

/// The identities that recorded Events about the HelmRelease `name`.
async fn actors(client: &Client, ns: &str, name: &str) -> BTreeSet<String> {
    events_about(client, ns, name)
        .await
        .into_iter()
        .filter_map(|e| e.reporting_instance)
        .collect()
}

fn labelled(name: &str, shard: Option<&str>) -> HelmRelease {
    let mut hr = webapp(name, serde_json::json!({"values": {"replicaCount": 1}}));
    if let Some(shard) = shard {
        hr.metadata.labels = Some(BTreeMap::from([(SHARD_LABEL.into(), shard.into())]));
    }
    hr
}

fn ready(hr: &HelmRelease) -> bool {
    condition(hr, "Ready").is_some_and(|(s, _)| s == "True")
}

#[tokio::test]
async fn two_shards_and_an_unsharded_controller_each_reconcile_only_their_releases() {
    let (client, ns, api) = setup("cov-shards").await;
    let scope = ["--namespace", &ns.name, "--lease-namespace", &ns.name];
    let controllers = [
        Controller::start(&scope),
        Controller::start(&[&scope[..], &["--shard", "a"]].concat()),
        Controller::start(&[&scope[..], &["--shard", "b"]].concat()),
    ];
    let releases = [
        ("plain-1", None),
        ("plain-2", None),
        ("a-1", Some("a")),
        ("a-2", Some("a")),
        ("b-1", Some("b")),
        ("b-2", Some("b")),
    ];
    // A shard no controller runs is nobody's. Created first: every watch delivers in
    // the order of writes, so once the releases created after it are handled, c-1 has
    // been in front of every controller that could have taken it.
    api.create(&PostParams::default(), &labelled("c-1", Some("c")))
        .await
        .unwrap();
    for (name, shard) in releases {
        api.create(&PostParams::default(), &labelled(name, shard))
            .await
            .unwrap();
    }

    for (name, _) in releases {
        let patience = tokio::time::timeout(PATIENCE, async {
            wait_for(&api, name, "Ready", ready).await;
        });
        if patience.await.is_err() {
            for c in &controllers {
                eprintln!("--- controller log ---\n{}", c.log());
            }
            panic!("{name} did not become Ready");
        }
    }
    let mut by_shard: BTreeMap<Option<&str>, BTreeSet<String>> = BTreeMap::new();
    for (name, shard) in releases {
        let who = actors(&client, &ns.name, name).await;
        assert_eq!(
            who.len(),
            1,
            "{name} was acted on by exactly one engine: {who:?}"
        );
        by_shard.entry(shard).or_default().extend(who);
    }
    // One engine per shard, and three different engines.
    assert!(by_shard.values().all(|w| w.len() == 1), "{by_shard:?}");
    let all: BTreeSet<_> = by_shard.values().flatten().collect();
    assert_eq!(all.len(), 3, "{by_shard:?}");

    // Each shard has its own Lease, held by the engine that acted on its releases.
    let leases = Api::<Lease>::namespaced(client.clone(), &ns.name);
    for (lease, shard) in [
        ("wheelhouse-engine-ns", None),
        ("wheelhouse-engine-ns-shard-a", Some("a")),
        ("wheelhouse-engine-ns-shard-b", Some("b")),
    ] {
        let holder = leases
            .get(lease)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        assert!(by_shard[&shard].contains(&holder), "{lease}: {holder}");
    }

    // The release of the shard nobody runs was never touched.
    let c1 = api.get("c-1").await.unwrap();
    assert!(
        c1.status.is_none_or(|s| s.conditions.is_empty()),
        "c-1 untouched"
    );
    assert!(actors(&client, &ns.name, "c-1").await.is_empty());
    drop(controllers);
    ns.delete().await;
}

/// Whether an engine may act on `key` at this moment: its workers run (a term started, or
/// one that ended is still finishing its step; holding the Lease alone is not acting) and
/// it does not leave the release's namespace to another engine.
fn acts_on(handle: &EngineHandle, key: &engine::ReleaseKey) -> bool {
    handle.working()
        && handle
            .views()
            .borrow()
            .get(key)
            .is_some_and(|v| v.elsewhere.is_none())
}

#[tokio::test]
async fn a_namespace_engine_defers_to_the_cluster_wide_engine_of_its_shard_and_takes_over_after() {
    let (client, ns, api) = setup("cov-prec").await;
    // A shard of this test's own, so the cluster-wide engine leaves other tests alone.
    let shard = format!("t{}", &ns.name[ns.name.len() - 7..]);

    let (mut config, _cache_n) = eng::config(&ns.name, "namespace-engine");
    config.coverage = Coverage::new(Scope::Namespace(ns.name.clone()), Some(shard.clone()));
    let local = engine::start(client.clone(), config).unwrap();
    tokio::time::timeout(PATIENCE, local.role().wait_for(|r| *r == Role::Leader))
        .await
        .expect("the namespace engine leads while no cluster-wide engine runs")
        .unwrap();

    api.create(&PostParams::default(), &labelled("app", Some(&shard)))
        .await
        .unwrap();
    wait_for(&api, "app", "Ready", ready).await;
    assert_eq!(
        actors(&client, &ns.name, "app").await,
        BTreeSet::from(["namespace-engine".to_owned()])
    );

    // From now on, sample both engines: they must never act on the release together.
    let (mut config, _cache_c) = eng::config(&ns.name, "cluster-engine");
    config.coverage = Coverage::new(Scope::All, Some(shard.clone()));
    let cluster = engine::start(client.clone(), config).unwrap();
    let key = engine::ReleaseKey {
        namespace: ns.name.clone(),
        name: "app".into(),
    };
    let both = Arc::new(AtomicUsize::new(0));
    // Samples in which each engine acted: the sampler must see both at work, in turn.
    let each = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let sampler = {
        let (local, cluster, key, both, each) = (
            local.clone(),
            cluster.clone(),
            key.clone(),
            both.clone(),
            each.clone(),
        );
        tokio::spawn(async move {
            loop {
                let acting = [acts_on(&local, &key), acts_on(&cluster, &key)];
                for (seen, acted) in each.iter().zip(acting) {
                    seen.fetch_add(usize::from(acted), Ordering::Relaxed);
                }
                if acting == [true, true] {
                    both.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    tokio::time::timeout(PATIENCE, cluster.role().wait_for(|r| *r == Role::Leader))
        .await
        .expect("the cluster-wide engine takes its own Lease")
        .unwrap();
    tokio::time::timeout(
        PATIENCE,
        local.role().wait_for(
            |r| matches!(r, Role::Follower { holder } if holder.contains("cluster-engine")),
        ),
    )
    .await
    .expect("the namespace engine defers")
    .unwrap();
    // It lets go of its Lease, and then the cluster-wide engine acts there.
    let mut views = cluster.views();
    tokio::time::timeout(
        PATIENCE,
        views.wait_for(|v| v.get(&key).is_some_and(|v| v.elsewhere.is_none())),
    )
    .await
    .expect("the cluster-wide engine takes the namespace over once it is let go")
    .unwrap();
    set_values(
        &api,
        "app",
        serde_json::json!({"replicaCount": 1, "message": "two"}),
    )
    .await;
    wait_for(&api, "app", "revision 2 Ready", |hr| {
        ready(hr)
            && hr
                .status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|h| h.version == 2)
    })
    .await;
    assert!(
        actors(&client, &ns.name, "app")
            .await
            .contains("cluster-engine")
    );

    // The cluster-wide engine goes away: the namespace engine takes over again.
    cluster.shutdown();
    tokio::time::timeout(PATIENCE, local.role().wait_for(|r| *r == Role::Leader))
        .await
        .expect("the namespace engine leads again")
        .unwrap();
    set_values(
        &api,
        "app",
        serde_json::json!({"replicaCount": 1, "message": "three"}),
    )
    .await;
    wait_for(&api, "app", "revision 3 Ready", |hr| {
        ready(hr)
            && hr
                .status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|h| h.version == 3)
    })
    .await;

    sampler.abort();
    assert_eq!(
        both.load(Ordering::Relaxed),
        0,
        "both engines acted on the release at the same moment"
    );
    let each: Vec<usize> = each.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    assert!(
        each.iter().all(|&n| n > 0),
        "the sampler saw each engine act (namespace, cluster-wide): {each:?}"
    );
    local.shutdown();
    ns.delete().await;
}

/// Issue #17: a release relabelled from shard a to shard b while a runs a post-upgrade
/// hook (a migration Job) that takes longer than a Lease's 15 s. b waits for a, alive
/// and in its step, to let go; a's hook ends (here: times out) and a records the outcome
/// itself; only then does b act. No second writer: the revision a was running says what
/// a saw, not that b unlocked it.
#[tokio::test]
async fn a_release_relabelled_during_a_long_hook_waits_for_the_hook_to_end() {
    use kube::api::{Patch, PatchParams};
    use support::engine::{helm_history, is};

    let (_client, ns, api) = setup("cov-hook").await;
    let scope = ["--namespace", &ns.name, "--lease-namespace", &ns.name];
    let a = Controller::start(&[&scope[..], &["--shard", "a"]].concat());
    let b = Controller::start(&[&scope[..], &["--shard", "b"]].concat());
    let mut hr = webapp(
        "web",
        serde_json::json!({"timeout": "25s", "values": {"postUpgradeHook": true, "hookBehavior": "never-ready"}}),
    );
    hr.metadata.labels = Some(BTreeMap::from([(SHARD_LABEL.into(), "a".into())]));
    api.create(&PostParams::default(), &hr).await.unwrap();
    wait_for(&api, "web", "installed by shard a", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    set_values(&api, "web", serde_json::json!({"message": "v2"})).await;
    wait_for(&api, "web", "a running the post-upgrade hook", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.wait.as_ref())
            .and_then(|w| w.hook.as_deref())
            .is_some_and(|hook| hook.contains("web-migrate"))
    })
    .await;

    let patch = serde_json::json!({
        "metadata": {"labels": {SHARD_LABEL: "b"}},
        "spec": {"values": {"postUpgradeHook": false}},
    });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(&api, "web", "b waiting for a to let go", |h| {
        h.condition("Reconciling").is_some_and(|c| {
            c.message
                .contains("is still running: waiting for it to let go")
        })
    })
    .await;
    let done = tokio::time::timeout(
        Duration::from_secs(120),
        wait_for(&api, "web", "fixed by shard b", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
                && h.status.as_ref().unwrap().history[0].version == 3
        }),
    )
    .await;
    let logs = format!("--- shard a ---\n{}\n--- shard b ---\n{}", a.log(), b.log());
    assert!(done.is_ok(), "not fixed within 120 s\n{logs}");
    let history = helm_history(&ns.name, "web");
    assert_eq!(history.len(), 3, "{history:?}\n{logs}");
    assert_eq!(history[1].1, "failed", "{history:?}");
    assert!(
        !history[1].2.starts_with("Release was left"),
        "a recorded its own hook's outcome; b never unlocked under it: {history:?}\n{logs}"
    );
    assert!(
        b.log()
            .lines()
            .any(|l| l.contains("taking the release over") && l.contains("let go of it")),
        "{logs}"
    );
    assert_eq!(history[2].1, "deployed", "{history:?}");
    ns.delete().await;
}

/// A release relabelled from shard a to shard b while a waits on its upgrade. a's watch
/// sees the release leave: its worker stops after its step (the wait ends at once and its
/// revision stays pending) and records that it let go. b acts only on that sign, then
/// unlocks the pending revision and applies the newest desired state.
#[tokio::test]
async fn a_release_relabelled_mid_wait_moves_to_the_other_shard_without_two_writers() {
    use kube::api::{Patch, PatchParams};
    use support::engine::{helm_history, is, waiting_on};

    let (_client, ns, api) = setup("cov-relabel").await;
    let scope = ["--namespace", &ns.name, "--lease-namespace", &ns.name];
    let a = Controller::start(&[&scope[..], &["--shard", "a"]].concat());
    let b = Controller::start(&[&scope[..], &["--shard", "b"]].concat());
    let mut hr = webapp("web", serde_json::json!({"timeout": "5m"}));
    hr.metadata.labels = Some(BTreeMap::from([(SHARD_LABEL.into(), "a".into())]));
    api.create(&PostParams::default(), &hr).await.unwrap();
    wait_for(&api, "web", "installed by shard a", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    waiting_on(&api, "web", 2).await;

    // One write moves the release to shard b and fixes its values.
    let patch = serde_json::json!({
        "metadata": {"labels": {SHARD_LABEL: "b"}},
        "spec": {"values": {"behavior": ""}},
    });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let recovered = tokio::time::timeout(
        Duration::from_secs(90),
        wait_for(&api, "web", "upgraded by shard b", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
                && h.status.as_ref().unwrap().history[0].version == 3
        }),
    )
    .await;
    let logs = format!("--- shard a ---\n{}\n--- shard b ---\n{}", a.log(), b.log());
    let recovered = recovered.unwrap_or_else(|_| panic!("not recovered within 90 s\n{logs}"));
    let status = recovered.status.unwrap();
    let (acting, let_go) = (status.acting.unwrap(), status.let_go.unwrap());
    assert_ne!(acting.identity, let_go.identity, "b acts, a let go: {logs}");
    assert!(let_go.lease.ends_with("-shard-a"), "{let_go:?}");
    // b took over on a's sign, not on a clock.
    assert!(
        b.log()
            .lines()
            .any(|l| l.contains("taking the release over")
                && l.contains(&format!("engine {} let go of it", let_go.identity))),
        "{logs}"
    );
    let history = helm_history(&ns.name, "web");
    assert_eq!(history.len(), 3, "{history:?}");
    assert!(
        history[1].2.starts_with("Release was left pending-upgrade"),
        "{history:?}"
    );
    assert_eq!(history[2].1, "deployed", "{history:?}");

    // Shard a planned nothing for the release after it left.
    let key = format!("{}/web", ns.name);
    let a_log = a.log();
    let left = a_log
        .lines()
        .position(|l| l.contains("relabelled to another shard") && l.contains(&key))
        .unwrap_or_else(|| panic!("shard a never saw the release leave\n{logs}"));
    assert!(
        !a_log
            .lines()
            .skip(left)
            .any(|l| l.contains("\"planned\"") && l.contains(&key)),
        "shard a acted after the release left\n{logs}"
    );
    drop((a, b));
    ns.delete().await;
}
