//! `wheelhouse migrate` end to end: a release that Flux's real helm-controller installed
//! (from a chart that Flux's real source-controller fetched from a Helm repository served
//! here on 127.0.0.1) is handed over to wheelhouse, which continues its Helm history: the
//! next change is revision 2, as the real `helm history` shows, not a second install.
//! Both Flux controllers run beside the control plane (tests/cluster/up.sh starts them).

use crate::support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::engine::{helm_history, set_values, setup, upgraded_to, wait_for};
use support::source::{Entry, RepoServer, chart_tgz, index_yaml, sha256_hex};
use support::{PATIENCE, kubeconfig_path};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::{FluxHelmRelease, FluxHelmRepository};
use wheelhouse::engine::SHARD_LABEL;

/// How long Flux may take to fetch the index and chart and install from them.
const FLUX_PATIENCE: Duration = Duration::from_secs(180);

fn flux_releases(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<FluxHelmRelease>(&()),
    )
}

fn flux_repositories(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<FluxHelmRepository>(&()),
    )
}

/// Flux's CRDs must be there; the test says where they come from when they are not.
async fn require_flux_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "helmreleases.helm.toolkit.fluxcd.io",
        "helmrepositories.source.toolkit.fluxcd.io",
    ] {
        assert!(
            crds.get_opt(crd).await.unwrap().is_some(),
            "the CRD {crd} is not installed: tests/cluster/up.sh installs Flux's CRDs and starts its controllers (tests/cluster/flux.sh builds them); restart the cluster with it"
        );
    }
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let obj: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {:?}: {e}", obj.metadata.name));
}

/// Runs the real `wheelhouse` binary against the test cluster: (success, stdout, stderr).
fn wheelhouse(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(args)
        .output()
        .expect("wheelhouse runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn flux_helm_release(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

fn flux_helm_repository(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmRepository",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// Ready, with revision `revision` the newest in the status's history.
fn ready_at(h: &HelmRelease, revision: i32) -> bool {
    h.condition("Ready").is_some_and(|c| c.status == "True")
        && h.status
            .as_ref()
            .and_then(|s| s.history.first())
            .is_some_and(|s| s.version == revision)
}

/// Suspends the Flux HelmRelease `ns/name` as `flux suspend hr` does, then hands it over
/// with `wheelhouse migrate --apply`, which must succeed: its (stdout, stderr).
async fn suspend_and_migrate(flux: &Api<DynamicObject>, ns: &str, name: &str) -> (String, String) {
    flux.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    let (ok, stdout, stderr) = wheelhouse(&["migrate", &format!("{ns}/{name}"), "--apply"]);
    assert!(ok, "migrate --apply {ns}/{name} failed: {stderr}");
    (stdout, stderr)
}

/// A Helm repository on 127.0.0.1 with one chart of our own, greeter 0.1.0 (a ConfigMap
/// named after the release, with its `greeting` value), under `/charts`.
async fn greeter_repository() -> RepoServer {
    let server = RepoServer::start().await;
    let tgz = chart_tgz("greeter", "0.1.0", "1.0.0");
    server.put("/charts/greeter-0.1.0.tgz", tgz.clone());
    server.put(
        "/charts/index.yaml",
        index_yaml(&[Entry {
            name: "greeter",
            version: "0.1.0",
            app_version: "1.0.0",
            url: server.url("/charts/greeter-0.1.0.tgz"),
            digest: Some(sha256_hex(&tgz)),
        }]),
    );
    server
}

/// Polls the Flux HelmRelease until `pred` holds; fails with its status (and its
/// HelmRepository's) when FLUX_PATIENCE runs out.
async fn flux_until(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let api = flux_releases(client, ns);
    let deadline = tokio::time::Instant::now() + FLUX_PATIENCE;
    loop {
        let hr = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        if pred(&hr) {
            return hr;
        }
        if tokio::time::Instant::now() >= deadline {
            let repos = flux_repositories(client, ns)
                .list(&Default::default())
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .map(|r| serde_json::to_value(r).unwrap()["status"].clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            panic!(
                "Flux HelmRelease {ns}/{name}: gave up waiting for {what} (is Flux's helm-controller running? tests/cluster/up.sh starts it)\nits status: {:#}\nHelmRepository status: {repos:#?}",
                hr["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn flux_condition(hr: &Value, type_: &str) -> Option<(String, String)> {
    hr.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

#[tokio::test]
async fn a_flux_release_continues_its_helm_history_under_wheelhouse() {
    let (client, ns, api) = setup("migrate").await;
    require_flux_crds(&client).await;
    let ns_name = ns.name.clone();

    // A Helm repository on 127.0.0.1 with one chart of our own (a ConfigMap).
    let server = greeter_repository().await;
    let repository = server.url("/charts");

    // Flux installs it. targetNamespace makes Flux name the release `<ns>-greeter`.
    create(
        &flux_repositories(&client, &ns_name),
        flux_helm_repository(
            &ns_name,
            "charts",
            json!({"url": repository, "interval": "1m"}),
        ),
    )
    .await;
    let flux = flux_releases(&client, &ns_name);
    let mut greeter = flux_helm_release(
        &ns_name,
        "greeter",
        json!({
            "interval": "1m",
            "targetNamespace": ns_name,
            "chart": {"spec": {
                "chart": "greeter",
                "version": "0.1.0",
                "sourceRef": {"kind": "HelmRepository", "name": "charts"},
                "interval": "1m",
            }},
            "values": {"greeting": "from flux"},
            "install": {"remediation": {"retries": 1}},
        }),
    );
    // Carried over by migrate: only this test's shard engine acts on the release.
    greeter["metadata"]["labels"] = json!({SHARD_LABEL: ns_name});
    create(&flux, greeter).await;
    let release = format!("{ns_name}-greeter");
    let installed = flux_until(&client, &ns_name, "greeter", "Ready at revision 1", |hr| {
        flux_condition(hr, "Ready").is_some_and(|(s, _)| s == "True")
            && hr.pointer("/status/history/0/version") == Some(&json!(1))
    })
    .await;
    assert_eq!(installed["status"]["history"][0]["name"], release.as_str());
    assert_eq!(
        helm_history(&ns_name, &release),
        [(1, "deployed".to_owned(), "Install complete".to_owned())]
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns_name);
    let revision_1 = format!("sh.helm.release.v1.{release}.v1");
    let flux_record = secrets.get(&revision_1).await.unwrap().metadata.uid;

    // Printed: a wheelhouse HelmRelease of the same release, nothing applied.
    let (ok, yaml, stderr) = wheelhouse(&["migrate", &format!("{ns_name}/greeter")]);
    assert!(ok, "migrate failed: {stderr}");
    let printed: Value =
        wheelhouse::text::yaml::from_str(&yaml).expect("migrate prints one YAML document");
    assert_eq!(printed["apiVersion"], "wheelhouse.dev/v1alpha1");
    assert_eq!(printed["metadata"]["labels"], json!({SHARD_LABEL: ns_name}));
    assert_eq!(
        printed["spec"]["chart"],
        json!({"repository": repository, "name": "greeter", "version": "0.1.0", "interval": "1m"})
    );
    assert_eq!(printed["spec"]["targetNamespace"], ns_name.as_str());
    assert!(
        printed["spec"].get("releaseName").is_none(),
        "wheelhouse names it as Flux does: {yaml}"
    );
    assert_eq!(printed["spec"]["values"], json!({"greeting": "from flux"}));
    // Conflicts are not forced: what helm-controller holds with the values it deployed
    // moves to wheelhouse on the first upgrade (checked below), nothing else.
    assert!(
        printed["spec"]["upgrade"].get("forceConflicts").is_none(),
        "{yaml}"
    );
    only_the_index_refresh_is_not_carried(&stderr);

    // Applying while Flux still acts on the release is refused, and changes nothing.
    let (ok, _, stderr) = wheelhouse(&["migrate", &format!("{ns_name}/greeter"), "--apply"]);
    assert!(!ok, "applied beside an active Flux HelmRelease");
    assert!(
        stderr.contains(&format!(
            "is not suspended, so helm-controller would go on acting on the release beside wheelhouse. Suspend it first (`flux suspend hr greeter -n {ns_name}`"
        )),
        "{stderr}"
    );
    assert!(api.get_opt("greeter").await.unwrap().is_none());

    // Suspended as `flux suspend hr` does it; then handed over.
    let (stdout, _) = suspend_and_migrate(&flux, &ns_name, "greeter").await;
    assert!(
        stdout.contains(&format!(
            "applied HelmRelease {ns_name}/greeter (wheelhouse.dev/v1alpha1, field manager wheelhouse): created"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("its next revision follows revision 1"),
        "{stdout}"
    );
    let migrated = api.get("greeter").await.unwrap();
    assert!(!migrated.spec.suspend);
    assert_eq!(migrated.release_name(), release);
    // Applied server-side by `wheelhouse` (an engine may have added its finalizer since).
    let applied = migrated.metadata.managed_fields.iter().flatten().any(|f| {
        f.manager.as_deref() == Some("wheelhouse")
            && f.operation.as_deref() == Some("Apply")
            && f.subresource.is_none()
            && f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.get("f:spec").is_some())
    });
    assert!(applied, "{:#?}", migrated.metadata.managed_fields);

    // wheelhouse takes the release as it is: Ready, no new revision for an unchanged state.
    let _engine = support::engine::start_shard(&client, &ns_name).await;
    wait_for(&api, "greeter", "Ready at Flux's revision 1", |h| {
        ready_at(h, 1)
    })
    .await;
    assert_eq!(
        helm_history(&ns_name, &release),
        [(1, "deployed".to_owned(), "Install complete".to_owned())],
        "adopting the release wrote no revision"
    );

    // A change is an upgrade of the same release: revision 2 beside Flux's revision 1.
    set_values(&api, "greeter", json!({"greeting": "from wheelhouse"})).await;
    wait_for(&api, "greeter", "revision 2 deployed", |h| {
        upgraded_to(h, 2)
    })
    .await;
    assert_eq!(
        helm_history(&ns_name, &release),
        [
            (1, "superseded".to_owned(), "Install complete".to_owned()),
            (2, "deployed".to_owned(), "Upgrade complete".to_owned()),
        ]
    );
    assert_eq!(
        secrets.get(&revision_1).await.unwrap().metadata.uid,
        flux_record,
        "revision 1 is still the record Flux wrote"
    );
    let greeting = Api::<ConfigMap>::namespaced(client.clone(), &ns_name)
        .get(&release)
        .await
        .unwrap()
        .data
        .unwrap()["greeting"]
        .clone();
    assert_eq!(greeting, "from wheelhouse");
    // The Flux object is left in place, suspended.
    let left = serde_json::to_value(flux.get("greeter").await.unwrap()).unwrap();
    assert_eq!(left["spec"]["suspend"], true);

    // Cleanup: wheelhouse uninstalls; Flux lets a suspended HelmRelease go untouched.
    support::engine::delete_and_await_uninstall(&client, &ns_name, "greeter").await;
    flux.delete("greeter", &DeleteParams::default())
        .await
        .unwrap();
    ns.delete().await;
}

fn flux_sources(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let plural = match kind {
        "OCIRepository" => "ocirepositories",
        _ => "gitrepositories",
    };
    let resource = ApiResource {
        group: "source.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Flux installs revision 1 of one release from the local OCI registry (chartRef to an
/// OCIRepository) and of another from the local Git server (a GitRepository), with its
/// real source-controller and helm-controller; `migrate --apply` hands both over as they
/// are, and the next change through wheelhouse is revision 2 of the same Helm releases.
#[tokio::test]
async fn flux_charts_from_an_oci_registry_and_git_continue_their_history_under_wheelhouse() {
    let (client, ns, api) = setup("migrate-sources").await;
    require_flux_crds(&client).await;
    let ns_name = ns.name.clone();

    // The webapp test chart, 1.0.0, pushed with the real helm to the plain-HTTP registry,
    // and committed with the real git to a repository of the Git server.
    let registry = support::oci::registries();
    let path = format!("flux-{:08x}", support::rand_u32());
    support::oci::Pusher::new().push(&registry.plain, &path, "1.0.0", "", None);
    let git_server = support::git::server();
    let repo = support::git::Repo::new(&git_server, "flux-migrate");
    repo.commit_chart("main", "charts/web", "1.0.0", "", "from git");
    let git_url = format!("{}/{}", git_server.http, repo.name);

    create(
        &flux_sources(&client, &ns_name, "OCIRepository"),
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": "web-chart", "namespace": ns_name},
            "spec": {
                "url": format!("oci://{}/{path}/webapp", registry.plain),
                "ref": {"tag": "1.0.0"},
                "insecure": true,
                "interval": "1m",
                "layerSelector": {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "operation": "copy"},
            },
        }),
    )
    .await;
    create(
        &flux_sources(&client, &ns_name, "GitRepository"),
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "fleet", "namespace": ns_name},
            "spec": {"url": git_url, "ref": {"branch": "main"}, "interval": "1m"},
        }),
    )
    .await;
    let flux = flux_releases(&client, &ns_name);
    let values = json!({"replicaCount": 1});
    let mut from_oci = flux_helm_release(
        &ns_name,
        "from-oci",
        json!({"interval": "1m", "chartRef": {"kind": "OCIRepository", "name": "web-chart"}, "values": values}),
    );
    let mut from_git = flux_helm_release(
        &ns_name,
        "from-git",
        json!({"interval": "1m", "values": values, "chart": {"spec": {
            "chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "fleet"}, "interval": "1m",
            // Each commit is a new chart, as in wheelhouse; Flux then records the commit
            // in the chart's version, which tells wheelhouse the release is at it.
            "reconcileStrategy": "Revision"}}}),
    );
    for hr in [&mut from_oci, &mut from_git] {
        hr["metadata"]["labels"] = json!({SHARD_LABEL: ns_name});
    }
    create(&flux, from_oci).await;
    create(&flux, from_git).await;
    // The dashboard's inventory reads the OCIRepository's chart and fetched version, what
    // a chartRef release shows before Flux records a revision.
    let inventory = wheelhouse::frontend::inventory::Inventory::start(
        client.clone(),
        &wheelhouse::cluster::client::Scope::Namespace(ns_name.clone()),
    );
    let mut others = inventory.subscribe();
    let source = wheelhouse::frontend::inventory::chart_sources::SourceKey {
        kind: "OCIRepository".into(),
        namespace: ns_name.clone(),
        name: "web-chart".into(),
    };
    let seen = tokio::time::timeout(
        support::PATIENCE,
        others.wait_for(|o| {
            o.chart_sources.get(&source).is_some_and(|c| {
                c.chart.as_deref() == Some("webapp") && c.version.as_deref() == Some("1.0.0")
            })
        }),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    assert!(
        seen,
        "the OCIRepository's chart never seen: {:?}",
        others.borrow().chart_sources
    );
    drop(inventory);
    for name in ["from-oci", "from-git"] {
        flux_until(&client, &ns_name, name, "Ready at revision 1", |hr| {
            flux_condition(hr, "Ready").is_some_and(|(s, _)| s == "True")
                && hr.pointer("/status/history/0/version") == Some(&json!(1))
        })
        .await;
        assert_eq!(
            helm_history(&ns_name, name),
            [(1, "deployed".to_owned(), "Install complete".to_owned())]
        );
        let (stdout, stderr) = suspend_and_migrate(&flux, &ns_name, name).await;
        only_the_index_refresh_is_not_carried(&stderr);
        assert!(
            stdout.contains("its next revision follows revision 1"),
            "{stdout}"
        );
    }
    let chart = |name: &str| {
        let api = api.clone();
        let name = name.to_owned();
        async move { serde_json::to_value(api.get(&name).await.unwrap().spec.chart).unwrap() }
    };
    assert_eq!(
        chart("from-oci").await,
        json!({"repository": format!("oci://{}/{path}", registry.plain), "name": "webapp",
               "version": "1.0.0", "insecure": true, "interval": "1m"})
    );
    assert_eq!(
        chart("from-git").await,
        json!({"git": {"url": git_url, "ref": {"branch": "main"}, "path": "charts/web"}, "interval": "1m"})
    );

    // wheelhouse takes both as they are, then upgrades each to revision 2.
    let _engine = support::engine::start_shard(&client, &ns_name).await;
    for name in ["from-oci", "from-git"] {
        wait_for(&api, name, "Ready at Flux's revision 1", |h| ready_at(h, 1)).await;
        assert_eq!(
            helm_history(&ns_name, name),
            [(1, "deployed".to_owned(), "Install complete".to_owned())],
            "adopting {name} wrote no revision"
        );
        set_values(
            &api,
            name,
            json!({"replicaCount": 1, "message": "from wheelhouse"}),
        )
        .await;
        wait_for(&api, name, "revision 2 deployed", |h| upgraded_to(h, 2)).await;
        assert_eq!(
            helm_history(&ns_name, name),
            [
                (1, "superseded".to_owned(), "Install complete".to_owned()),
                (2, "deployed".to_owned(), "Upgrade complete".to_owned()),
            ]
        );
    }
    for name in ["from-oci", "from-git"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
        let gone = |o: Option<&HelmRelease>| o.is_none();
        tokio::time::timeout(
            PATIENCE,
            kube::runtime::wait::await_condition(api.clone(), name, gone),
        )
        .await
        .expect("the wheelhouse HelmRelease was uninstalled and deleted")
        .unwrap();
        flux.delete(name, &DeleteParams::default()).await.unwrap();
    }
    ns.delete().await;
}

#[tokio::test]
async fn migrate_refuses_what_it_cannot_carry_and_checks_before_it_changes_anything() {
    let (client, ns, api) = setup("migrate-refuse").await;
    require_flux_crds(&client).await;
    let ns_name = ns.name.clone();
    let flux = flux_releases(&client, &ns_name);
    let repos = flux_repositories(&client, &ns_name);
    let chart = |source: &str| json!({"spec": {"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": source}}});

    // Nothing there.
    let (ok, _, stderr) = wheelhouse(&["migrate", &format!("{ns_name}/nothing")]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("no Flux HelmRelease {ns_name}/nothing")),
        "{stderr}"
    );

    // Its HelmRepository is missing.
    create(
        &flux,
        flux_helm_release(
            &ns_name,
            "orphan",
            json!({"interval": "1h", "suspend": true, "chart": chart("missing")}),
        ),
    )
    .await;
    let (ok, _, stderr) = wheelhouse(&["migrate", &format!("{ns_name}/orphan")]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "no Flux HelmRepository {ns_name}/missing (source.toolkit.fluxcd.io/v1), which HelmRelease {ns_name}/orphan takes its chart from"
        )),
        "{stderr}"
    );

    // A chart from Git: listed as not carried, refused, unless a repository is given.
    create(
        &flux,
        flux_helm_release(
            &ns_name,
            "from-git",
            json!({
                "interval": "1h",
                "suspend": true,
                "serviceAccountName": "deployer",
                "chart": {"spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "flux-system"}}},
            }),
        ),
    )
    .await;
    let (ok, stdout, stderr) = wheelhouse(&["migrate", &format!("{ns_name}/from-git")]);
    assert!(!ok);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&format!("no Flux GitRepository flux-system/repo (source.toolkit.fluxcd.io/v1), which HelmRelease {ns_name}/from-git takes its chart from")),
        "{stderr}"
    );
    // serviceAccountName means the same in wheelhouse: carried, never listed.
    assert!(!stderr.contains("spec.serviceAccountName"), "{stderr}");
    let (ok, stdout, stderr) = wheelhouse(&[
        "migrate",
        &format!("{ns_name}/from-git"),
        "--chart-repository",
        "https://charts.example.com",
    ]);
    assert!(ok, "{stderr}");
    let printed: Value = wheelhouse::text::yaml::from_str(&stdout).unwrap();
    assert_eq!(
        printed["spec"]["chart"],
        json!({"repository": "https://charts.example.com", "name": "web"})
    );
    assert_eq!(printed["spec"]["serviceAccountName"], "deployer");

    // --suspend-flux: Flux is suspended, then the wheelhouse HelmRelease applied (here
    // written suspended, as no engine runs in this test).
    create(
        &repos,
        flux_helm_repository(
            &ns_name,
            "charts",
            json!({"url": "https://charts.example.com/stable", "interval": "1h", "secretRef": {"name": "creds"}}),
        ),
    )
    .await;
    let mut web = flux_helm_release(
        &ns_name,
        "web",
        json!({"interval": "1h", "chart": chart("charts"), "values": {"a": 1}}),
    );
    // No engine of another test puts its finalizer on the wheelhouse copy.
    web["metadata"]["labels"] = json!({SHARD_LABEL: ns_name});
    create(&flux, web).await;
    let (ok, stdout, stderr) = wheelhouse(&[
        "migrate",
        &format!("{ns_name}/web"),
        "--apply",
        "--suspend-flux",
        "--suspended",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "suspended Flux HelmRelease {ns_name}/web (spec.suspend: true)"
        )),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "note: chart.secretRef creds: wheelhouse reads username/password and ca.crt from it"
        ),
        "{stderr}"
    );
    let web = serde_json::to_value(flux.get("web").await.unwrap()).unwrap();
    assert_eq!(web["spec"]["suspend"], true);
    let migrated = api.get("web").await.unwrap();
    assert!(migrated.spec.suspend);
    assert_eq!(
        migrated.spec.chart.repository.as_deref(),
        Some("https://charts.example.com/stable")
    );
    assert_eq!(
        migrated.spec.chart.secret_ref.map(|s| s.name).as_deref(),
        Some("creds")
    );

    // A chart name the wheelhouse CRD refuses (Flux's allows it): migrate says so before
    // anything is written, so the Flux HelmRelease is left as it was.
    create(
        &flux,
        flux_helm_release(
            &ns_name,
            "upper",
            json!({"interval": "1h", "chart": {"spec": {"chart": "WebApp", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}}),
        ),
    )
    .await;
    let (ok, _, stderr) = wheelhouse(&[
        "migrate",
        &format!("{ns_name}/upper"),
        "--apply",
        "--suspend-flux",
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "cannot migrate {ns_name}/upper: spec.chart.spec.chart \"WebApp\" is not a chart name wheelhouse accepts"
        )),
        "{stderr}"
    );
    let upper = serde_json::to_value(flux.get("upper").await.unwrap()).unwrap();
    assert_ne!(upper["spec"]["suspend"], true);
    assert!(api.get_opt("upper").await.unwrap().is_none());

    ns.delete().await;
}

/// Flux's helm-controller installs revision 1 on the second control plane through
/// `spec.kubeConfig`; `migrate --apply` carries the same Secret, and the next change is
/// revision 2 there, as the real `helm history` on that cluster shows. Nothing is written
/// to this cluster's Helm storage by either.
#[tokio::test]
async fn a_flux_release_on_a_remote_cluster_continues_its_history_there_under_wheelhouse() {
    let (client, ns, api) = setup("migrate-remote").await;
    require_flux_crds(&client).await;
    let ns_name = ns.name.clone();
    let remote = support::remote_client().await;
    let _there = support::RemoteNamespace::new(remote.clone(), &ns_name).await;
    let remote_kubeconfig = support::remote_kubeconfig_path();
    let text = std::fs::read_to_string(&remote_kubeconfig).unwrap();
    support::kubeconfig_secret(&client, &ns_name, "prod", "value", &text).await;

    let server = greeter_repository().await;
    create(
        &flux_repositories(&client, &ns_name),
        flux_helm_repository(
            &ns_name,
            "charts",
            json!({"url": server.url("/charts"), "interval": "1m"}),
        ),
    )
    .await;
    let flux = flux_releases(&client, &ns_name);
    let mut greeter = flux_helm_release(
        &ns_name,
        "greeter",
        json!({
            "interval": "1m",
            "kubeConfig": {"secretRef": {"name": "prod"}},
            "chart": {"spec": {
                "chart": "greeter",
                "version": "0.1.0",
                "sourceRef": {"kind": "HelmRepository", "name": "charts"},
            }},
            "values": {"greeting": "from flux"},
        }),
    );
    greeter["metadata"]["labels"] = json!({SHARD_LABEL: ns_name});
    create(&flux, greeter).await;
    flux_until(&client, &ns_name, "greeter", "Ready at revision 1", |hr| {
        flux_condition(hr, "Ready").is_some_and(|(s, _)| s == "True")
            && hr.pointer("/status/history/0/version") == Some(&json!(1))
    })
    .await;
    let history = || support::engine::helm_history_on(&remote_kubeconfig, &ns_name, "greeter");
    assert_eq!(
        history(),
        [(1, "deployed".to_owned(), "Install complete".to_owned())],
        "Flux installed it on the remote cluster"
    );
    let local_records = Api::<Secret>::namespaced(client.clone(), &ns_name);
    let none_here = || async {
        local_records
            .list_metadata(&kube::api::ListParams::default().labels("owner=helm"))
            .await
            .unwrap()
            .items
            .is_empty()
    };
    assert!(none_here().await);

    let (stdout, stderr) = suspend_and_migrate(&flux, &ns_name, "greeter").await;
    only_the_index_refresh_is_not_carried(&stderr);
    assert!(stdout.contains("created"), "{stdout}");
    let migrated = api.get("greeter").await.unwrap();
    assert_eq!(
        migrated
            .spec
            .kube_config
            .as_ref()
            .map(|k| k.secret_ref.name.as_str()),
        Some("prod")
    );

    let _engine = support::engine::start_shard(&client, &ns_name).await;
    wait_for(&api, "greeter", "Ready at Flux's revision 1", |h| {
        ready_at(h, 1)
    })
    .await;
    assert_eq!(history().len(), 1, "adopting the release wrote no revision");
    set_values(&api, "greeter", json!({"greeting": "from wheelhouse"})).await;
    wait_for(&api, "greeter", "revision 2 deployed", |h| {
        upgraded_to(h, 2)
    })
    .await;
    assert_eq!(
        history(),
        [
            (1, "superseded".to_owned(), "Install complete".to_owned()),
            (2, "deployed".to_owned(), "Upgrade complete".to_owned()),
        ]
    );
    let greeting = Api::<ConfigMap>::namespaced(remote.clone(), &ns_name)
        .get("greeter")
        .await
        .unwrap()
        .data
        .unwrap()["greeting"]
        .clone();
    assert_eq!(greeting, "from wheelhouse");
    assert!(none_here().await, "nothing in this cluster's Helm storage");

    support::engine::delete_and_await_uninstall(&client, &ns_name, "greeter").await;
    assert!(history().is_empty(), "uninstalled on the remote cluster");
    flux.delete("greeter", &DeleteParams::default())
        .await
        .unwrap();
    ns.delete().await;
}

/// The one setting of the tests' sources migrate names as not carried: a HelmRepository's
/// `spec.interval` (how often Flux refreshes its index; wheelhouse reads it at each check
/// of the chart). The OCIRepository's and GitRepository's `spec.timeout` the API server
/// defaults to 60s, wheelhouse's own bound: nothing to say.
fn only_the_index_refresh_is_not_carried(stderr: &str) {
    for line in stderr.lines().filter(|l| l.contains("not carried:")) {
        assert!(
            line.contains("HelmRepository")
                && line.contains("spec.interval (how often Flux refreshes"),
            "{stderr}"
        );
    }
}
