//! The timeline (`wheelhouse timeline`, `src/frontend/timeline`): every change to a release,
//! newest first, with who made it (wheelhouse, the helm CLI, Flux's real helm-controller,
//! an operator), from Helm's storage and the changes wheelhouse's HelmReleases keep in
//! their status, still there once the engine that saw them is gone.

use std::process::Command;

use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support;
use support::engine::{self as eng, chart, helm, set_values, wait_for, webapp};
use wheelhouse::api::HelmRelease;

/// `wheelhouse timeline` (the real binary) in `ns`, as JSON.
fn timeline(ns: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["timeline", "-n", ns])
        .args(args)
        .output()
        .expect("wheelhouse runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ready_at(h: &HelmRelease, revision: i32) -> bool {
    eng::condition(h, "Ready").is_some_and(|(s, _)| s == "True")
        && h.status
            .as_ref()
            .and_then(|s| s.history.first())
            .is_some_and(|s| s.version == revision)
}

/// (release, kind, who) of each row, newest first.
fn rows(changes: &[Value]) -> Vec<(String, String, String)> {
    changes
        .iter()
        .map(|c| {
            (
                c["release"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["who"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_change_is_listed_newest_first_with_who_made_it_after_the_engine_is_gone() {
    let (client, ns, api) = eng::setup("timeline").await;
    let n = ns.name.clone();
    let engine = eng::start(&client, &n).await;

    // wheelhouse installs and upgrades.
    api.create(&PostParams::default(), &webapp("web", json!({})))
        .await
        .unwrap();
    wait_for(&api, "web", "installed", |h| ready_at(h, 1)).await;
    set_values(&api, "web", json!({"message": "v2"})).await;
    wait_for(&api, "web", "upgraded", |h| ready_at(h, 2)).await;
    // The helm CLI installs and upgrades a release of its own.
    helm(&n, &["install", "cli", &chart("hello")]);
    helm(
        &n,
        &[
            "upgrade",
            "cli",
            &chart("hello"),
            "--set",
            "message=by-hand",
        ],
    );
    // The helm CLI runs a release's tests.
    helm(
        &n,
        &[
            "install",
            "tested",
            &chart("webapp"),
            "--set",
            "tests.enabled=true",
            "--wait",
        ],
    );
    helm(&n, &["test", "tested"]);
    // A wait that a newer spec cancels.
    set_values(
        &api,
        "web",
        json!({"message": "v3", "behavior": "never-ready"}),
    )
    .await;
    eng::waiting_on(&api, "web", 3).await;
    set_values(&api, "web", json!({"message": "v4", "behavior": ""})).await;
    wait_for(&api, "web", "the fix Ready", |h| ready_at(h, 4)).await;
    // An operator suspends it.
    api.patch(
        "web",
        &PatchParams {
            field_manager: Some("on-call".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "its suspension kept", |h| {
        h.status
            .as_ref()
            .is_some_and(|s| s.changes.first().is_some_and(|c| c.kind == "suspend"))
    })
    .await;
    // What it saw survives it.
    drop(engine);
    // Flux's helm-controller installs and upgrades a release of its own.
    let _repo = support::flux::install_and_upgrade(&client, &n, "fluxed").await;

    let changes = timeline(&n, &["--since", "10m", "-o", "json"]);
    let got = rows(&changes);
    let row = |release: &str, kind: &str, who: &str| {
        (release.to_owned(), kind.to_owned(), who.to_owned())
    };
    let expected_in_order = [
        row("fluxed", "upgrade", "Flux helm-controller"),
        row("fluxed", "install", "Flux helm-controller"),
        row("web", "suspend", "on-call"),
        row("web", "upgrade", "wheelhouse"), // revision 4, the fix
        row("web", "cancel", "wheelhouse"),
        row("web", "upgrade", "wheelhouse"), // revision 3, superseded
        row("tested", "test", "helm CLI"),
        row("tested", "install", "helm CLI"),
        row("cli", "upgrade", "helm CLI"),
        row("cli", "install", "helm CLI"),
        row("web", "upgrade", "wheelhouse"), // revision 2
        row("web", "install", "wheelhouse"),
    ];
    // Each expected row is there, in this order (times are seconds apart at most, so
    // the order is the timeline's, newest first).
    let mut at = 0;
    for want in &expected_in_order {
        let found = got[at..].iter().position(|g| g == want);
        assert!(found.is_some(), "{want:?} not after row {at} in {got:#?}");
        at += found.unwrap() + 1;
    }
    let times: Vec<k8s_openapi::jiff::Timestamp> = changes
        .iter()
        .map(|c| c["at"].as_str().unwrap().parse().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first");
    let test = changes.iter().find(|c| c["kind"] == "test").unwrap();
    assert!(
        test["what"]
            .as_str()
            .unwrap()
            .contains("revision 1 tests passed"),
        "{test:#}"
    );
    let cancel = changes.iter().find(|c| c["kind"] == "cancel").unwrap();
    assert!(
        cancel["what"].as_str().unwrap().contains("superseded"),
        "{cancel:#}"
    );
    // Markdown for a postmortem: the same rows.
    let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["timeline", "-n", &n, "--since", "10m", "-o", "markdown"])
        .output()
        .unwrap();
    let markdown = String::from_utf8(out.stdout).unwrap();
    assert_eq!(markdown.lines().count(), changes.len() + 2, "{markdown}");
    assert!(
        markdown.contains(&format!("| {n}/cli | upgrade | helm CLI |")),
        "{markdown}"
    );
    // Nothing older than the window.
    assert!(timeline(&n, &["--since", "0s", "-o", "json"]).is_empty());
    let _: Api<HelmRelease> = api;
    ns.delete().await;
}

#[tokio::test]
async fn a_config_rollout_is_kept_on_its_release_and_listed_with_the_config_that_changed() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (client, ns, api) = eng::setup("timeline-config").await;
    let n = ns.name.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &n);
    let extra = |value: &str| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "web-extra"},
            "data": {"GREETING": value},
        }))
        .unwrap()
    };
    config_maps
        .create(&PostParams::default(), &extra("hello"))
        .await
        .unwrap();
    let _engine = eng::start(&client, &n).await;
    api.create(
        &PostParams::default(),
        &webapp("web", json!({"values": {"extraConfigMap": "web-extra"}})),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| ready_at(h, 1)).await;
    // The installed release keeps no rollout: its pods started with the hash.
    let installed = api.get("web").await.unwrap();
    let kinds = |h: &HelmRelease| -> Vec<String> {
        h.status
            .as_ref()
            .map(|s| s.changes.iter().map(|c| c.kind.clone()).collect())
            .unwrap_or_default()
    };
    assert!(!kinds(&installed).contains(&"config-rollout".to_owned()));
    // Someone changes the config the pods read: the tracker rolls them, and the release
    // keeps that it did, naming the ConfigMap.
    config_maps
        .replace("web-extra", &PostParams::default(), &{
            let mut cm = config_maps.get("web-extra").await.unwrap();
            cm.data = extra("bonjour").data;
            cm
        })
        .await
        .unwrap();
    let kept = wait_for(&api, "web", "its config rollout kept", |h| {
        kinds(h).contains(&"config-rollout".to_owned())
    })
    .await;
    let record = kept
        .status
        .as_ref()
        .unwrap()
        .changes
        .iter()
        .find(|c| c.kind == "config-rollout")
        .unwrap()
        .clone();
    assert!(
        record
            .message
            .contains(&format!("Deployment {n}/web rolled"))
            && record.message.contains("ConfigMap web-extra changed"),
        "{record:?}"
    );
    // No new revision: a rollout is not an upgrade.
    assert_eq!(kept.status.as_ref().unwrap().history[0].version, 1);
    let changes = timeline(&n, &["--since", "10m", "-o", "json"]);
    let got = rows(&changes);
    assert_eq!(
        got.first(),
        Some(&(
            "web".to_owned(),
            "config-rollout".to_owned(),
            "wheelhouse".to_owned()
        )),
        "{got:#?}"
    );
    ns.delete().await;
}
