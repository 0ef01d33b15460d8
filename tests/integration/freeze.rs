//! Incident freeze end to end (docs/user-guide/freeze.md): `wheelhouse freeze` over
//! wheelhouse HelmReleases and Flux HelmReleases (one installed by Flux's real
//! helm-controller) suspends each with its record, a thaw resumes exactly what the freeze
//! suspended, an expired freeze thaws by itself with the engine restarted in between, and
//! a freeze whose caller may not write one release names it and says it is partial.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};
use support::engine::{self as engine_support, webapp};
use support::{PATIENCE, kubeconfig_path};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::FluxHelmRelease;
use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::{
    FREEZE_MANAGER, FROZEN_LABEL, FreezeDone, FreezeRequest, FreezeSelection, ReleaseKey,
};

const BY: &str = "freeze.wheelhouse.dev/by";
const REASON: &str = "freeze.wheelhouse.dev/reason";
const AT: &str = "freeze.wheelhouse.dev/at";
const UNTIL: &str = "freeze.wheelhouse.dev/until";
const BEFORE: &str = "freeze.wheelhouse.dev/suspendedBefore";
const UNTIL_THAWED: &str = "freeze.wheelhouse.dev/untilThawed";
const FLUX_SUSPENDED_BY: &str = "fluxcd.controlplane.io/suspendedBy";

fn api_of(client: &Client, ns: &str, flux: bool) -> Api<DynamicObject> {
    let resource = if flux {
        ApiResource::erase::<FluxHelmRelease>(&())
    } else {
        ApiResource::erase::<HelmRelease>(&())
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// A Flux HelmRelease of the `hello` chart from the HelmRepository `charts`.
async fn flux_release(client: &Client, ns: &str, name: &str, suspend: bool) {
    support::flux::helm_release(
        client,
        ns,
        name,
        &format!(
            "  interval: 1m\n  suspend: {suspend}\n  chart: {{spec: {{chart: hello, version: 0.1.0, sourceRef: {{kind: HelmRepository, name: charts}}}}}}\n"
        ),
    )
    .await;
}

async fn create_wheelhouse(api: &Api<HelmRelease>, name: &str, suspend: bool) {
    api.create(
        &PostParams::default(),
        &webapp(name, json!({"suspend": suspend})),
    )
    .await
    .unwrap();
}

/// Sets `spec.suspend` as another operator would, under their own field manager.
async fn set_suspend(api: &Api<DynamicObject>, name: &str, suspend: bool, manager: &str) {
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(manager.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"spec": {"suspend": suspend}})),
    )
    .await
    .unwrap();
}

fn annotations(obj: &DynamicObject) -> BTreeMap<String, String> {
    obj.metadata.annotations.clone().unwrap_or_default()
}

fn suspended(obj: &DynamicObject) -> bool {
    obj.data["spec"]["suspend"].as_bool() == Some(true)
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

/// `wheelhouse ARGS -o json`, which must succeed: its report, by `kind/name`.
fn report(args: &[&str]) -> (Value, BTreeMap<String, Value>) {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let (ok, out, err) = wheelhouse(&all);
    assert!(ok, "wheelhouse {all:?} failed: {err}\n{out}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let by_release = report["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                ),
                r.clone(),
            )
        })
        .collect();
    (report, by_release)
}

/// Over wheelhouse and Flux HelmReleases (one installed by the real helm-controller):
/// the freeze suspends each with its record (who as the API server says, why, when, until
/// when, whether suspended before), a second freeze renews the record without forgetting
/// what the first knew, and the thaw resumes exactly what the freeze suspended: a release
/// suspended before stays suspended, and so does one suspended again during the freeze
/// by another operator. helm-controller handles the resume (its reconcile request).
#[tokio::test]
async fn a_freeze_suspends_both_kinds_with_the_record_and_the_thaw_resumes_only_what_it_suspended()
{
    let (client, test_ns, whs) = engine_support::setup("freeze-kinds").await;
    let ns = test_ns.name.clone();
    support::flux::require_flux(&client).await;
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/hello");
    let (_repo, url) = support::flux::serve(&hello, "hello", &["0.1.0"]).await;
    support::flux::helm_repository(&client, &ns, "charts", &url).await;
    // Twenty releases of two kinds: w1-w14 and f1-f6, one of each suspended before.
    let more_wheelhouse: Vec<String> = (5..=14).map(|i| format!("w{i}")).collect();
    let more_flux: Vec<String> = (3..=6).map(|i| format!("f{i}")).collect();
    flux_release(&client, &ns, "f1", false).await;
    flux_release(&client, &ns, "f2", true).await;
    for name in &more_flux {
        flux_release(&client, &ns, name, false).await;
    }
    for (name, suspend) in [("w1", false), ("w2", false), ("w3", true), ("w4", false)] {
        create_wheelhouse(&whs, name, suspend).await;
    }
    for name in &more_wheelhouse {
        create_wheelhouse(&whs, name, false).await;
    }
    let extras: Vec<String> = more_wheelhouse
        .iter()
        .map(|n| format!("wheelhouse/{n}"))
        .chain(more_flux.iter().map(|n| format!("flux/{n}")))
        .collect();
    support::flux::until(&client, &ns, "f1", "installed", |hr| {
        support::flux::ready(hr) && support::flux::revision(hr) == 1
    })
    .await;
    let me = wheelhouse::cluster::client::username(&client)
        .await
        .expect("the API server says who the test is");

    let started = Timestamp::now();
    let (freeze, outcome) = report(&[
        "freeze",
        "-n",
        &ns,
        "--for",
        "2h",
        "--reason",
        "INC-57: bad rollout",
    ]);
    assert_eq!(freeze["partial"], false, "{freeze:#}");
    let mut expected: Vec<(&str, bool)> = vec![
        ("wheelhouse/w1", false),
        ("wheelhouse/w2", false),
        ("wheelhouse/w3", true),
        ("wheelhouse/w4", false),
        ("flux/f1", false),
        ("flux/f2", true),
    ];
    expected.extend(extras.iter().map(|r| (r.as_str(), false)));
    assert_eq!(expected.len(), 20);
    assert_eq!(
        freeze["releases"].as_array().map(Vec::len),
        Some(20),
        "{freeze:#}"
    );
    for &(release, before) in &expected {
        let r = &outcome[release];
        assert_eq!(r["result"], "frozen", "{release}: {r}");
        assert_eq!(r["suspendedBefore"], before, "{release}: {r}");
    }
    let wh = api_of(&client, &ns, false);
    let flux = api_of(&client, &ns, true);
    for &(release, before) in &expected {
        let (kind, name) = release.split_once('/').unwrap();
        let obj = api_of(&client, &ns, kind == "flux")
            .get(name)
            .await
            .unwrap();
        let a = annotations(&obj);
        assert!(suspended(&obj), "{release} is not suspended");
        assert_eq!(a[BY], me, "{release}");
        assert_eq!(a[REASON], "INC-57: bad rollout", "{release}");
        assert_eq!(a[BEFORE], before.to_string(), "{release}");
        let at: Timestamp = a[AT].parse().unwrap();
        let until: Timestamp = a[UNTIL].parse().unwrap();
        assert!(
            at >= started.checked_sub(Duration::from_secs(1)).unwrap(),
            "{release}"
        );
        assert_eq!(until.duration_since(at).as_secs(), 7200, "{release}");
        assert_eq!(
            obj.metadata.labels.clone().unwrap_or_default()[FROZEN_LABEL],
            "true"
        );
        // Flux Operator's tools see who suspended it, where the freeze did.
        if kind == "flux" && !before {
            assert_eq!(a[FLUX_SUSPENDED_BY], me, "{release}");
        }
    }

    // Each release says it in its Events too (the audit).
    for (name, what) in [("w1", "suspended"), ("f2", "kept suspended")] {
        let events = engine_support::events_about(&client, &ns, name).await;
        assert!(
            events.iter().any(|e| e.reason.as_deref() == Some("Frozen")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&format!("frozen by {me} until "))
                        && n.contains(what)
                        && n.ends_with("reason: INC-57: bad rollout"))),
            "{name}: {events:?}"
        );
    }

    // `wheelhouse list` marks the frozen releases and says the freeze.
    let (ok, list, err) = wheelhouse(&["list", "-n", &ns]);
    assert!(ok, "{err}");
    assert_eq!(list.matches("true (frozen)").count(), 14, "{list}");
    assert!(
        list.contains(&format!("Frozen: 14 release(s) by {me} until "))
            && list.contains("INC-57: bad rollout"),
        "{list}"
    );

    // Another operator resumes w4 and suspends it again: it is theirs now.
    set_suspend(&wh, "w4", false, "oncall-2").await;
    set_suspend(&wh, "w4", true, "oncall-2").await;
    // A second freeze of f1 renews the record and keeps that the first one suspended it.
    let (_, renewed) = report(&[
        "freeze", "-n", &ns, "f1", "--for", "1h", "--reason", "INC-58",
    ]);
    assert_eq!(renewed["flux/f1"]["result"], "frozen");
    assert_eq!(renewed["flux/f1"]["renewed"], true);
    assert_eq!(renewed["flux/f1"]["suspendedBefore"], false);
    assert_eq!(
        annotations(&flux.get("f1").await.unwrap())[REASON],
        "INC-58"
    );

    let (thaw, outcome) = report(&["thaw", "-n", &ns]);
    assert_eq!(thaw["partial"], false, "{thaw:#}");
    let mut thawed: Vec<(&str, bool)> = vec![
        ("wheelhouse/w1", true),
        ("wheelhouse/w2", true),
        ("wheelhouse/w3", false),
        ("wheelhouse/w4", false),
        ("flux/f1", true),
        ("flux/f2", false),
    ];
    thawed.extend(extras.iter().map(|r| (r.as_str(), true)));
    for (release, resumed) in thawed {
        let r = &outcome[release];
        assert_eq!(r["result"], "thawed", "{release}: {r}");
        assert_eq!(r["resumed"], resumed, "{release}: {r}");
        let (kind, name) = release.split_once('/').unwrap();
        let obj = api_of(&client, &ns, kind == "flux")
            .get(name)
            .await
            .unwrap();
        assert_eq!(suspended(&obj), !resumed, "{release}");
        let a = annotations(&obj);
        assert!(
            !a.keys().any(|k| k.starts_with("freeze.wheelhouse.dev/")),
            "{release} keeps its record: {a:?}"
        );
        assert!(
            !obj.metadata
                .labels
                .clone()
                .unwrap_or_default()
                .contains_key(FROZEN_LABEL)
        );
    }
    assert!(
        outcome["wheelhouse/w4"]["note"]
            .as_str()
            .unwrap()
            .contains("oncall-2"),
        "{}",
        outcome["wheelhouse/w4"]
    );
    assert!(
        outcome["wheelhouse/w3"]["note"]
            .as_str()
            .unwrap()
            .contains("before")
    );
    let events = engine_support::events_about(&client, &ns, "w4").await;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("Thawed")
            && e.note.as_deref().is_some_and(|n| n
                .starts_with(&format!("thawed by {me}: left suspended"))
                && n.contains("INC-57: bad rollout"))),
        "{events:?}"
    );
    // helm-controller handled the resume: its reconcile request is answered.
    let requested = annotations(&flux.get("f1").await.unwrap())
        [wheelhouse::api::flux::annotations::RECONCILE_REQUESTED_AT]
        .clone();
    support::flux::until(&client, &ns, "f1", "the resume handled", |hr| {
        hr.status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some(requested.as_str())
    })
    .await;
    // A thaw with nothing frozen left finds nothing.
    let (again, _) = report(&["thaw", "-n", &ns]);
    assert_eq!(again["releases"], json!([]), "{again:#}");
    test_ns.delete().await;
}

/// A freeze of 6 s outlives the engine that was leading when it began: a new engine,
/// started after the first stopped, thaws it at its end (not before), by the same rule:
/// the release the freeze suspended is resumed, the one suspended before is not; a freeze
/// kept with `--until-thawed` stays past its end.
#[tokio::test]
async fn an_expired_freeze_thaws_by_itself_with_the_engine_restarted_in_between() {
    let (client, test_ns, whs) = engine_support::setup("freeze-expiry").await;
    let ns = test_ns.name.clone();
    support::flux::require_flux(&client).await;
    // Suspended from the start, so no engine installs them while the test looks.
    create_wheelhouse(&whs, "web", true).await;
    create_wheelhouse(&whs, "kept", true).await;
    create_wheelhouse(&whs, "before", true).await;
    flux_release(&client, &ns, "flux", true).await;
    let wh = api_of(&client, &ns, false);
    let flux = api_of(&client, &ns, true);
    // Resumed objects the freeze will suspend; `before` stays suspended by its creator.
    set_suspend(&wh, "web", false, "oncall").await;
    set_suspend(&wh, "kept", false, "oncall").await;
    set_suspend(&flux, "flux", false, "oncall").await;

    let first = engine_support::start(&client, &ns).await;
    let request = |duration, until_thawed| FreezeRequest {
        by: "jane".into(),
        reason: "INC-57".into(),
        duration,
        until_thawed,
    };
    let names = |names: &[&str]| FreezeSelection {
        scope: Scope::Namespace(ns.clone()),
        labels: None,
        names: names.iter().map(|n| ReleaseKey::new(&ns, *n)).collect(),
    };
    let kept = wheelhouse::engine::freeze_releases(
        &client,
        &names(&["kept"]),
        &request(Duration::from_secs(1), true),
    )
    .await;
    assert!(!kept.partial, "{kept:?}");
    let report = wheelhouse::engine::freeze_releases(
        &client,
        &names(&["web", "before", "flux"]),
        &request(Duration::from_secs(6), false),
    )
    .await;
    assert!(!report.partial, "{report:?}");
    assert_eq!(report.releases.len(), 3, "{report:?}");
    let until = report.record.as_ref().unwrap().until.unwrap();
    drop(first);
    // The first engine is gone before the freeze ends; another one leads.
    let (config, cache) = engine_support::config(&ns, &format!("second-engine-{ns}"));
    let _second = engine_support::start_leading(&client, config, cache).await;

    let deadline = tokio::time::Instant::now() + PATIENCE;
    let thawed_at = loop {
        let web = wh.get("web").await.unwrap();
        let f = flux.get("flux").await.unwrap();
        if !suspended(&web) && !suspended(&f) {
            break Timestamp::now();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the expired freeze was not thawed: web {:?} flux {:?}",
            annotations(&web),
            annotations(&f)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        thawed_at >= until,
        "thawed at {thawed_at}, before its end {until}"
    );
    for name in ["web", "before"] {
        let obj = wh.get(name).await.unwrap();
        assert!(
            !annotations(&obj).contains_key(AT),
            "{name} keeps its record after the expiry"
        );
        assert_eq!(suspended(&obj), name == "before", "{name}");
    }
    assert!(!annotations(&flux.get("flux").await.unwrap()).contains_key(AT));
    // The thaw names the engine that did it, in the release's Events.
    let events = engine_support::events_about(&client, &ns, "web").await;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("Thawed")
            && e.note.as_deref().is_some_and(
                |n| n.starts_with(&format!("thawed by the engine second-engine-{ns}"))
            )),
        "{events:?}"
    );
    // `kept` was past its end in the very sweeps that thawed the others, and stays.
    let kept = wh.get("kept").await.unwrap();
    assert!(suspended(&kept));
    assert_eq!(annotations(&kept)[UNTIL_THAWED], "true");
    test_ns.delete().await;
}

/// A client that acts as the ServiceAccount, with only the permissions RBAC gives it.
async fn client_as(ns: &str, service_account: &str) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{service_account}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".into(),
    ]);
    Client::try_from(config).unwrap()
}

async fn apply(client: &Client, ns: &str, object: Value) {
    let obj: DynamicObject = serde_json::from_value(object).unwrap();
    let types = obj.types.clone().unwrap();
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: types.api_version.clone(),
        kind: types.kind.clone(),
        plural: format!("{}s", types.kind.to_lowercase()),
    };
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// An on-call identity may patch two of three wheelhouse HelmReleases (and the Flux one):
/// its freeze writes those, names the third as Forbidden, and says it is partial; the
/// record names the caller as the API server knows it. Its thaw is partial the same way
/// and resumes the ones it froze.
#[tokio::test]
async fn a_freeze_with_one_release_forbidden_names_it_and_is_partial() {
    let (client, test_ns, whs) = engine_support::setup("freeze-partial").await;
    let ns = test_ns.name.clone();
    support::flux::require_flux(&client).await;
    for name in ["a", "b", "c"] {
        create_wheelhouse(&whs, name, true).await;
        set_suspend(&api_of(&client, &ns, false), name, false, "oncall").await;
    }
    flux_release(&client, &ns, "f", true).await;
    set_suspend(&api_of(&client, &ns, true), "f", false, "oncall").await;
    apply(
        &client,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "oncall"}}),
    )
    .await;
    apply(&client, &ns, json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "oncall"},
        "rules": [
            {"apiGroups": ["wheelhouse.dev", "helm.toolkit.fluxcd.io"], "resources": ["helmreleases"], "verbs": ["get", "list"]},
            {"apiGroups": ["wheelhouse.dev"], "resources": ["helmreleases"], "verbs": ["patch"], "resourceNames": ["a", "b"]},
            {"apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmreleases"], "verbs": ["patch"]},
        ],
    })).await;
    apply(
        &client,
        &ns,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "oncall"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "oncall"},
            "subjects": [{"kind": "ServiceAccount", "name": "oncall", "namespace": ns}],
        }),
    )
    .await;
    let oncall = client_as(&ns, "oncall").await;
    let me = wheelhouse::cluster::client::username(&oncall)
        .await
        .unwrap();
    assert_eq!(me, format!("system:serviceaccount:{ns}:oncall"));
    let selection = FreezeSelection {
        scope: Scope::Namespace(ns.clone()),
        labels: None,
        names: Vec::new(),
    };
    let report = wheelhouse::engine::freeze_releases(
        &oncall,
        &selection,
        &FreezeRequest {
            by: me.clone(),
            reason: "INC-57".into(),
            duration: Duration::from_secs(3600),
            until_thawed: false,
        },
    )
    .await;
    assert!(report.partial, "{report:?}");
    let done: BTreeMap<String, FreezeDone> = report
        .releases
        .iter()
        .map(|r| (format!("{}/{}", r.kind, r.name), r.done.clone()))
        .collect();
    assert_eq!(done.len(), 4, "{done:?}");
    for release in ["wheelhouse/a", "wheelhouse/b", "flux/f"] {
        assert_eq!(
            done[release],
            FreezeDone::Frozen {
                suspended_before: false,
                renewed: false
            },
            "{release}"
        );
    }
    match &done["wheelhouse/c"] {
        FreezeDone::Failed { error } => assert!(error.contains("forbidden"), "{error}"),
        other => panic!("c: {other:?}"),
    }
    let c = api_of(&client, &ns, false).get("c").await.unwrap();
    assert!(!suspended(&c) && !annotations(&c).contains_key(AT));
    let a = api_of(&client, &ns, false).get("a").await.unwrap();
    assert!(suspended(&a));
    assert_eq!(annotations(&a)[BY], me);
    assert_eq!(
        wheelhouse::engine::FreezeRecord::of(&a.metadata)
            .unwrap()
            .reason,
        "INC-57"
    );
    // The freeze's own field manager holds spec.suspend: what its thaw goes by.
    assert!(a.metadata.managed_fields.iter().flatten().any(|f| {
        f.manager.as_deref() == Some(FREEZE_MANAGER)
            && f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0["f:spec"].get("f:suspend").is_some())
    }));

    let thaw = wheelhouse::engine::thaw_releases(&oncall, &selection, &me).await;
    assert!(!thaw.partial, "only frozen releases are thawed: {thaw:?}");
    assert_eq!(thaw.releases.len(), 3, "{thaw:?}");
    for name in ["a", "b"] {
        assert!(!suspended(
            &api_of(&client, &ns, false).get(name).await.unwrap()
        ));
    }
    assert!(!suspended(
        &api_of(&client, &ns, true).get("f").await.unwrap()
    ));
    test_ns.delete().await;
}

/// Two freezes and a thaw over the same releases at once, three times over: each write
/// is whole (preconditioned on the resourceVersion it was decided from), so every release
/// ends either thawed (running, no record) or frozen with one freeze's whole record, never
/// suspended without a record nor with a record that mixes the two freezes; and since no
/// release was suspended before, a final thaw resumes every one of them.
#[tokio::test]
async fn two_freezes_and_a_thaw_at_once_leave_each_release_as_one_of_them_asked() {
    let (client, test_ns, whs) = engine_support::setup("freeze-race").await;
    let ns = test_ns.name.clone();
    let names: Vec<String> = (0..6).map(|i| format!("r{i}")).collect();
    for name in &names {
        create_wheelhouse(&whs, name, false).await;
    }
    let selection = FreezeSelection {
        scope: Scope::Namespace(ns.clone()),
        labels: None,
        names: Vec::new(),
    };
    let request = |by: &str, reason: &str, hours: u64| FreezeRequest {
        by: by.into(),
        reason: reason.into(),
        duration: Duration::from_secs(hours * 3600),
        until_thawed: false,
    };
    let (alice, bob) = (request("alice", "INC-A", 1), request("bob", "INC-B", 2));
    let wh = api_of(&client, &ns, false);
    for round in 0..3 {
        let (a, b, t) = tokio::join!(
            wheelhouse::engine::freeze_releases(&client, &selection, &alice),
            wheelhouse::engine::freeze_releases(&client, &selection, &bob),
            wheelhouse::engine::thaw_releases(&client, &selection, "carol"),
        );
        for r in a.releases.iter().chain(&b.releases).chain(&t.releases) {
            if let FreezeDone::Failed { error } = &r.done {
                assert!(
                    error.contains("changed by someone else"),
                    "round {round}: {r:?}"
                );
            }
        }
        for name in &names {
            let obj = wh.get(name).await.unwrap();
            let a = annotations(&obj);
            let labelled = obj
                .metadata
                .labels
                .clone()
                .unwrap_or_default()
                .contains_key(FROZEN_LABEL);
            match a.get(BY).map(String::as_str) {
                None => assert!(
                    !suspended(&obj) && !labelled && !a.contains_key(AT),
                    "round {round}: {name} half thawed: suspend {} {a:?}",
                    suspended(&obj)
                ),
                Some(by) => {
                    let reason = if by == "alice" { "INC-A" } else { "INC-B" };
                    assert!(by == "alice" || by == "bob", "{by}");
                    assert!(suspended(&obj) && labelled, "round {round}: {name}: {a:?}");
                    assert_eq!(a[REASON], reason, "round {round}: {name} mixes two freezes");
                    let at: Timestamp = a[AT].parse().unwrap();
                    let until: Timestamp = a[UNTIL].parse().unwrap();
                    let hours: i64 = if by == "alice" { 1 } else { 2 };
                    assert_eq!(until.duration_since(at).as_secs(), hours * 3600, "{name}");
                    assert_eq!(a[BEFORE], "false", "round {round}: {name}: {a:?}");
                }
            }
        }
    }
    let thaw = wheelhouse::engine::thaw_releases(&client, &selection, "carol").await;
    assert!(!thaw.partial, "{thaw:?}");
    for name in &names {
        assert!(
            !suspended(&wh.get(name).await.unwrap()),
            "{name} left suspended"
        );
    }
    test_ns.delete().await;
}
