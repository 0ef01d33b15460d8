//! Tenant isolation, second pass (docs/operations/multi-tenancy.md, "Threat model"): what
//! the engine keeps and reaches for one release never serves another. Each test runs the
//! controller as `wheelhouse install` deploys it (its ServiceAccount's token, its grant,
//! the lockdown's flags), and each failed on the code before this pass:
//! - a Git commit or an OCI layer digest is no capability (caches keyed by source);
//! - a `dependsOn[].readyExpr` reads as the release, so RBAC decides, and is no oracle;
//! - tenants' sources reach neither loopback nor the cluster's own ranges, and no answer
//!   of a server is ever quoted;
//! - receivers wake only their resources, each release once a call, and say nothing;
//! - cluster text prints escaped; values from Secrets are masked by origin, and the
//!   config hash is keyed.

use crate::support;
use crate::tenancy::{
    DEPLOYER, LOOPBACK, controller, controller_with, installed, reach, ready_says, sharded, stored,
    tenant, tenant_charts,
};

use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use support::{PATIENCE, TestNamespace, client, from_yaml};
use wheelhouse::api::HelmRelease;

/// A HelmRelease `name` of the webapp chart with `chart` as its chart block.
fn release_of(name: &str, chart: serde_json::Value, values: serde_json::Value) -> HelmRelease {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": name},
        "spec": {"chart": chart, "interval": "1h", "timeout": "2m", "values": values},
    }))
    .unwrap()
}

async fn secret(admin: &Client, ns: &str, name: &str, data: &[(&str, &[u8])]) {
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
}

/// Nothing of `marker` in `ns`: not in its HelmReleases (status included), ConfigMaps,
/// Events or Helm storage's records of `release`.
async fn nowhere(admin: &Client, ns: &str, release: &str, marker: &str) {
    let hrs = Api::<HelmRelease>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let text = serde_json::to_string(&hrs.items).unwrap();
    assert!(
        !text.contains(marker),
        "{marker} is in a HelmRelease: {text}"
    );
    let cms = Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let text = serde_json::to_string(&cms.items).unwrap();
    assert!(!text.contains(marker), "{marker} is in a ConfigMap: {text}");
    for event in support::engine::events_of(admin, ns, release).await {
        assert!(!event.contains(marker), "{marker} is in an Event: {event}");
    }
    assert!(!stored(ns, release), "{ns}/{release} has Helm records");
}

/// (a) Tenant B installs a chart from a Git server that answers 401 without credentials.
/// Tenant A names B's commit and path, with no credentials, at an address that does not
/// resolve, and then at B's own server: both refused by A's own connection, nothing of B's
/// chart in A's namespace or Helm storage.
#[tokio::test]
async fn a_git_commit_is_no_capability() {
    let admin = client().await;
    let a = tenant(&admin, "iso-git-a").await;
    let b = tenant(&admin, "iso-git-b").await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &a.name, home.path()).await;
    let s = support::git::server();
    let repo = support::git::Repo::new(&s, "private");
    let marker = format!("B-API-KEY-{:08x}", support::rand_u32());
    let commit = repo.commit_chart("main", "charts/private", "1.0.0", "", &marker);
    let ca = std::fs::read(&s.ca).unwrap();
    secret(
        &admin,
        &b.name,
        "git",
        &[
            ("username", s.user.as_bytes()),
            ("password", s.password.as_bytes()),
            ("ca.crt", &ca),
        ],
    )
    .await;
    let at = |url: &str, with_secret: bool| {
        let mut chart = serde_json::json!({"git": {"url": url, "ref": {"commit": commit}, "path": "charts/private"}});
        if with_secret {
            chart["secretRef"] = serde_json::json!({"name": "git"});
        }
        chart
    };
    let values = serde_json::json!({"replicaCount": 1});
    let b_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &b.name);
    let private_url = format!("{}/{}", s.https, repo.name);
    b_api
        .create(
            &PostParams::default(),
            &sharded(
                release_of("b", at(&private_url, true), values.clone()),
                &a.name,
            ),
        )
        .await
        .unwrap();
    controller
        .wait_for(&b_api, "b", "B's private chart installed", |h| {
            ready_says(h).is_some_and(|(s, _)| s == "True")
        })
        .await;

    // A trusts the server's CA (so B's server is reached) and has no credentials.
    secret(&admin, &a.name, "git", &[("ca.crt", &ca)]).await;
    let a_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &a.name);
    for (name, url, says) in [
        (
            "nowhere",
            "https://nonexistent.invalid/x.git",
            "nonexistent.invalid",
        ),
        (
            "borrowed",
            private_url.as_str(),
            "authentication failed (HTTP 401)",
        ),
    ] {
        a_api
            .create(
                &PostParams::default(),
                &sharded(release_of(name, at(url, true), values.clone()), &a.name),
            )
            .await
            .unwrap();
        controller
            .wait_for(&a_api, name, "refused by A's own connection", |h| {
                ready_says(h).is_some_and(|(s, m)| s == "False" && m.contains(says))
            })
            .await;
        nowhere(&admin, &a.name, name, &marker).await;
    }
    controller.stop();
    a.delete().await;
    b.delete().await;
}

/// (b) Tenant B's chart in an authenticated registry is installed (its layer cached); a
/// registry of A's serves a manifest naming B's layer digest, anonymously, and lacks the
/// blob: A's release asks A's registry for it, is refused, and gets nothing of B's.
#[tokio::test]
async fn an_oci_layer_digest_is_no_capability() {
    let admin = client().await;
    let a = tenant(&admin, "iso-oci-a").await;
    let b = tenant(&admin, "iso-oci-b").await;
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &a.name, home.path()).await;
    let r = support::oci::registries();
    let pusher = support::oci::Pusher::new();
    pusher.login(&r);
    let path = format!("iso-{:08x}", support::rand_u32());
    pusher.push(&r.tls, &path, "1.0.0", "", Some(&r.ca));
    let layer = pusher.packaged("1.0.0");
    let config =
        serde_json::json!({"auths": {r.tls.clone(): {"username": r.user, "password": r.password}}});
    let ca = std::fs::read(&r.ca).unwrap();
    secret(
        &admin,
        &b.name,
        "registry",
        &[
            (".dockerconfigjson", config.to_string().as_bytes()),
            ("ca.crt", &ca),
        ],
    )
    .await;
    let b_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &b.name);
    let chart = serde_json::json!({"repository": format!("oci://{}/{path}", r.tls), "name": "webapp",
                                   "version": "1.0.0", "secretRef": {"name": "registry"}});
    b_api
        .create(
            &PostParams::default(),
            &sharded(
                release_of(
                    "b",
                    chart,
                    serde_json::json!({"replicaCount": 1, "message": "B-PRIVATE"}),
                ),
                &a.name,
            ),
        )
        .await
        .unwrap();
    controller
        .wait_for(&b_api, "b", "B's private chart installed", |h| {
            ready_says(h).is_some_and(|(s, _)| s == "True")
        })
        .await;

    let hostile = support::oci::ManifestOnly::start("charts/webapp", "1.0.0", &layer).await;
    let a_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &a.name);
    let chart = serde_json::json!({"repository": format!("oci://{}/charts", hostile.address), "name": "webapp",
                                   "version": "1.0.0", "insecure": true});
    a_api
        .create(
            &PostParams::default(),
            &sharded(
                release_of("a", chart, serde_json::json!({"replicaCount": 1})),
                &a.name,
            ),
        )
        .await
        .unwrap();
    controller
        .wait_for(
            &a_api,
            "a",
            "refused: A's registry has no such layer",
            |h| ready_says(h).is_some_and(|(s, m)| s == "False" && m.contains("not found")),
        )
        .await;
    assert!(
        hostile.blob_requests() > 0,
        "the layer was asked of A's registry"
    );
    nowhere(&admin, &a.name, "a", "B-PRIVATE").await;
    controller.stop();
    a.delete().await;
    b.delete().await;
}

/// (c) A's `readyExpr` over B's HelmRelease is read as A's ServiceAccount, which may not
/// read HelmReleases in B's namespace: refused, naming A's identity, with the same words
/// whatever the expression (no oracle, no value quoted). A dependency in A's own
/// namespace, which its ServiceAccount may read (`admin` there, with the installed
/// aggregated role), still works. Run without --no-cross-namespace-refs, which would
/// refuse the reference before any read.
#[tokio::test]
async fn a_ready_expr_reads_as_its_release_and_is_no_oracle() {
    let admin = client().await;
    let (_charts, charts) = tenant_charts().await;
    let a = tenant(&admin, "iso-cel-a").await;
    let b = tenant(&admin, "iso-cel-b").await;
    let password = format!("hunter2-{:08x}", support::rand_u32());
    let b_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &b.name);
    let mut db = reach(
        &charts,
        "db",
        serde_json::json!({"db": {"password": password}}),
    );
    db.spec.suspend = true;
    b_api.create(&PostParams::default(), &db).await.unwrap();
    let a_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &a.name);
    let mut ok_dep = reach(&charts, "ok-dep", serde_json::json!({"ready": true}));
    ok_dep.spec.suspend = true;
    a_api.create(&PostParams::default(), &ok_dep).await.unwrap();

    let home = tempfile::tempdir().unwrap();
    let flags = [
        "--default-service-account".to_owned(),
        DEPLOYER.to_owned(),
        "--allow-network".to_owned(),
        LOOPBACK.to_owned(),
    ];
    let mut controller = controller_with(&admin, &a.name, home.path(), &flags).await;
    let exprs = [
        ("guess-h", "dep.spec.values.db.password.startsWith('h')"),
        ("guess-x", "dep.spec.values.db.password.startsWith('x')"),
        ("leak", "dep.spec.values[dep.spec.values.db.password] == 1"),
    ];
    for (name, expr) in exprs {
        let mut hr = reach(&charts, name, serde_json::json!({}));
        hr.spec.depends_on = vec![from_yaml(&format!(
            "{{name: db, namespace: {}, readyExpr: \"{expr}\"}}",
            b.name
        ))];
        a_api
            .create(&PostParams::default(), &sharded(hr, &a.name))
            .await
            .unwrap();
    }
    let mut ok = reach(&charts, "reads-its-own", serde_json::json!({}));
    ok.spec.depends_on = vec![from_yaml(
        "{name: ok-dep, readyExpr: 'dep.spec.values.ready == true'}",
    )];
    a_api
        .create(&PostParams::default(), &sharded(ok, &a.name))
        .await
        .unwrap();

    let user = format!("ServiceAccount {}/{DEPLOYER}", a.name);
    let mut said = Vec::new();
    for (name, _) in exprs {
        controller
            .wait_for(
                &a_api,
                name,
                "the dependency refused as A's identity",
                |h| {
                    ready_says(h).is_some_and(|(s, m)| {
                        s == "False" && m.contains(&user) && m.contains("Forbidden")
                    })
                },
            )
            .await;
        let hr = a_api.get(name).await.unwrap();
        assert_eq!(hr.condition("Ready").unwrap().reason, "DependencyNotReady");
        said.push(ready_says(&hr).unwrap().1);
    }
    assert!(
        said.windows(2).all(|w| w[0] == w[1]),
        "the expressions are told apart: {said:?}"
    );
    controller
        .wait_for(
            &a_api,
            "reads-its-own",
            "its own namespace's dependency read and ready",
            |h| ready_says(h).is_some_and(|(s, _)| s == "True"),
        )
        .await;
    nowhere(&admin, &a.name, "leak", &password).await;
    assert!(
        !controller.log().contains(&password),
        "the password is in the log"
    );
    controller.stop();
    a.delete().await;
    b.delete().await;
}

/// (d) Under the lockdown a tenant's repository URL on loopback, on a Service of another
/// namespace and on the link-local metadata address is refused by the outbound policy,
/// with the reason; where the policy allows the address, a server answering SECRET is
/// still never quoted: status and Events say only that the index does not read.
#[tokio::test]
async fn sources_reach_neither_loopback_nor_the_cluster_and_answers_are_never_quoted() {
    // The strict controller's policy is its flags alone: no published one (whose
    // exceptions would stand) while it runs.
    let _unpublished = crate::tenancy::UNPUBLISHED.lock().await;
    let admin = client().await;
    let a = tenant(&admin, "iso-net").await;
    let victim = TestNamespace::new(&admin, "iso-net-victim").await;
    let secret_text = format!("SECRETVALUE-{:08x}", support::rand_u32());
    let server = support::source::RepoServer::start().await;
    server.put("/charts/index.yaml", secret_text.clone().into_bytes());
    let service: Service = from_yaml("metadata: {name: internal}\nspec: {ports: [{port: 80}]}");
    let service = Api::<Service>::namespaced(admin.clone(), &victim.name)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();

    let home = tempfile::tempdir().unwrap();
    let strict = [
        "--default-service-account".to_owned(),
        DEPLOYER.to_owned(),
        "--no-cross-namespace-refs".to_owned(),
    ];
    let mut strict_controller = controller_with(&admin, &a.name, home.path(), &strict).await;
    let api: Api<HelmRelease> = Api::namespaced(admin.clone(), &a.name);
    let repo =
        |url: String| serde_json::json!({"repository": url, "name": "webapp", "version": "1.0.0"});
    for (name, url, why) in [
        ("loopback", server.url("/charts"), "a loopback address"),
        (
            "service",
            format!("http://{cluster_ip}/charts"),
            "in the cluster's own range",
        ),
        (
            "metadata",
            "http://169.254.169.254/latest".to_owned(),
            "link-local",
        ),
    ] {
        api.create(
            &PostParams::default(),
            &sharded(release_of(name, repo(url), serde_json::json!({})), &a.name),
        )
        .await
        .unwrap();
        strict_controller
            .wait_for(&api, name, "refused by the outbound policy", |h| {
                ready_says(h).is_some_and(|(s, m)| {
                    s == "False"
                        && m.contains("refused by the cluster's outbound policy")
                        && m.contains(why)
                })
            })
            .await;
    }
    assert!(
        server.log().is_empty(),
        "a refused address was connected to: {:?}",
        server.log()
    );
    strict_controller.stop();

    // The installed controller allows loopback (as the tests' repositories need): the
    // server is reached, its answer is not an index, and nothing of it is repeated.
    let home = tempfile::tempdir().unwrap();
    let mut controller = controller(&admin, &a.name, home.path()).await;
    api.create(
        &PostParams::default(),
        &sharded(
            release_of(
                "allowed",
                repo(server.url("/charts")),
                serde_json::json!({}),
            ),
            &a.name,
        ),
    )
    .await
    .unwrap();
    controller
        .wait_for(
            &api,
            "allowed",
            "the answer is not an index, and not quoted",
            |h| {
                ready_says(h).is_some_and(|(s, m)| {
                    s == "False" && m.contains("does not read as a Helm repository index")
                })
            },
        )
        .await;
    assert!(!server.log().is_empty(), "the allowed server was asked");
    for name in ["loopback", "service", "metadata", "allowed"] {
        nowhere(&admin, &a.name, name, &secret_text).await;
    }
    controller.stop();
    a.delete().await;
    victim.delete().await;
}

/// Which releases the controller's log says a receiver's call woke, by key.
fn woken(log: &str, key: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("a push to its chart source") && l.contains(key))
        .count()
}

/// A registry notification envelope naming `repository` with `tags` manifest pushes.
fn envelope(registry: &str, repository: &str, tags: usize, salt: &str) -> Vec<u8> {
    let events: Vec<serde_json::Value> = (0..tags)
        .map(|i| {
            serde_json::json!({"id": format!("{salt}-{i}"), "action": "push",
                "target": {"repository": repository, "tag": format!("1.0.{i}"),
                           "mediaType": "application/vnd.oci.image.manifest.v1+json"},
                "request": {"host": registry}})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({ "events": events })).unwrap()
}

/// (e) A receiver's token holder names repositories: a call wakes only the releases in
/// the receiver's resources, each once whatever the number of tags, is answered 202
/// whatever it names, is refused when replayed, and past the rate wakes as routine work.
#[tokio::test]
async fn receivers_wake_only_their_resources_once_and_say_nothing() {
    let admin = client().await;
    let a = tenant(&admin, "iso-rcv-a").await;
    let b = tenant(&admin, "iso-rcv-b").await;
    let installed = installed(&admin).await;
    let r = support::oci::registries();
    let pusher = support::oci::Pusher::new();
    let x = format!("iso-x-{:08x}", support::rand_u32());
    let y = format!("iso-y-{:08x}", support::rand_u32());
    pusher.push(&r.plain, &x, "1.0.0", "", None);
    pusher.push(&r.plain, &y, "1.0.0", "", None);
    let token = format!("rcv-{:08x}", support::rand_u32());
    let name = format!("iso-{:08x}", support::rand_u32());
    let path = support::hooks::receiver_of(
        &admin,
        &installed.system,
        &name,
        "registry",
        &token,
        &format!("[{{kind: HelmRelease, name: '*', namespace: {}}}]", a.name),
    )
    .await;
    let port = support::free_port();
    let home = tempfile::tempdir().unwrap();
    let mut flags = installed.flags.clone();
    flags.extend(["--receiver-addr".to_owned(), format!("127.0.0.1:{port}")]);
    let mut controller = controller_with(&admin, &a.name, home.path(), &flags).await;
    let oci = |repo: &str| serde_json::json!({"repository": format!("oci://{}/{repo}", r.plain), "name": "webapp", "version": "1.x"});
    let values = serde_json::json!({"replicaCount": 1});
    let a_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &a.name);
    let b_api: Api<HelmRelease> = Api::namespaced(admin.clone(), &b.name);
    // (Not `y`: YAML 1.1 reads the chart's unquoted `name: y` as a boolean.)
    for (api, n, repo) in [
        (&a_api, "from-x", &x),
        (&a_api, "from-y", &y),
        (&b_api, "from-x", &x),
    ] {
        api.create(
            &PostParams::default(),
            &sharded(release_of(n, oci(repo), values.clone()), &a.name),
        )
        .await
        .unwrap();
        controller
            .wait_for(api, n, "installed", |h| {
                ready_says(h).is_some_and(|(s, _)| s == "True")
            })
            .await;
    }
    let deadline = Instant::now() + PATIENCE;
    while !controller.log().contains(&format!("{name} (Registry)")) {
        assert!(Instant::now() < deadline, "{}", controller.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bearer = format!("Bearer {token}");
    let call = |body: &[u8]| support::hooks::post(port, &path, &[("Authorization", &bearer)], body);
    let (a_x, a_y, b_x) = (
        format!("{}/from-x", a.name),
        format!("{}/from-y", a.name),
        format!("{}/from-x", b.name),
    );

    // One envelope of 300 tags of repository x: A's x woken once, B's x and A's y not.
    let burst = envelope(&r.plain, &format!("{x}/webapp"), 300, "burst");
    assert_eq!(call(&burst), 202);
    let deadline = Instant::now() + PATIENCE;
    while woken(&controller.log(), &a_x) == 0 {
        assert!(
            Instant::now() < deadline,
            "A's release was not woken:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Replayed: refused, and nothing woken again.
    assert_eq!(call(&burst), 409);
    // A repository no release of the receiver's comes from: the same 202.
    assert_eq!(call(&envelope(&r.plain, "nobody/webapp", 1, "none")), 202);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = controller.log();
    assert_eq!(woken(&log, &a_x), 1, "woken once for one call:\n{log}");
    assert_eq!(
        woken(&log, &b_x),
        0,
        "outside the receiver's resources:\n{log}"
    );
    assert_eq!(woken(&log, &a_y), 0, "another repository's release:\n{log}");

    // Past the rate, calls are still answered, their wakes routine. Sent at once, as a
    // flood comes (one by one they may come slower than the rate refills).
    let bodies: Vec<Vec<u8>> = (0..80)
        .map(|i| envelope(&r.plain, &format!("{x}/webapp"), 1, &format!("rate-{i}")))
        .collect();
    let codes: Vec<u16> = std::thread::scope(|s| {
        let calls: Vec<_> = bodies.iter().map(|b| s.spawn(|| call(b))).collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(codes.iter().all(|c| *c == 202), "{codes:?}");
    let deadline = Instant::now() + PATIENCE;
    while !controller.log().lines().any(|l| {
        l.contains("a push to its chart source")
            && l.contains(&a_x)
            && l.contains("\"urgent\":false")
    }) {
        assert!(
            Instant::now() < deadline,
            "no routine wake:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = controller.log();
    assert!(!log.contains("woke 1 release"), "{log}");
    controller.stop();
    a.delete().await;
    b.delete().await;
}

/// (f) A chart `fail` message and a Helm description holding terminal escape sequences
/// print escaped in `wheelhouse list` and `wheelhouse timeline` (text and markdown).
#[tokio::test]
async fn cluster_text_prints_escaped_in_list_and_timeline() {
    let (client, ns, api) = support::engine::setup("iso-text").await;
    let _engine = support::engine::start(&client, &ns.name).await;
    let hostile = "owned\u{1b}]2;pwned\u{7}\u{1b}[2J";
    api.create(
        &PostParams::default(),
        &support::engine::webapp(
            "web",
            serde_json::json!({"values": {"failMessage": hostile}}),
        ),
    )
    .await
    .unwrap();
    support::engine::wait_for(&api, "web", "failed with the hostile message", |h| {
        ready_says(h).is_some_and(|(s, m)| s == "False" && m.contains("pwned"))
    })
    .await;
    // A helm CLI release whose description carries the same.
    let chart = support::engine::chart("hello");
    let out = std::process::Command::new(support::testbin().join("helm"))
        .args([
            "install",
            "cli",
            &chart,
            "--namespace",
            &ns.name,
            "--description",
            hostile,
        ])
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
            .args(args)
            .args(["--namespace", &ns.name, "--kubeconfig"])
            .arg(support::kubeconfig_path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for (what, text) in [
        ("list", run(&["list"])),
        ("timeline", run(&["timeline", "--since", "1h"])),
        (
            "timeline markdown",
            run(&["timeline", "--since", "1h", "-o", "markdown"]),
        ),
    ] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{what} printed a control character: {text:?}"
        );
        assert!(
            text.contains("owned\\x1b]2;pwned\\x07\\x1b[2J"),
            "{what}: {text}"
        );
    }
    ns.delete().await;
}

/// (g) A value that came from a valuesFrom Secret under a key no credential heuristic
/// knows (`dsn`) is masked in the values the dashboard shows and in the diff of two
/// revisions, by origin; and the config hash on the pod template is keyed: it is the
/// HMAC with the cluster's key, not the plain sha256 of the data.
#[tokio::test]
async fn values_from_secrets_are_masked_by_origin_and_the_config_hash_is_keyed() {
    let (client, ns, api) = support::engine::setup("iso-mask").await;
    let engine = support::engine::start(&client, &ns.name).await;
    let dsn = |pw: &str| format!("postgres://app:{pw}@db:5432/app");
    let (first, second) = (
        format!("pw-{:08x}", support::rand_u32()),
        format!("pw-{:08x}", support::rand_u32()),
    );
    let values = |pw: &str| format!("dsn: {}\nmessage: from-config\n", dsn(pw));
    secret(
        &client,
        &ns.name,
        "db",
        &[("values.yaml", values(&first).as_bytes())],
    )
    .await;
    api.create(
        &PostParams::default(),
        &support::engine::webapp(
            "web",
            serde_json::json!({"valuesFrom": [{"kind": "Secret", "name": "db"}],
                               "values": {"replicaCount": 1}}),
        ),
    )
    .await
    .unwrap();
    support::engine::wait_for(&api, "web", "installed", |h| {
        support::engine::is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let hr = api.get("web").await.unwrap();
    let target = wheelhouse::frontend::tui::io::DetailTarget::of_wheelhouse(&hr);
    let detail =
        wheelhouse::frontend::tui::io::load_detail(client.clone(), target, Vec::new()).await;
    let wheelhouse::frontend::tui::view_model::Fetch::Loaded(helm) = &detail.helm else {
        panic!("no Helm data: {:?}", detail.helm);
    };
    assert!(!helm.values.contains(&first), "{}", helm.values);
    assert!(
        helm.values.contains("dsn: '***'") || helm.values.contains("dsn: \"***\""),
        "{}",
        helm.values
    );
    assert!(
        helm.values.contains("replicaCount: 1"),
        "inline values are shown: {}",
        helm.values
    );

    // A second revision with another password: the diff says it changed, never to what.
    let api_secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    api_secrets
        .patch(
            "db",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"stringData": {"values.yaml": values(&second)}}),
            ),
        )
        .await
        .unwrap();
    // An idle release looks at its valuesFrom at its interval, or when asked.
    support::engine::annotate(
        &api,
        "web",
        wheelhouse::api::annotations::RECONCILE_REQUESTED_AT,
        "after-the-secret-changed",
    )
    .await;
    support::engine::wait_for(&api, "web", "upgraded", |h| {
        support::engine::upgraded_to(h, 2)
    })
    .await;
    let (lines, _) = wheelhouse::frontend::tui::io::load_changes(
        client.clone(),
        engine.handle.clone(),
        wheelhouse::frontend::tui::effect::ChangesOf::Revisions {
            release: wheelhouse::engine::ReleaseKey::new(&ns.name, "web"),
            from: 1,
            to: 2,
            values: Some(wheelhouse::helm::values::ValuesSources::of(
                &api.get("web").await.unwrap(),
            )),
        },
    )
    .await
    .unwrap();
    let text: String = lines.iter().map(|l| l.text() + "\n").collect();
    assert!(!text.contains(&first) && !text.contains(&second), "{text}");
    assert!(text.contains("*** (changed)"), "{text}");

    // The hash: the cluster's key made beside the engine's Lease; the live pod template's
    // hash is the keyed one, not the plain sha256 of the same data.
    let hr = api.get("web").await.unwrap();
    let manifest = support::engine::helm(&ns.name, &["get", "manifest", "web"]);
    let key = wheelhouse::tracking::HashKey::load(&client, &ns.name)
        .await
        .unwrap();
    assert!(
        matches!(key, wheelhouse::tracking::HashKey::Keyed(_)),
        "{key:?}"
    );
    let hash_with = |key: &wheelhouse::tracking::HashKey| {
        let (client, manifest, ns, key) = (
            client.clone(),
            manifest.clone(),
            hr.target_namespace(),
            key.clone(),
        );
        async move {
            let prepared =
                wheelhouse::tracking::prepare_manifest(&client, &manifest, &ns, &key, None)
                    .await
                    .unwrap();
            let docs = wheelhouse::text::yaml::parse_documents(&prepared.applied).unwrap();
            let deployment = docs
                .iter()
                .find(|d| d["kind"] == "Deployment")
                .unwrap()
                .clone();
            wheelhouse::tracking::workload::template_hash(
                wheelhouse::tracking::WorkloadKind::Deployment,
                &deployment,
            )
            .unwrap()
        }
    };
    let keyed = hash_with(&key).await;
    let plain = hash_with(&wheelhouse::tracking::HashKey::Unkeyed).await;
    assert_ne!(keyed, plain);
    let deployments = Api::namespaced(client.clone(), &ns.name);
    let live = support::engine::config_hash(&deployments, "web").await;
    assert_eq!(live.as_deref(), Some(keyed.as_str()));
    drop(engine);
    ns.delete().await;
}
