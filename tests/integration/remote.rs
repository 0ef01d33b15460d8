//! `spec.kubeConfig`: a release deployed to a second control plane (tests/test.sh starts a
//! bare one beside the main cluster) through the kubeconfig a Secret of the HelmRelease's
//! namespace holds. Its objects, Helm's records (read back with the real helm CLI there),
//! health and drift are on that cluster; the HelmRelease and its status stay here, and
//! nothing of it is written to this cluster. A kubeconfig the engine must not act with
//! (files of the engine's machine, exec, a missing Secret) stops that release alone, with
//! the reason in its status.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::engine::{
    delete_and_await_uninstall, helm_history_on, is, set_values, setup, upgraded_to, wait_for,
    webapp,
};
use support::{
    PATIENCE, RemoteNamespace, kubeconfig_secret, remote_client, remote_kubeconfig_path,
};

/// Helm's records of `ns` on `client`'s cluster.
async fn records(client: &Client, ns: &str) -> Vec<String> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .list_metadata(&ListParams::default().labels("owner=helm"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect()
}

#[tokio::test]
async fn a_release_on_a_remote_cluster_is_installed_upgraded_and_uninstalled_there() {
    let (client, ns, api) = setup("remote").await;
    let remote = remote_client().await;
    let there = RemoteNamespace::new(remote.clone(), &ns.name).await;
    let text = std::fs::read_to_string(remote_kubeconfig_path()).unwrap();
    kubeconfig_secret(&client, &ns.name, "prod", "value.yaml", &text).await;
    let _engine = support::engine::start(&client, &ns.name).await;

    // The default keys: `value`, else `value.yaml` (here).
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            json!({"kubeConfig": {"secretRef": {"name": "prod"}}, "values": {"message": "remote 1"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed on the remote cluster", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let kubeconfig = remote_kubeconfig_path();
    assert_eq!(
        helm_history_on(&kubeconfig, &ns.name, "web"),
        [(1, "deployed".to_owned(), "Install complete".to_owned())]
    );
    // Ready means the remote Deployment's pods are (remote kube-controller-manager, kwok).
    let deployment = Api::<Deployment>::namespaced(remote.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    assert_eq!(deployment.status.unwrap().ready_replicas, Some(2));
    let config = Api::<ConfigMap>::namespaced(remote.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(config.data.unwrap()["MESSAGE"], "remote 1");

    // `lookup` reads the remote cluster: a Secret of the same name on each cluster, and
    // the rendered ConfigMap quotes the remote one's.
    for (cluster, password) in [(&client, "here"), (&remote, "there")] {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "db-pass"}, "stringData": {"password": password},
        }))
        .unwrap();
        Api::<Secret>::namespaced(cluster.clone(), &ns.name)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    api.create(
        &PostParams::default(),
        &support::engine::release(
            "reach",
            "tenant-reach",
            json!({"kubeConfig": {"secretRef": {"name": "prod"}}, "values": {"victim": ns.name}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "reach", "installed there", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let reached = Api::<ConfigMap>::namespaced(remote.clone(), &ns.name)
        .get("reach-reach")
        .await
        .unwrap();
    assert_eq!(reached.data.unwrap()["leaked"], "there");
    delete_and_await_uninstall(&client, &ns.name, "reach").await;

    // An upgrade: the remote history goes on.
    set_values(&api, "web", json!({"message": "remote 2"})).await;
    wait_for(&api, "web", "revision 2 on the remote cluster", |h| {
        upgraded_to(h, 2)
    })
    .await;
    assert_eq!(
        helm_history_on(&kubeconfig, &ns.name, "web"),
        [
            (1, "superseded".to_owned(), "Install complete".to_owned()),
            (2, "deployed".to_owned(), "Upgrade complete".to_owned()),
        ]
    );

    // Drift is judged there: a scaled remote Deployment is found and corrected.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"driftDetection": {"mode": "enabled"}}})),
    )
    .await
    .unwrap();
    Api::<Deployment>::namespaced(remote.clone(), &ns.name)
        .patch(
            "web",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 5}}),
            ),
        )
        .await
        .unwrap();
    support::engine::annotate(
        &api,
        "web",
        wheelhouse::api::annotations::RECONCILE_REQUESTED_AT,
        "drift",
    )
    .await;
    let deployments = Api::<Deployment>::namespaced(remote.clone(), &ns.name);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let replicas = deployments.get("web").await.unwrap().spec.unwrap().replicas;
        if replicas == Some(2) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the remote drift was not corrected: replicas {replicas:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Nothing of the release is on this cluster: no record, no object of its chart.
    assert!(records(&client, &ns.name).await.is_empty());
    assert!(
        Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
            .get_opt("web-config")
            .await
            .unwrap()
            .is_none()
    );

    // Deleting the HelmRelease uninstalls it there.
    delete_and_await_uninstall(&client, &ns.name, "web").await;
    assert!(helm_history_on(&kubeconfig, &ns.name, "web").is_empty());
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    drop(there);
    ns.delete().await;
}

/// The dashboard's detail of a remote release: its records, workloads and pods read in the
/// fleet context whose server its kubeconfig names, with the operator's client there; with
/// no such context, where it lives and how to reach it, and nothing read here.
#[tokio::test]
async fn the_dashboard_reads_a_remote_release_in_the_context_its_kubeconfig_names() {
    use wheelhouse::frontend::tui::io::{DetailTarget, Reachable, load_detail};
    use wheelhouse::frontend::tui::view_model::Fetch;
    let (client, ns, api) = setup("remote-detail").await;
    let remote = remote_client().await;
    let there = RemoteNamespace::new(remote.clone(), &ns.name).await;
    let text = std::fs::read_to_string(remote_kubeconfig_path()).unwrap();
    kubeconfig_secret(&client, &ns.name, "prod", "value", &text).await;
    let _engine = support::engine::start(&client, &ns.name).await;
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            json!({"kubeConfig": {"secretRef": {"name": "prod"}}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed on the remote cluster", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let hr = api.get("web").await.unwrap();
    let target = DetailTarget::of_wheelhouse(&hr);

    // The fleet's contexts as the dashboard knows them: the remote one by the server its
    // kubeconfig names (the file's, not the Secret's).
    let servers = wheelhouse::cluster::fleet::servers(Some(&remote_kubeconfig_path()));
    let (context, server) = servers
        .first()
        .cloned()
        .expect("a context in the remote kubeconfig");
    let fleet = vec![Reachable {
        cluster: Some(context.as_str().into()),
        context: context.clone(),
        server,
        client: remote.clone(),
    }];
    let data = load_detail(client.clone(), target.clone(), fleet).await;
    let read_in = data.read_in.as_ref().expect("read in the remote context");
    assert_eq!(read_in.context, context);
    assert_eq!(read_in.cluster.as_deref(), Some(context.as_str()));
    assert_eq!(read_in.via, format!("kubeConfig Secret {}/prod", ns.name));
    let Fetch::Loaded(helm) = &data.helm else {
        panic!("no records read there: {:?}", data.helm)
    };
    assert_eq!((helm.revision, helm.status.as_str()), (1, "deployed"));
    let Fetch::Loaded(workloads) = &data.workloads else {
        panic!("no workloads read there: {:?}", data.workloads)
    };
    let web = workloads
        .iter()
        .find(|w| w.object == "Deployment/web")
        .unwrap_or_else(|| panic!("no Deployment/web among {workloads:?}"));
    // The remote Deployment's counts (this cluster has no Deployment web at all).
    assert_eq!((web.desired, web.ready), (2, 2));
    assert!(
        Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
    );
    // The HelmRelease's Events are this cluster's.
    assert!(matches!(&data.events, Fetch::Loaded(events) if !events.is_empty()));

    // Not one of the dashboard's contexts: said, with the server, and nothing read.
    let data = load_detail(client.clone(), target, Vec::new()).await;
    assert_eq!(data.read_in, None);
    let Fetch::Failed(why) = &data.workloads else {
        panic!("workloads read without their cluster: {:?}", data.workloads)
    };
    assert!(
        why.contains("none of this dashboard's contexts") && why.contains("https://"),
        "{why}"
    );
    assert!(matches!(data.helm, Fetch::Failed(_)));

    delete_and_await_uninstall(&client, &ns.name, "web").await;
    drop(there);
    ns.delete().await;
}

#[tokio::test]
async fn a_kubeconfig_the_engine_must_not_act_with_stops_that_release_alone() {
    let (client, ns, api) = setup("remote-refused").await;
    let remote = remote_client().await;
    let there = RemoteNamespace::new(remote.clone(), &ns.name).await;
    let text = std::fs::read_to_string(remote_kubeconfig_path()).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_owned();
    // The engine's own ServiceAccount token, by path: what a tenant must never borrow.
    let token_file = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\nclusters: [{{name: k, cluster: {{server: \"{server}\", insecure-skip-tls-verify: false}}}}]\nusers: [{{name: u, user: {{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}}}]\n"
    );
    let exec = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\nclusters: [{{name: k, cluster: {{server: \"{server}\"}}}}]\nusers: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'touch /tmp/wheelhouse-exec-ran']}}}}}}]\n"
    );
    kubeconfig_secret(&client, &ns.name, "files", "value", &token_file).await;
    kubeconfig_secret(&client, &ns.name, "exec", "value", &exec).await;
    kubeconfig_secret(&client, &ns.name, "good", "config", &text).await;
    let _engine = support::engine::start(&client, &ns.name).await;

    let cases = [
        (
            "by-file",
            json!({"secretRef": {"name": "files"}}),
            "tokenFile names a file of the engine's machine",
        ),
        (
            "by-exec",
            json!({"secretRef": {"name": "exec"}}),
            "--insecure-kubeconfig-exec",
        ),
        (
            "no-secret",
            json!({"secretRef": {"name": "absent"}}),
            "cannot read the kubeConfig Secret",
        ),
        (
            "wrong-key",
            json!({"secretRef": {"name": "good"}}),
            "has neither a \"value\" nor a \"value.yaml\" key",
        ),
    ];
    for (name, kc, _) in &cases {
        api.create(
            &PostParams::default(),
            &webapp(name, json!({"kubeConfig": kc})),
        )
        .await
        .unwrap();
    }
    // Beside them, the same Secret with its key named, and a release of this cluster.
    api.create(
        &PostParams::default(),
        &webapp(
            "named-key",
            json!({"kubeConfig": {"secretRef": {"name": "good", "key": "config"}}}),
        ),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &webapp("local", json!({})))
        .await
        .unwrap();

    for (name, _, says) in &cases {
        let hr = wait_for(&api, name, "refused with the reason", |h| {
            h.condition("Ready")
                .is_some_and(|c| c.status == "False" && c.message.contains(says))
        })
        .await;
        assert!(
            !hr.condition("Ready").unwrap().message.contains("BEGIN"),
            "nothing of the Secret is quoted"
        );
    }
    wait_for(&api, "named-key", "installed there", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    wait_for(&api, "local", "installed here", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    // The refused ones wrote nothing anywhere; the exec plugin never ran.
    let remote_records = records(&remote, &ns.name).await;
    assert_eq!(remote_records, ["sh.helm.release.v1.named-key.v1"]);
    assert_eq!(
        records(&client, &ns.name).await,
        ["sh.helm.release.v1.local.v1"]
    );
    assert!(!std::path::Path::new("/tmp/wheelhouse-exec-ran").exists());

    for name in ["named-key", "local"] {
        delete_and_await_uninstall(&client, &ns.name, name).await;
    }
    let _ = api;
    drop(there);
    ns.delete().await;
}

/// `serviceAccountName` is impersonated on the remote cluster (as helm-controller does):
/// there the account may write its namespace only, so a chart reaching into another
/// namespace is refused by that cluster, named, with nothing stored; a legitimate release
/// installs, and an admission policy there that refuses every other writer shows every
/// write was the account's. Here the account may only read its kubeConfig Secret.
#[tokio::test]
async fn service_account_name_is_impersonated_on_the_remote_cluster() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let (client, ns, api) = setup("remote-tenant").await;
    let remote = remote_client().await;
    let there = RemoteNamespace::new(remote.clone(), &ns.name).await;
    let victim = RemoteNamespace::new(remote.clone(), &format!("{}-victim", ns.name)).await;
    let password = format!("S3cret-{:x}", support::rand_u32());
    let secret: Secret = support::from_yaml(&format!(
        "metadata: {{name: db-pass}}\nstringData: {{password: {password}}}"
    ));
    Api::<Secret>::namespaced(remote.clone(), &victim.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let text = std::fs::read_to_string(remote_kubeconfig_path()).unwrap();
    kubeconfig_secret(&client, &ns.name, "prod", "value", &text).await;
    // A kubeconfig the account may not read here: never read for it with more rights.
    kubeconfig_secret(&client, &ns.name, "not-theirs", "value", &text).await;
    let account = |cluster: &Client, rules: &'static str, role: &'static str| {
        let (cluster, ns) = (cluster.clone(), ns.name.clone());
        async move {
            let sa: ServiceAccount = support::from_yaml("metadata: {name: deployer}");
            Api::<ServiceAccount>::namespaced(cluster.clone(), &ns)
                .create(&PostParams::default(), &sa)
                .await
                .unwrap();
            if !rules.is_empty() {
                let r: Role = support::from_yaml(&format!("metadata: {{name: deployer}}\n{rules}"));
                Api::<Role>::namespaced(cluster.clone(), &ns)
                    .create(&PostParams::default(), &r)
                    .await
                    .unwrap();
            }
            let binding: RoleBinding = support::from_yaml(&format!(
                "metadata: {{name: deployer}}\n\
                 roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role}}}\n\
                 subjects: [{{kind: ServiceAccount, name: deployer, namespace: {ns}}}]"
            ));
            Api::<RoleBinding>::namespaced(cluster, &ns)
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
    };
    // Here: reading its kubeConfig Secret, nothing else.
    account(
        &client,
        "rules: [{apiGroups: [\"\"], resources: [secrets], resourceNames: [prod], verbs: [get]}]",
        "Role, name: deployer",
    )
    .await;
    // There: admin of its namespace.
    account(&remote, "", "ClusterRole, name: admin").await;
    let user = format!("system:serviceaccount:{}:deployer", ns.name);
    let only = support::installed::OnlyWriter::create(&remote, &ns.name, &user).await;
    let _engine = support::engine::start(&client, &ns.name).await;

    let spec = |values: serde_json::Value| {
        json!({
            "kubeConfig": {"secretRef": {"name": "prod"}},
            "serviceAccountName": "deployer",
            "values": values,
        })
    };
    api.create(
        &PostParams::default(),
        &support::engine::release(
            "reach",
            "tenant-reach",
            spec(json!({"victim": victim.name})),
        ),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &support::engine::release("legit", "tenant-reach", spec(json!({"message": "v1"}))),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &support::engine::release(
            "borrowed",
            "tenant-reach",
            json!({
                "kubeConfig": {"secretRef": {"name": "not-theirs"}},
                "serviceAccountName": "deployer",
            }),
        ),
    )
    .await
    .unwrap();
    wait_for(
        &api,
        "borrowed",
        "the Secret's read refused, as the account",
        |h| {
            h.condition("Ready").is_some_and(|c| {
                c.status == "False"
                    && c.reason == "Forbidden"
                    && c.message.contains("secrets \"not-theirs\" is forbidden")
                    && c.message.contains(&user)
            })
        },
    )
    .await;
    let refused = wait_for(&api, "reach", "the lookup refused there, named", |h| {
        h.condition("Ready").is_some_and(|c| {
            c.status == "False" && c.message.contains("forbidden") && c.message.contains(&user)
        })
    })
    .await;
    let message = refused.condition("Ready").unwrap().message.clone();
    assert!(message.contains(&victim.name), "{message}");
    assert!(!message.contains(&password), "{message}");
    wait_for(&api, "legit", "installed there as the account", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    assert_eq!(
        records(&remote, &ns.name).await,
        ["sh.helm.release.v1.legit.v1"],
        "the refused releases stored nothing"
    );
    assert!(records(&client, &ns.name).await.is_empty());
    assert!(
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(remote.clone(), &victim.name)
            .get_opt("reach-takeover")
            .await
            .unwrap()
            .is_none()
    );
    support::engine::delete_and_await_uninstall(&client, &ns.name, "legit").await;
    assert!(
        records(&remote, &ns.name).await.is_empty(),
        "uninstalled as the account"
    );
    only.delete(&remote).await;
    drop((there, victim));
    ns.delete().await;
}
