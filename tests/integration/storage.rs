//! Release storage is Helm's: the real helm binary lists, inspects and rolls back
//! revisions wheelhouse wrote, and wheelhouse reads and continues histories helm wrote.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Map, Value, json};
use support::{TestNamespace, client, kubeconfig_path, testbin};
use wheelhouse::helm::chart::{self, Chart};
use wheelhouse::helm::release::storage::{self, Storage};
use wheelhouse::helm::release::{
    Hook, HookExecution, HookPhase, Info, Release, Status, Timestamp, decode,
};

const OWNER_LABEL: &str = "wheelhouse.dev/owner";

/// A small chart: a ConfigMap and a Deployment driven by values, a post-install hook,
/// a README and a file read with .Files.
fn write_chart(dir: &Path) -> PathBuf {
    let root = dir.join("web");
    let files: &[(&str, &str)] = &[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 1.2.3\nappVersion: \"2.0.1\"\ndescription: test chart\n",
        ),
        (
            "values.yaml",
            "replicas: 1\nimage:\n  repository: registry.invalid/web\n  tag: \"1\"\ngreeting: hello\n",
        ),
        (
            "templates/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\n\
             data:\n  greeting: {{ .Values.greeting | quote }}\n  app.conf: {{ .Files.Get \"files/app.conf\" | quote }}\n",
        ),
        (
            "templates/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n\
             \x20 replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n\
             \x20 template:\n    metadata:\n      labels: {app: {{ .Release.Name }}}\n    spec:\n\
             \x20     containers:\n      - name: web\n        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n",
        ),
        (
            "templates/hook.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-smoke\n  annotations:\n\
             \x20   helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-delete-policy: hook-succeeded\n\
             spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n\
             \x20     - name: smoke\n        image: registry.invalid/smoke:1\n",
        ),
        ("README.md", "# web\n"),
        ("files/app.conf", "listen=8080\n"),
    ];
    for (name, data) in files {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    root
}

/// What a renderer would produce for the chart above, in Helm's manifest format.
fn manifest(release: &str, replicas: i64, greeting: &str) -> String {
    format!(
        "---\n# Source: web/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {release}-config\n\
         data:\n  greeting: \"{greeting}\"\n  app.conf: \"listen=8080\\n\"\n\
         ---\n# Source: web/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {release}\n\
         spec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {release}}}\n  template:\n    metadata:\n\
         \x20     labels: {{app: {release}}}\n    spec:\n      containers:\n      - name: web\n\
         \x20       image: \"registry.invalid/web:1\"\n"
    )
}

fn hook(release: &str) -> Hook {
    let now = Timestamp::now();
    Hook {
        name: format!("{release}-smoke"),
        kind: "Job".into(),
        path: "web/templates/hook.yaml".into(),
        manifest: format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {release}-smoke\n  annotations:\n\
             \x20   helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-delete-policy: hook-succeeded\n\
             spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n\
             \x20     - name: smoke\n        image: registry.invalid/smoke:1\n"
        ),
        events: vec!["post-install".into(), "post-upgrade".into()],
        last_run: HookExecution {
            started_at: Some(now),
            completed_at: Some(now),
            phase: HookPhase::Succeeded,
        },
        weight: 0,
        delete_policies: vec!["hook-succeeded".into()],
    }
}

fn object(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[allow(clippy::too_many_arguments)]
fn release(
    name: &str,
    namespace: &str,
    version: i32,
    chart: &Chart,
    status: Status,
    description: &str,
    config: Value,
    manifest: String,
) -> Release {
    let now = Timestamp::now();
    Release {
        name: name.into(),
        namespace: namespace.into(),
        version,
        info: Some(Info {
            first_deployed: Some(now),
            last_deployed: Some(now),
            deleted: None,
            description: description.into(),
            status,
            ..Info::default()
        }),
        chart: Some(chart.clone()),
        config: object(config),
        manifest,
        hooks: vec![hook(name)],
        apply_method: Some("ssa".into()),
        labels: BTreeMap::from([(OWNER_LABEL.to_string(), "test-engine".to_string())]),
        managers: Vec::new(),
    }
}

/// Runs the helm CLI against the test cluster (arguments, no shell) with its own empty
/// config and cache, and returns stdout; fails the test with stderr otherwise.
async fn helm(namespace: &str, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(testbin().join("helm"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(["-n", namespace])
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .await
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

async fn helm_json(namespace: &str, args: &[&str]) -> Value {
    let out = helm(namespace, args).await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("helm {args:?} printed {out:?}: {e}"))
}

fn status(r: &Release) -> Status {
    r.info.as_ref().unwrap().status
}

fn description(r: &Release) -> &str {
    &r.info.as_ref().unwrap().description
}

/// Engine-style upgrade: new revision pending, previous superseded, new deployed.
async fn upgrade(storage: &Storage, previous: &mut Release, mut next: Release) -> Release {
    next.info.as_mut().unwrap().status = Status::PendingUpgrade;
    next.info.as_mut().unwrap().description = "Preparing upgrade".into();
    storage.create(&next).await.unwrap();
    let info = previous.info.as_mut().unwrap();
    info.status = Status::Superseded;
    storage.update(previous).await.unwrap();
    next.info.as_mut().unwrap().status = Status::Deployed;
    next.info.as_mut().unwrap().description = "Upgrade complete".into();
    storage.update(&next).await.unwrap();
    next
}

#[tokio::test]
async fn helm_reads_revisions_wheelhouse_wrote() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-helm-reads").await;
    let dir = tempfile::tempdir().unwrap();
    let chart = chart::load(&write_chart(dir.path())).unwrap();
    let storage = Storage::new(client.clone(), &ns.name);

    let mut rev1 = release(
        "shop",
        &ns.name,
        1,
        &chart,
        Status::Deployed,
        "Install complete",
        json!({"greeting": "hi"}),
        manifest("shop", 1, "hi"),
    );
    storage.create(&rev1).await.unwrap();
    let config2 = json!({"greeting": "hey", "replicas": 3, "image": {"tag": "2"}});
    let manifest2 = manifest("shop", 3, "hey");
    let rev2 = release(
        "shop",
        &ns.name,
        2,
        &chart,
        Status::Deployed,
        "",
        config2.clone(),
        manifest2.clone(),
    );
    let rev2 = upgrade(&storage, &mut rev1, rev2).await;

    // The Secrets are Helm's, with the engine's label alongside Helm's own.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let s = secrets.get("sh.helm.release.v1.shop.v2").await.unwrap();
    assert_eq!(s.type_.as_deref(), Some("helm.sh/release.v1"));
    let labels = s.metadata.labels.unwrap();
    for (k, v) in [
        ("name", "shop"),
        ("owner", "helm"),
        ("status", "deployed"),
        ("version", "2"),
        (OWNER_LABEL, "test-engine"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
    }
    assert!(labels["createdAt"].parse::<i64>().is_ok());
    assert!(labels["modifiedAt"].parse::<i64>().is_ok());

    let list = helm_json(&ns.name, &["list", "-o", "json"]).await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["name"], "shop");
    assert_eq!(list[0]["namespace"], ns.name.as_str());
    assert_eq!(list[0]["revision"], "2");
    assert_eq!(list[0]["status"], "deployed");
    assert_eq!(list[0]["chart"], "web-1.2.3");
    assert_eq!(list[0]["app_version"], "2.0.1");

    let history = helm_json(&ns.name, &["history", "shop", "-o", "json"]).await;
    let history: Vec<(i64, &str, &str, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["revision"].as_i64().unwrap(),
                h["status"].as_str().unwrap(),
                h["chart"].as_str().unwrap(),
                h["description"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            (1, "superseded", "web-1.2.3", "Install complete"),
            (2, "deployed", "web-1.2.3", "Upgrade complete")
        ]
    );

    let values = helm_json(&ns.name, &["get", "values", "shop", "-o", "json"]).await;
    assert_eq!(values, config2);
    let values1 = helm_json(
        &ns.name,
        &["get", "values", "shop", "--revision", "1", "-o", "json"],
    )
    .await;
    assert_eq!(values1, json!({"greeting": "hi"}));
    let all = helm_json(&ns.name, &["get", "values", "shop", "--all", "-o", "json"]).await;
    assert_eq!(
        all,
        json!({"replicas": 3, "greeting": "hey",
               "image": {"repository": "registry.invalid/web", "tag": "2"}})
    );

    let got = helm(&ns.name, &["get", "manifest", "shop"]).await;
    assert_eq!(got.trim_end(), manifest2.trim_end());

    let hooks = helm(&ns.name, &["get", "hooks", "shop"]).await;
    let h = &rev2.hooks[0];
    assert!(
        hooks.contains(&format!("# Source: {}\n{}", h.path, h.manifest)),
        "{hooks}"
    );

    let status_out = helm_json(&ns.name, &["status", "shop", "-o", "json"]).await;
    assert_eq!(status_out["version"], 2);
    assert_eq!(status_out["info"]["status"], "deployed");
    assert_eq!(status_out["info"]["description"], "Upgrade complete");
    assert_eq!(status_out["config"], config2);

    ns.delete().await;
}

#[tokio::test]
async fn wheelhouse_continues_a_helm_history_and_helm_rolls_back_it() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-adopt").await;
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = write_chart(dir.path());
    let chart_path = chart_dir.to_str().unwrap();
    helm(
        &ns.name,
        &["install", "cart", chart_path, "--set", "greeting=bonjour"],
    )
    .await;
    let storage = Storage::new(client.clone(), &ns.name);

    // The record helm wrote reads back field by field.
    let history = storage.history("cart").await.unwrap();
    assert_eq!(history.len(), 1);
    let mut rev1 = history.into_iter().next().unwrap();
    assert_eq!(rev1.name, "cart");
    assert_eq!(rev1.namespace, ns.name);
    assert_eq!(rev1.version, 1);
    assert_eq!(status(&rev1), Status::Deployed);
    assert_eq!(description(&rev1), "Install complete");
    assert!(rev1.info.as_ref().unwrap().first_deployed.is_some());
    let helm_chart = rev1.chart.clone().unwrap();
    let md = helm_chart.metadata.as_ref().unwrap();
    assert_eq!((md.name.as_str(), md.version.as_str()), ("web", "1.2.3"));
    assert_eq!(md.app_version.as_deref(), Some("2.0.1"));
    // Helm's loader and ours agree on the chart they store.
    let ours = chart::load(&chart_dir).unwrap();
    assert_eq!(helm_chart.metadata, ours.metadata);
    assert_eq!(helm_chart.templates, ours.templates);
    assert_eq!(helm_chart.values, ours.values);
    assert_eq!(helm_chart.files, ours.files);
    assert_eq!(
        Value::Object(rev1.config.clone()),
        json!({"greeting": "bonjour"})
    );
    assert!(
        rev1.manifest
            .contains("# Source: web/templates/configmap.yaml\n"),
        "{}",
        rev1.manifest
    );
    assert!(rev1.manifest.contains("greeting: \"bonjour\""));
    assert_eq!(rev1.hooks.len(), 1);
    assert_eq!(rev1.hooks[0].last_run.phase, HookPhase::Succeeded);
    assert_eq!(rev1.labels.get("owner").map(String::as_str), Some("helm"));
    assert_eq!(storage.last("cart").await.unwrap().as_ref(), Some(&rev1));
    assert_eq!(storage.get("cart", 1).await.unwrap().as_ref(), Some(&rev1));
    assert_eq!(storage.get("cart", 2).await.unwrap(), None);
    // decode() on the raw Secret data gives the same record.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let raw = secrets.get("sh.helm.release.v1.cart.v1").await.unwrap();
    let mut decoded = decode(&raw.data.unwrap()["release"].0).unwrap();
    decoded.labels = rev1.labels.clone();
    // The field managers come from the Secret, not its data: the helm CLI wrote it.
    assert_eq!(rev1.managers, ["Helm"]);
    decoded.managers = rev1.managers.clone();
    assert_eq!(decoded, rev1);

    // wheelhouse writes revision 2 on top of helm's history.
    let mut next = rev1.clone();
    next.version = 2;
    next.config = object(json!({"greeting": "salut", "replicas": 2}));
    next.manifest = manifest("cart", 2, "salut");
    next.labels = BTreeMap::from([(OWNER_LABEL.to_string(), "test-engine".to_string())]);
    let info = next.info.as_mut().unwrap();
    info.last_deployed = Some(Timestamp::now());
    let rev2 = upgrade(&storage, &mut rev1, next).await;
    let err = storage.create(&rev2).await.unwrap_err();
    assert!(
        matches!(err, wheelhouse::helm::release::Error::Exists { ref name, version: 2 } if name == "cart"),
        "{err}"
    );
    let stored1 = storage.get("cart", 1).await.unwrap().unwrap();
    assert_eq!(status(&stored1), Status::Superseded);

    let history = helm_json(&ns.name, &["history", "cart", "-o", "json"]).await;
    let statuses: Vec<(i64, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["revision"].as_i64().unwrap(),
                h["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, [(1, "superseded"), (2, "deployed")]);

    // helm rolls back over wheelhouse's revision and writes revision 3.
    helm(&ns.name, &["rollback", "cart", "1"]).await;
    let history = storage.history("cart").await.unwrap();
    let versions: Vec<(i32, Status)> = history.iter().map(|r| (r.version, status(r))).collect();
    assert_eq!(
        versions,
        [
            (1, Status::Superseded),
            (2, Status::Superseded),
            (3, Status::Deployed)
        ]
    );
    let rev3 = storage.last("cart").await.unwrap().unwrap();
    assert_eq!(description(&rev3), "Rollback to 1");
    assert_eq!(rev3.config, rev1.config);
    assert_eq!(rev3.manifest, rev1.manifest);
    assert_eq!(rev3.chart, rev1.chart);
    // The rollback applied revision 1's objects.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = cms.get("cart-config").await.unwrap();
    assert_eq!(cm.data.unwrap()["greeting"], "bonjour");

    ns.delete().await;
}

#[tokio::test]
async fn prune_keeps_the_newest_and_the_last_deployed() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-prune").await;
    let dir = tempfile::tempdir().unwrap();
    let chart = chart::load(&write_chart(dir.path())).unwrap();
    let storage = Storage::new(client.clone(), &ns.name);

    let statuses = [
        Status::Superseded,
        Status::Deployed,
        Status::Failed,
        Status::Failed,
        Status::Failed,
        Status::Failed,
    ];
    for (i, s) in statuses.iter().enumerate() {
        let r = release(
            "api",
            &ns.name,
            i as i32 + 1,
            &chart,
            *s,
            "test",
            json!({}),
            manifest("api", 1, "hi"),
        );
        storage.create(&r).await.unwrap();
    }
    assert_eq!(storage.prune("api", 0).await.unwrap(), Vec::<i32>::new());
    assert_eq!(storage.prune("api", 6).await.unwrap(), Vec::<i32>::new());
    assert_eq!(storage.prune("api", 3).await.unwrap(), [1, 3, 4]);
    let left: Vec<i32> = storage
        .history("api")
        .await
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(left, [2, 5, 6]);
    assert_eq!(storage.prune("api", 1).await.unwrap(), [5, 6]);
    let history = helm_json(&ns.name, &["history", "api", "-o", "json"]).await;
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert_eq!(history[0]["revision"], 2);
    assert_eq!(history[0]["status"], "deployed");

    ns.delete().await;
}

#[tokio::test]
async fn list_names_get_update_and_delete() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-names").await;
    let dir = tempfile::tempdir().unwrap();
    let chart = chart::load(&write_chart(dir.path())).unwrap();
    let storage = Storage::new(client.clone(), &ns.name);
    assert_eq!(storage.list_names().await.unwrap(), Vec::<String>::new());
    assert_eq!(storage.last("none").await.unwrap(), None);
    assert!(storage.history("none").await.unwrap().is_empty());

    for (name, version) in [("b", 1), ("a", 1), ("a", 2)] {
        let r = release(
            name,
            &ns.name,
            version,
            &chart,
            Status::Deployed,
            "test",
            json!({}),
            manifest(name, 1, "hi"),
        );
        storage.create(&r).await.unwrap();
    }
    // A Secret that is not a Helm record is not a release.
    other_secret(&client, &ns.name).await;
    assert_eq!(storage.list_names().await.unwrap(), ["a", "b"]);
    // A corrupt record is skipped by history, as helm skips it, and named by get.
    corrupt_record(&client, &ns.name, "a", 7).await;
    let versions: Vec<i32> = storage
        .history("a")
        .await
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(versions, [1, 2]);
    let err = storage.get("a", 7).await.unwrap_err().to_string();
    assert!(err.contains("sh.helm.release.v1.a.v7"), "{err}");
    storage.delete("a", 7).await.unwrap();

    // Labels on read mirror the Secret's, including extra ones.
    let mut a2 = storage.get("a", 2).await.unwrap().unwrap();
    assert_eq!(a2.labels[OWNER_LABEL], "test-engine");
    assert_eq!(a2.labels["status"], "deployed");
    let created = a2.labels["createdAt"].clone();

    // An update rewrites status and labels; extra labels can be dropped, Helm's cannot be
    // overridden, createdAt stays.
    a2.info.as_mut().unwrap().status = Status::Failed;
    a2.info.as_mut().unwrap().description = "Upgrade \"a\" failed: boom".into();
    a2.labels.remove(OWNER_LABEL);
    a2.labels.insert("owner".into(), "not-helm".into());
    storage.update(&a2).await.unwrap();
    let again = storage.get("a", 2).await.unwrap().unwrap();
    assert_eq!(status(&again), Status::Failed);
    assert_eq!(description(&again), "Upgrade \"a\" failed: boom");
    assert_eq!(again.labels["status"], "failed");
    assert_eq!(again.labels["owner"], "helm");
    assert_eq!(again.labels["createdAt"], created);
    assert!(again.labels.contains_key("modifiedAt"));
    assert!(!again.labels.contains_key(OWNER_LABEL));

    let mut missing = again.clone();
    missing.version = 9;
    assert!(matches!(
        storage.update(&missing).await,
        Err(wheelhouse::helm::release::Error::NotFound { version: 9, .. })
    ));
    storage.delete("b", 1).await.unwrap();
    assert!(matches!(
        storage.delete("b", 1).await,
        Err(wheelhouse::helm::release::Error::NotFound { .. })
    ));
    assert_eq!(storage.list_names().await.unwrap(), ["a"]);
    assert_eq!(storage::secret_name("a", 2), "sh.helm.release.v1.a.v2");

    ns.delete().await;
}

async fn other_secret(client: &Client, namespace: &str) {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "unrelated", "labels": {"name": "zzz"}},
        "stringData": {"k": "v"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &s).await.unwrap();
}

async fn corrupt_record(client: &Client, namespace: &str, name: &str, version: i32) {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let s: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": storage::secret_name(name, version),
            "labels": {"name": name, "owner": "helm", "status": "deployed", "version": version.to_string()}
        },
        "type": "helm.sh/release.v1",
        "stringData": {"release": "H4sI-not-a-release"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &s).await.unwrap();
}

/// The chart wheelhouse loads is the chart helm stores: same metadata, templates, values
/// and files, from the directory (with .helmignore) and from `helm package`'s archive.
#[tokio::test]
async fn loader_agrees_with_helm_on_directories_and_packages() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-loader").await;
    let dir = tempfile::tempdir().unwrap();
    let root = write_chart(dir.path());
    for (name, data) in [
        (".helmignore", "# editor and CI leftovers\n*.bak\nci/\n"),
        ("values.schema.json", "{\"type\": \"object\"}\n"),
        (
            "crds/widget.yaml",
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n",
        ),
        ("files/old.bak", "ignored\n"),
        ("ci/values.yaml", "ignored: true\n"),
        (
            "templates/NOTES.txt",
            "Thanks for installing {{ .Release.Name }}.\n",
        ),
        (
            "templates/_helpers.tpl",
            "{{- define \"web.name\" -}}web{{- end -}}\n",
        ),
    ] {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    // The CRD is not installed into this namespace-scoped test: skip it at install.
    helm(
        &ns.name,
        &["install", "ldr", root.to_str().unwrap(), "--skip-crds"],
    )
    .await;
    let out = dir.path().join("out");
    helm(
        &ns.name,
        &[
            "package",
            root.to_str().unwrap(),
            "-d",
            out.to_str().unwrap(),
        ],
    )
    .await;

    let stored = Storage::new(client.clone(), &ns.name)
        .get("ldr", 1)
        .await
        .unwrap()
        .unwrap()
        .chart
        .unwrap();
    let names = |c: &Chart| c.files.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&stored),
        [
            ".helmignore",
            "README.md",
            "crds/widget.yaml",
            "files/app.conf"
        ]
    );
    for ours in [
        chart::load(&root).unwrap(),
        chart::load(&out.join("web-1.2.3.tgz")).unwrap(),
    ] {
        assert_eq!(ours.metadata, stored.metadata);
        assert_eq!(ours.templates, stored.templates);
        assert_eq!(ours.values, stored.values);
        assert_eq!(ours.schema, stored.schema);
        assert_eq!(ours.files, stored.files);
        assert_eq!(
            chart::crds(&ours)
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>(),
            ["crds/widget.yaml"]
        );
    }
    ns.delete().await;
}

/// The dashboard reads a helm CLI release's record whole (for its chart) only once its
/// first screen is whole (`Inventory::start_reading_after`); until then the release shows
/// what the record's labels say. At 5,000 such releases the reads held the table's own
/// lists back.
#[tokio::test]
async fn the_inventory_reads_records_whole_only_once_let() {
    use wheelhouse::cluster::client::Scope;
    use wheelhouse::engine::ReleaseKey;
    use wheelhouse::frontend::inventory::Others;

    let client = client().await;
    let ns = TestNamespace::new(&client, "storage-reads-after").await;
    let dir = tempfile::tempdir().unwrap();
    let chart = chart::load(&write_chart(dir.path())).unwrap();
    let storage = Storage::new(client.clone(), &ns.name);
    let mut record = release(
        "cli",
        &ns.name,
        1,
        &chart,
        Status::Deployed,
        "Install complete",
        json!({}),
        manifest("cli", 1, "hi"),
    );
    // As the helm CLI writes it: no label of ours.
    record.labels.clear();
    storage.create(&record).await.unwrap();

    let scope = Scope::Namespace(ns.name.clone());
    let (gate, after) = tokio::sync::watch::channel(false);
    let held = wheelhouse::frontend::inventory::Inventory::start_reading_after(
        client.clone(),
        &scope,
        Some(after),
    );
    let free = wheelhouse::frontend::inventory::Inventory::start(client.clone(), &scope);
    let key = ReleaseKey::new(ns.name.clone(), "cli".to_owned());
    let read = |o: &Others| o.helm.get(&key).is_some_and(|s| s.chart == "web");
    // The positive sign: an inventory without a gate, started at the same moment, has
    // listed the record and read it whole.
    inventory_until(&free, &read, "the ungated inventory never read the record").await;
    inventory_until(
        &held,
        &|o: &Others| o.helm_listed && o.helm.contains_key(&key),
        "the gated inventory never listed the record",
    )
    .await;
    let shown = held.subscribe().borrow().helm.get(&key).cloned().unwrap();
    assert_eq!(
        (shown.revision, shown.status, shown.chart.as_str()),
        (1, Status::Deployed, ""),
        "before its gate opens the release shows what the labels say, unread"
    );
    gate.send_replace(true);
    inventory_until(
        &held,
        &read,
        "the record was never read once the gate opened",
    )
    .await;

    ns.delete().await;
}

async fn inventory_until(
    inventory: &wheelhouse::frontend::inventory::Inventory,
    what: &dyn Fn(&wheelhouse::frontend::inventory::Others) -> bool,
    said: &str,
) {
    let mut others = inventory.subscribe();
    let seen = tokio::time::timeout(support::PATIENCE, others.wait_for(|o| what(o)))
        .await
        .is_ok_and(|r| r.is_ok());
    assert!(seen, "{said}: {:?}", others.borrow().helm);
}
