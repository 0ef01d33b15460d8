//! `spec.postRenderers` as Flux's helm-controller applies them: the same chart, values and
//! post-renderers (a strategic-merge patch with a target, JSON6902 patches on a template
//! and on a hook, an images entry in a second post-renderer) installed and upgraded by
//! Flux's real helm-controller and by wheelhouse, side by side in one namespace under two
//! release names, give byte for byte the same `helm get manifest` and `helm get hooks`.
//! Only the release name is normalised, and the two origin labels helm-controller puts on
//! every object of every release it manages (helm.toolkit.fluxcd.io/name and /namespace:
//! Flux's, not the post-renderers'), which wheelhouse leaves out. With drift detection on,
//! the fields the post-renderers set are no drift; the chart's unpatched value written back
//! by hand is, and is corrected to the patched one.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::engine::{annotate, helm, is, setup, wait_for};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::annotations::RECONCILE_REQUESTED_AT;
use wheelhouse::engine::SHARD_LABEL;

const FLUX: &str = "flux-side";
const WH: &str = "wh-side";

/// The post-renderers both releases carry, in Flux's shape.
fn post_renderers() -> Value {
    json!([
        {"kustomize": {"patches": [
            {
                "target": {"kind": "Deployment", "labelSelector": "app.kubernetes.io/component=web"},
                "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: any\nspec:\n  template:\n    metadata:\n      annotations:\n        post-rendered: \"yes\"\n    spec:\n      containers:\n        - name: web\n          env:\n            - name: PATCHED\n              value: by-a-post-renderer\n",
            },
            {
                "target": {"version": "v1", "kind": "ConfigMap", "labelSelector": "app.kubernetes.io/component=settings"},
                "patch": "- op: replace\n  path: /data/mode\n  value: patched\n- op: add\n  path: /data/extra\n  value: from-json6902\n",
            },
            {
                "target": {"kind": "ConfigMap", "labelSelector": "app.kubernetes.io/component=hook"},
                "patch": "[{\"op\": \"add\", \"path\": \"/data/hook\", \"value\": \"post-rendered\"}]",
            },
        ]}},
        {"kustomize": {"images": [
            {"name": "registry.invalid/web", "newName": "registry.invalid/web-patched", "newTag": "2.0"},
        ]}},
    ])
}

fn flux_revision(hr: &wheelhouse::api::flux::FluxHelmRelease) -> i32 {
    support::flux::revision(hr)
}

async fn set_both_messages(
    client: &Client,
    api: &Api<HelmRelease>,
    ns: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let patch = json!({"spec": {"values": {"message": message}}});
    api.patch(WH, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    support::flux::patch(client, ns, FLUX, &patch).await
}

/// `helm get manifest` and `helm get hooks` of both releases: Flux's normalised, and
/// wheelhouse's.
fn both(ns: &str) -> [(String, String); 2] {
    ["manifest", "hooks"].map(|what| {
        (
            support::flux::as_wheelhouse(&helm(ns, &["get", what, FLUX]), ns, FLUX, WH),
            helm(ns, &["get", what, WH]),
        )
    })
}

fn assert_same(ns: &str, when: &str) {
    for (what, (flux, wh)) in ["manifest", "hooks"].iter().zip(both(ns)) {
        assert_eq!(
            wh, flux,
            "{when}: `helm get {what}` of wheelhouse's release (left) differs from Flux's (right, normalised)"
        );
    }
}

/// The postrender chart served as a Helm repository, and one release of it installed by
/// Flux's helm-controller and one by a wheelhouse engine, with the same values and
/// post-renderers (each spec with `flux_extra` / `wh_extra` merged in); returns once both
/// are Ready at revision 1.
async fn install_both(
    client: &Client,
    api: &Api<HelmRelease>,
    ns: &str,
    flux_extra: Value,
    wh_extra: Value,
) -> (support::source::RepoServer, support::engine::TestEngine) {
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/postrender");
    let (server, url) = support::flux::serve(&chart, "postrender", &["0.1.0"]).await;

    // Flux's helm-controller installs one release...
    support::flux::helm_repository(client, ns, "charts", &url).await;
    let mut flux_spec = json!({
        "interval": "1m",
        "chart": {"spec": {
            "chart": "postrender", "version": "0.1.0", "interval": "1m",
            "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        }},
        "values": {"message": "one"},
        "postRenderers": post_renderers(),
    });
    support::engine::merge_into(&mut flux_spec, flux_extra);
    let flux_yaml = wheelhouse::text::yaml::to_string(&flux_spec)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect::<String>();
    support::flux::helm_release(client, ns, FLUX, &flux_yaml).await;

    // ... and wheelhouse the other, from the same repository and with the same spec.
    let mut wh_spec = json!({
        "chart": {"repository": url, "name": "postrender", "version": "0.1.0"},
        "timeout": "60s",
        "values": {"message": "one"},
        "postRenderers": post_renderers(),
        // Its hashes would be in the stored manifest; Flux has none.
        "configTracking": {"enabled": false},
    });
    support::engine::merge_into(&mut wh_spec, wh_extra);
    let mut wh: HelmRelease = serde_json::from_value(json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": WH, "namespace": ns, "labels": {SHARD_LABEL: ns}},
        "spec": wh_spec,
    }))
    .unwrap();
    wh.metadata.namespace = Some(ns.to_owned());
    api.create(&PostParams::default(), &wh).await.unwrap();
    let engine = support::engine::start_shard(client, ns).await;

    support::flux::until(client, ns, FLUX, "Ready at revision 1", |hr| {
        support::flux::ready(hr) && flux_revision(hr) == 1
    })
    .await;
    wait_for(api, WH, "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    (server, engine)
}

#[tokio::test]
async fn post_renderers_render_as_fluxs_helm_controller_renders_them() {
    let (client, ns, api) = setup("post-render").await;
    support::flux::require_flux(&client).await;
    let ns = ns.name.clone();
    let (_server, _engine) = install_both(
        &client,
        &api,
        &ns,
        json!({}),
        json!({"driftDetection": {"mode": "enabled"}}),
    )
    .await;

    // The post-renderers did their work (so equal manifests mean something)...
    let [(_, manifest), (_, hooks)] = both(&ns);
    for patched in [
        "post-rendered: \"yes\"",
        "value: by-a-post-renderer",
        "image: registry.invalid/web-patched:2.0",
        "mode: patched",
        "extra: from-json6902",
    ] {
        assert!(manifest.contains(patched), "{patched} missing:\n{manifest}");
    }
    assert!(hooks.contains("hook: post-rendered"), "{hooks}");
    // ... and both render them the same, byte for byte.
    assert_same(&ns, "after install");

    // Drift detection compares with what was stored, post-rendered: the patched fields
    // are no drift. A reconcile handled is the sign that the check ran.
    annotate(&api, WH, RECONCILE_REQUESTED_AT, "post-render-1").await;
    let checked = wait_for(&api, WH, "the reconcile handled", |h| {
        h.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("post-render-1")
    })
    .await;
    assert!(
        checked
            .condition("Drifted")
            .is_none_or(|c| c.status != "True"),
        "{:#?}",
        checked.status
    );
    assert!(checked.status.as_ref().unwrap().drift.is_none());
    assert_eq!(checked.status.as_ref().unwrap().history[0].version, 1);

    // The chart's own value written back by hand is drift, corrected to the patched one.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let settings = format!("{WH}-settings");
    configmaps
        .patch(
            &settings,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"mode": "plain"}})),
        )
        .await
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        let mode = configmaps.get(&settings).await.unwrap().data.unwrap()["mode"].clone();
        if mode == "patched" {
            break;
        }
        assert!(
            start.elapsed() < support::PATIENCE,
            "the hand-written mode was never corrected: {:#?}",
            api.get(WH).await.unwrap().status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // An upgrade of both (new values, same post-renderers): the same again.
    set_both_messages(&client, &api, &ns, "two").await.unwrap();
    support::flux::until(&client, &ns, FLUX, "Ready at revision 2", |hr| {
        support::flux::ready(hr) && flux_revision(hr) == 2
    })
    .await;
    wait_for(&api, WH, "upgraded", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 2
    })
    .await;
    let [(_, manifest), _] = both(&ns);
    // (kustomize writes the value unquoted, as it does for Flux.)
    assert!(manifest.contains("message: two\n"), "{manifest}");
    assert_same(&ns, "after upgrade");

    // The post-renderers alone changed (another image tag): a new revision for both, as
    // helm-controller upgrades on a changed post-renderers digest.
    let mut changed = post_renderers();
    changed[1]["kustomize"]["images"][0]["newTag"] = json!("3.0");
    let patch = json!({"spec": {"postRenderers": changed}});
    api.patch(WH, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    support::flux::patch(&client, &ns, FLUX, &patch)
        .await
        .unwrap();
    support::flux::until(&client, &ns, FLUX, "Ready at revision 3", |hr| {
        support::flux::ready(hr) && flux_revision(hr) == 3
    })
    .await;
    wait_for(&api, WH, "upgraded by its post-renderers", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().unwrap().history[0].version == 3
    })
    .await;
    let [(_, manifest), _] = both(&ns);
    assert!(
        manifest.contains("image: registry.invalid/web-patched:3.0"),
        "{manifest}"
    );
    assert_same(&ns, "after the post-renderers changed");
}

/// `postRenderStrategy: nohooks` (Helm 3's behaviour, one of Helm 4's strategies): the
/// post-renderers see the templates only, the hooks stay as the chart renders them, the
/// same under Flux's helm-controller and wheelhouse, byte for byte.
#[tokio::test]
async fn the_nohooks_strategy_leaves_hooks_alone_as_helm_controller_does() {
    let (client, ns, api) = setup("post-render-nohooks").await;
    support::flux::require_flux(&client).await;
    let ns = ns.name.clone();
    let nohooks = json!({"postRenderStrategy": "nohooks"});
    let (_server, _engine) = install_both(&client, &api, &ns, nohooks.clone(), nohooks).await;
    let [(_, manifest), (_, hooks)] = both(&ns);
    assert!(manifest.contains("mode: patched"), "{manifest}");
    assert!(!hooks.contains("hook: post-rendered"), "{hooks}");
    assert_same(&ns, "with nohooks");
}

/// A patch kustomize cannot read fails the install with kustomize's reason in Ready, and
/// nothing is applied (`--renderer helm` refuses post-renderers: a unit test of
/// src/helm/render/helm.rs).
#[tokio::test]
async fn a_malformed_patch_is_a_clear_error_and_nothing_is_applied() {
    let (client, ns, api) = setup("post-render-bad").await;
    let ns = ns.name.clone();
    let mut hr = support::engine::release(
        "bad",
        "postrender",
        json!({
            "postRenderers": [{"kustomize": {"patches": [
                {"patch": "{not: [yaml", "target": {"kind": "ConfigMap"}},
            ]}}],
            "install": {"remediation": {"retries": 0}},
        }),
    );
    hr.metadata.labels = Some([(SHARD_LABEL.to_owned(), ns.clone())].into());
    api.create(&PostParams::default(), &hr).await.unwrap();
    let _engine = support::engine::start_shard(&client, &ns).await;
    let failed = wait_for(&api, "bad", "install failed", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let message = failed.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("error while running post render on files"),
        "{message}"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(
        configmaps.get_opt("bad-settings").await.unwrap().is_none(),
        "nothing is applied"
    );
}
