//! Flux's CEL fields beside Flux's real helm-controller, on the same cluster: a release
//! whose chart holds a custom resource with `healthCheckExprs` waits for that resource as
//! Flux's does (ready when `current` holds, failed when `failed` holds), an expression that
//! does not compile stalls it as Flux stalls its own (`InvalidCELExpression`), and a
//! `dependsOn` entry with a `readyExpr` waits for the expression, in place of the
//! dependency's Ready condition, as Flux's does.

use crate::support;

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::engine::{is, setup, wait_for};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::FluxHelmRelease;
use wheelhouse::engine::SHARD_LABEL;

const FLUX: &str = "flux-side";
const WH: &str = "wh-side";

/// The Widget kind of the `celwidget` chart: nothing in the cluster sets its status; the
/// test does, as its controller would.
async fn widget_crd(client: &Client) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.cel.wheelhouse.test"},
        "spec": {
            "group": "cel.wheelhouse.test",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    });
    support::apply_documents(client, &[crd], "cel-test").await;
    // Served once discovery has it.
    let start = std::time::Instant::now();
    while kube::discovery::pinned_kind(
        client,
        &kube::api::GroupVersionKind::gvk("cel.wheelhouse.test", "v1", "Widget"),
    )
    .await
    .is_err()
    {
        assert!(start.elapsed() < support::PATIENCE, "Widget never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn widgets(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "cel.wheelhouse.test",
        "v1",
        "Widget",
    ));
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Sets a Widget's status as its controller would (once it exists): the phase, for its
/// current generation.
async fn set_phase(client: &Client, ns: &str, name: &str, phase: &str) {
    let api = widgets(client, ns);
    let start = std::time::Instant::now();
    let generation = loop {
        if let Some(widget) = api.get_opt(name).await.unwrap() {
            break widget.metadata.generation.unwrap();
        }
        assert!(
            start.elapsed() < support::PATIENCE,
            "Widget {name} never created"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase, "observedGeneration": generation}})),
    )
    .await
    .unwrap();
}

/// The expressions both releases carry: Flux's shape.
fn exprs() -> Value {
    json!([{
        "apiVersion": "cel.wheelhouse.test/v1",
        "kind": "Widget",
        "current": "status.phase == 'Ready'",
        "failed": "status.phase == 'Broken'",
    }])
}

/// The `celwidget` chart served as a Helm repository, named `charts` in `ns` for Flux;
/// its URL for wheelhouse.
async fn charts(client: &Client, ns: &str) -> (support::source::RepoServer, String) {
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/celwidget");
    let served = support::flux::serve(&chart, "celwidget", &["0.1.0"]).await;
    support::flux::helm_repository(client, ns, "charts", &served.1).await;
    served
}

fn flux_yaml(spec: &Value) -> String {
    wheelhouse::text::yaml::to_string(spec)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

fn wheelhouse_release(ns: &str, name: &str, spec: Value) -> HelmRelease {
    let mut hr: HelmRelease = serde_json::from_value(json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": ns, "labels": {SHARD_LABEL: ns}},
        "spec": spec,
    }))
    .unwrap();
    hr.metadata.namespace = Some(ns.into());
    hr
}

fn flux_condition(hr: &FluxHelmRelease, type_: &str) -> Option<(String, String)> {
    hr.condition(type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn health_check_exprs_judge_custom_resources_as_fluxs_helm_controller_does() {
    let (client, ns, api) = setup("cel-health").await;
    support::flux::require_flux(&client).await;
    widget_crd(&client).await;
    let ns = ns.name.clone();
    let (_server, url) = charts(&client, &ns).await;
    let flux_spec = |size: i64| {
        json!({
            "interval": "1m",
            "timeout": "3m",
            "chart": {"spec": {
                "chart": "celwidget", "version": "0.1.0", "interval": "1m",
                "sourceRef": {"kind": "HelmRepository", "name": "charts"},
            }},
            "values": {"size": size},
            "upgrade": {"remediation": {"retries": 0}},
            "healthCheckExprs": exprs(),
        })
    };
    support::flux::helm_release(&client, &ns, FLUX, &flux_yaml(&flux_spec(1))).await;
    api.create(
        &PostParams::default(),
        &wheelhouse_release(
            &ns,
            WH,
            json!({
                "chart": {"repository": url, "name": "celwidget", "version": "0.1.0"},
                "timeout": "3m",
                "values": {"size": 1},
                "configTracking": {"enabled": false},
                "healthCheckExprs": exprs(),
            }),
        ),
    )
    .await
    .unwrap();
    let _engine = support::engine::start_shard(&client, &ns).await;

    // Both wait on the Widget, which has no status yet: the ConfigMap is ready, the
    // Widget is not (its `current` fails on the missing field: not current yet).
    let waiting = support::engine::waiting_with_ready(&api, WH, 1, 2).await;
    assert!(
        waiting
            .condition("Ready")
            .is_none_or(|c| c.status != "True"),
        "{:#?}",
        waiting.status
    );
    let flux = support::flux::until(&client, &ns, FLUX, "installing", |hr| {
        hr.condition("Reconciling")
            .is_some_and(|c| c.status == "True" && c.message.contains("'install'"))
    })
    .await;
    assert!(!support::flux::ready(&flux), "{:#?}", flux.status);

    // Its controller says Ready: both releases are.
    set_phase(&client, &ns, WH, "Ready").await;
    set_phase(&client, &ns, FLUX, "Ready").await;
    wait_for(&api, WH, "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    support::flux::until(&client, &ns, FLUX, "Ready at revision 1", |hr| {
        support::flux::ready(hr) && support::flux::revision(hr) == 1
    })
    .await;

    // An upgrade the Widget's controller then calls broken: both upgrades fail at once, on
    // the `failed` expression (Flux: "failed early due to stalled resources").
    api.patch(
        WH,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"values": {"size": 2}}})),
    )
    .await
    .unwrap();
    let flux_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<FluxHelmRelease>(&()),
    );
    flux_api
        .patch(
            FLUX,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"values": {"size": 2}}})),
        )
        .await
        .unwrap();
    for name in [WH, FLUX] {
        let api = widgets(&client, &ns);
        let start = std::time::Instant::now();
        while api.get(name).await.unwrap().data["spec"]["size"] != 2 {
            assert!(
                start.elapsed() < support::PATIENCE * 2,
                "{name} never upgraded"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        set_phase(&client, &ns, name, "Broken").await;
    }
    let failed = wait_for(&api, WH, "the upgrade failed", |h| {
        is(h, "Ready", "False", "UpgradeFailed")
    })
    .await;
    let message = &failed.condition("Ready").unwrap().message;
    assert!(message.contains(&format!("Widget/{ns}/{WH}")), "{message}");
    let flux = support::flux::until(&client, &ns, FLUX, "the upgrade failed", |hr| {
        flux_condition(hr, "Ready") == Some(("False".into(), "UpgradeFailed".into()))
    })
    .await;
    let flux_message = &flux.condition("Ready").unwrap().message;
    assert!(
        flux_message.contains(&format!("Widget/{ns}/{FLUX} status: 'Failed'")),
        "{flux_message}"
    );
}

#[tokio::test]
async fn an_expression_that_does_not_compile_stalls_the_release_as_flux_stalls_it() {
    let (client, ns, api) = setup("cel-invalid").await;
    support::flux::require_flux(&client).await;
    widget_crd(&client).await;
    let ns = ns.name.clone();
    let bad = json!([{"apiVersion": "cel.wheelhouse.test/v1", "kind": "Widget", "current": "status.phase =="}]);
    let (_server, url) = charts(&client, &ns).await;
    support::flux::helm_release(
        &client,
        &ns,
        FLUX,
        &flux_yaml(&json!({
            "interval": "1m",
            "chart": {"spec": {
                "chart": "celwidget", "version": "0.1.0",
                "sourceRef": {"kind": "HelmRepository", "name": "charts"},
            }},
            "healthCheckExprs": bad,
        })),
    )
    .await;
    api.create(
        &PostParams::default(),
        &wheelhouse_release(
            &ns,
            WH,
            json!({
                "chart": {"repository": url, "name": "celwidget", "version": "0.1.0"},
                "healthCheckExprs": bad,
            }),
        ),
    )
    .await
    .unwrap();
    let _engine = support::engine::start_shard(&client, &ns).await;

    let stalled = wait_for(&api, WH, "stalled", |h| {
        is(h, "Stalled", "True", "InvalidCELExpression")
    })
    .await;
    let message = &stalled.condition("Stalled").unwrap().message;
    assert!(message.contains("status.phase =="), "{message}");
    support::flux::until(&client, &ns, FLUX, "stalled", |hr| {
        flux_condition(hr, "Stalled") == Some(("True".into(), "InvalidCELExpression".into()))
    })
    .await;
    // Neither installed anything.
    for name in [WH, FLUX] {
        let (found, said) = support::engine::helm_try(&ns, &["history", name]);
        assert!(!found && said.contains("not found"), "{name}: {said}");
    }
}

#[tokio::test]
async fn a_ready_expr_stands_in_for_the_dependencys_ready_condition_as_in_flux() {
    let (client, ns, api) = setup("cel-ready").await;
    support::flux::require_flux(&client).await;
    widget_crd(&client).await;
    let ns = ns.name.clone();
    let (_server, url) = charts(&client, &ns).await;
    // Each side: a dependency that is suspended (never Ready) and a release that depends
    // on it with a readyExpr over the dependency's annotations and its own labels.
    let ready_expr = "has(dep.metadata.annotations) && 'go' in dep.metadata.annotations \
         && dep.metadata.annotations['go'] == self.metadata.labels['wave']";
    let flux_chart = json!({"spec": {
        "chart": "celwidget", "version": "0.1.0",
        "sourceRef": {"kind": "HelmRepository", "name": "charts"},
    }});
    for (name, spec) in [
        (
            "flux-dep",
            json!({"interval": "1m", "suspend": true, "chart": flux_chart}),
        ),
        (
            FLUX,
            json!({"interval": "1m", "chart": flux_chart,
                   "dependsOn": [{"name": "flux-dep", "readyExpr": ready_expr}]}),
        ),
    ] {
        let mut hr: Value = support::from_yaml(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n\
             metadata: {{name: {name}, namespace: {ns}, labels: {{wave: one}}}}\nspec:\n{}",
            flux_yaml(&spec)
        ));
        hr["metadata"]["namespace"] = ns.clone().into();
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            &ns,
            &ApiResource::erase::<FluxHelmRelease>(&()),
        )
        .create(&PostParams::default(), &serde_json::from_value(hr).unwrap())
        .await
        .unwrap();
    }
    let wh_chart = json!({"repository": url, "name": "celwidget", "version": "0.1.0"});
    let mut dep = wheelhouse_release(&ns, "wh-dep", json!({"chart": wh_chart, "suspend": true}));
    dep.metadata
        .labels
        .get_or_insert_default()
        .insert("wave".into(), "one".into());
    api.create(&PostParams::default(), &dep).await.unwrap();
    let mut dependent = wheelhouse_release(
        &ns,
        WH,
        json!({"chart": wh_chart, "dependsOn": [{"name": "wh-dep", "readyExpr": ready_expr}]}),
    );
    dependent
        .metadata
        .labels
        .get_or_insert_default()
        .insert("wave".into(), "one".into());
    api.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    let _engine = support::engine::start_shard(&client, &ns).await;

    // Both wait for the expression...
    let held = wait_for(&api, WH, "held by its dependency", |h| {
        is(h, "Ready", "False", "DependencyNotReady")
    })
    .await;
    let message = &held.condition("Ready").unwrap().message;
    assert!(message.contains("readyExpr"), "{message}");
    support::flux::until(&client, &ns, FLUX, "held by its dependency", |hr| {
        flux_condition(hr, "Ready") == Some(("False".into(), "DependencyNotReady".into()))
    })
    .await;

    // ... and go once it holds, though neither dependency is Ready (it replaces Ready).
    for (api_resource, name) in [
        (ApiResource::erase::<HelmRelease>(&()), "wh-dep"),
        (ApiResource::erase::<FluxHelmRelease>(&()), "flux-dep"),
    ] {
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &api_resource)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"go": "one"}}})),
            )
            .await
            .unwrap();
    }
    wait_for(&api, WH, "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    support::flux::until(&client, &ns, FLUX, "installed", |hr| {
        support::flux::ready(hr) && support::flux::revision(hr) == 1
    })
    .await;
    let dep = api.get("wh-dep").await.unwrap();
    assert!(
        dep.condition("Ready").is_none_or(|c| c.status != "True"),
        "the dependency was never Ready: {:#?}",
        dep.status
    );
}

/// A `readyExpr` over a field the dependency does not have is said at once, with CEL's
/// own words, not after the release's timeout: the release is held by its dependency
/// (DependencyNotReady) with `no such key` in its message while its 10-minute timeout has
/// barely begun.
#[tokio::test]
async fn a_ready_expr_over_a_missing_field_is_reported_at_once() {
    let (client, ns, api) = setup("cel-missing").await;
    let ns = ns.name.clone();
    let (_server, url) = charts(&client, &ns).await;
    let wh_chart = json!({"repository": url, "name": "celwidget", "version": "0.1.0"});
    api.create(
        &PostParams::default(),
        &wheelhouse_release(&ns, "dep", json!({"chart": wh_chart, "suspend": true})),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &wheelhouse_release(
            &ns,
            WH,
            json!({"chart": wh_chart, "timeout": "10m",
                   "dependsOn": [{"name": "dep", "readyExpr": "dep.spec.nosuchfield == 'x'"}]}),
        ),
    )
    .await
    .unwrap();
    let _engine = support::engine::start_shard(&client, &ns).await;
    let held = wait_for(&api, WH, "held with CEL's reason", |h| {
        is(h, "Ready", "False", "DependencyNotReady")
            && h.condition("Ready")
                .is_some_and(|c| c.message.contains("no such key"))
    })
    .await;
    // wait_for gives up long before the 10-minute timeout (support::PATIENCE).
    let message = &held.condition("Ready").unwrap().message;
    assert!(message.contains("dependency"), "{message}");
}
