//! The dashboard end to end: the real binary in tmux against the local control plane,
//! driven by keys, checked on screen and in the API.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher;
use support::tmux::Dashboard;
use support::{PATIENCE, TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

/// The dashboard on one test namespace: its table filtered to it (`-n`) and its engine's
/// Lease there, so parallel tests never compete for a Lease.
/// A dashboard on `namespace`. Its engine reconciles that namespace only: the tests run
/// side by side, and a cluster-wide engine per test (each with a Lease of its own) took
/// over the releases of the others, upgrading a release under another's wait.
fn dashboard(namespace: &str, flags: &[&str]) -> Dashboard {
    let mut args = vec!["-n", namespace, "--lease-namespace", namespace];
    if !flags.contains(&"--readonly") {
        args.extend(["--engine-scope", "namespace"]);
    }
    args.extend_from_slice(flags);
    Dashboard::start(&format!("wheelhouse-test-{namespace}"), &args)
}

fn line_of<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
}

fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/tui-app")
}

async fn poll<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The freeze test stops the API server that every test here uses, and the logs test's
/// engine would act on the others' releases: each runs alone.
static API_SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

#[tokio::test]
async fn dashboard_drives_releases() {
    let _shared = API_SERVER.read().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tui").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let create = |name: &str, extra: &str| {
        support::from_yaml::<HelmRelease>(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: {name}}}\n\
             spec:\n  chart: {{path: {}}}\n{extra}",
            chart().display()
        ))
    };
    let web = create("web", "  values: {greeting: hi}\n");
    let stuck = create(
        "stuck",
        "  timeout: 5m\n  values: {behavior: never-ready}\n",
    );

    let gated = create("gated", "  values: {externalConfig: gated-extra}\n");

    let dash = dashboard(&ns.name, &[]);
    dash.wait_for("the header with the engine running here", |s| {
        s.contains(&format!("engine here: ns {}", ns.name))
    })
    .await;
    api.create(&PostParams::default(), &web).await.unwrap();
    api.create(&PostParams::default(), &stuck).await.unwrap();
    api.create(&PostParams::default(), &gated).await.unwrap();

    // The table is live: web appears, then becomes Ready.
    dash.wait_for("web becoming Ready", |s| {
        line_of(s, "web").is_some_and(|l| l.contains("✓ Ready"))
    })
    .await;

    // Select web with the filter, then suspend it.
    dash.keys(&["/"]);
    dash.type_text("web");
    dash.keys(&["Enter", "s"]);
    dash.wait_for("suspend feedback", |s| {
        s.contains(&format!("✓ suspend {}/web: done", ns.name))
    })
    .await;
    poll("spec.suspend: true", async || {
        api.get("web").await.unwrap().spec.suspend.then_some(())
    })
    .await;
    dash.wait_for("web shown as Suspended", |s| {
        line_of(s, "web").is_some_and(|l| l.contains("‖ Suspended"))
    })
    .await;

    // Reconcile writes the requestedAt annotation.
    dash.keys(&["r"]);
    dash.wait_for("reconcile feedback", |s| {
        s.contains(&format!("✓ reconcile {}/web: done", ns.name))
    })
    .await;
    let annotations = api
        .get("web")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        annotations.contains_key(wheelhouse::api::annotations::RECONCILE_REQUESTED_AT),
        "{annotations:?}"
    );
    // `s` never resumes: on the suspended release it changes nothing; `S` resumes.
    dash.keys(&["s"]);
    dash.wait_for("nothing to suspend", |s| s.contains("already suspended"))
        .await;
    assert!(api.get("web").await.unwrap().spec.suspend);
    dash.keys(&["S"]);
    poll("spec.suspend: false", async || {
        (!api.get("web").await.unwrap().spec.suspend).then_some(())
    })
    .await;

    // An invalid values edit is refused and kept; the fixed one is applied after yes.
    dash.keys(&["e"]);
    dash.wait_for("the editor", |s| {
        s.contains("Edit spec.values") && s.contains("greeting: hi")
    })
    .await;
    dash.type_text("extra: [1");
    dash.keys(&["Enter", "C-s"]);
    let screen = dash
        .wait_for("the YAML error", |s| s.contains("Not applied"))
        .await;
    assert!(screen.contains("extra: [1"), "draft kept:\n{screen}");
    let values = api.get("web").await.unwrap().spec.values;
    assert_eq!(values, Some(serde_json::json!({"greeting": "hi"})));
    dash.keys(&["Up", "End"]);
    dash.type_text("]");
    dash.keys(&["C-s"]);
    // The question, once the engine's render of the draft is there (y waits for it).
    dash.wait_for("the confirmation under the rendered diff", |s| {
        s.contains("Apply these values") && s.contains("y: apply")
    })
    .await;
    dash.keys(&["y"]);
    dash.wait_for("values feedback", |s| {
        s.contains(&format!("✓ apply values to {}/web: done", ns.name))
    })
    .await;
    poll("the edited values", async || {
        let values = api.get("web").await.unwrap().spec.values;
        (values == Some(serde_json::json!({"greeting": "hi", "extra": [1]}))).then_some(())
    })
    .await;

    // A concurrent change to the values refuses the edit and keeps the draft; status
    // writes in between (the engine upgrades web meanwhile) do not.
    dash.keys(&["e"]);
    dash.wait_for("the editor again", |s| s.contains("Edit spec.values"))
        .await;
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"values": {"other": 2}}})),
    )
    .await
    .unwrap();
    dash.keys(&["End"]);
    dash.type_text(" # mine");
    dash.keys(&["C-s"]);
    // The question, once the engine's render of the draft is there (y waits for it).
    dash.wait_for("the confirmation under the rendered diff", |s| {
        s.contains("Apply these values") && s.contains("y: apply")
    })
    .await;
    dash.keys(&["y"]);
    let screen = dash
        .wait_for("the concurrent-change refusal", |s| {
            s.contains("spec.values changed since the editor opened")
        })
        .await;
    assert!(screen.contains("# mine"), "draft kept:\n{screen}");
    let values = api.get("web").await.unwrap().spec.values;
    assert_eq!(
        values,
        Some(serde_json::json!({"greeting": "hi", "extra": [1], "other": 2}))
    );
    dash.keys(&["Escape"]);

    // Cancel the wait of the release whose pods never become ready.
    dash.keys(&["/"]);
    dash.type_text("stuck");
    dash.keys(&["Enter"]);
    dash.wait_for("stuck waiting with time left", |s| {
        line_of(s, "stuck").is_some_and(|l| l.contains("Progressing") && l.contains("left"))
    })
    .await;
    // The canceled state may be short-lived (the engine records the failure next), so
    // the watch is established before the key is pressed and sees every change.
    let mut changes = watcher(
        api.clone(),
        watcher::Config::default().fields("metadata.name=stuck"),
    )
    .boxed();
    loop {
        match tokio::time::timeout(PATIENCE, changes.next()).await {
            Ok(Some(Ok(watcher::Event::InitDone))) => break,
            Ok(Some(Ok(_))) => {}
            other => panic!("watch on stuck: {other:?}"),
        }
    }
    let canceled = tokio::spawn(async move {
        while let Some(event) = changes.next().await {
            if let Ok(watcher::Event::Apply(hr)) = event
                && hr
                    .condition("Ready")
                    .is_some_and(|c| c.reason == "HealthCheckCanceled")
            {
                return;
            }
        }
        panic!("watch ended");
    });
    dash.keys(&["c"]);
    dash.wait_for("the confirmation", |s| {
        s.contains("Cancel the running wait")
    })
    .await;
    dash.keys(&["y"]);
    tokio::time::timeout(PATIENCE, canceled)
        .await
        .expect("Ready reason HealthCheckCanceled in time")
        .unwrap();
    dash.wait_for("stuck no longer progressing", |s| {
        line_of(s, "stuck").is_some_and(|l| !l.contains("Progressing"))
    })
    .await;

    // Config tracking in the detail view: gated's pods wait behind the config-pending
    // gate for a ConfigMap outside the release, and run once it exists.
    dash.keys(&["/"]);
    dash.type_text("gated");
    dash.keys(&["Enter", "Enter"]);
    let screen = dash
        .wait_for("the gated pods in the detail view", |s| {
            s.contains(
                "⏸ gated: 1 pod held by wheelhouse.dev/config-pending until \
                 ConfigMap/gated-extra exists",
            )
        })
        .await;
    for line in [
        "✓ ConfigMap/gated-config",
        "✓ Secret/gated-secret  keys password",
        "✗ ConfigMap/gated-extra  missing",
    ] {
        assert!(screen.contains(line), "{line}:\n{screen}");
    }
    assert!(!screen.contains("not-shown-in-the-dashboard"), "{screen}");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    config_maps
        .create(
            &PostParams::default(),
            &support::from_yaml(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gated-extra}\ndata: {a: b}\n",
            ),
        )
        .await
        .unwrap();
    dash.wait_for("the gate lifted in the detail view", |s| {
        s.contains("✓ ConfigMap/gated-extra") && !s.contains("⏸ gated")
    })
    .await;
    dash.keys(&["Escape"]);
    dash.wait_for("gated becoming Ready", |s| {
        line_of(s, "gated").is_some_and(|l| l.contains("✓ Ready"))
    })
    .await;

    // Bulk suspend over a mix of suspended and running releases: the question says what
    // happens to each, the suspended one stays suspended (none is resumed), and the
    // running ones are suspended.
    api.patch(
        "stuck",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    dash.keys(&["Escape"]);
    dash.wait_for("stuck shown as Suspended", |s| {
        line_of(s, "stuck").is_some_and(|l| l.contains("‖ Suspended"))
    })
    .await;
    for name in ["stuck", "gated", "web"] {
        dash.keys(&["/"]);
        dash.type_text(name);
        dash.keys(&["Enter", "Space", "Escape"]);
    }
    dash.keys(&["s"]);
    dash.wait_for("the bulk confirmation", |s| {
        s.contains("Suspend 2 (") && s.contains("already suspended: unchanged")
    })
    .await;
    dash.keys(&["y"]);
    poll("gated and web suspended", async || {
        let gated = api.get("gated").await.unwrap().spec.suspend;
        let web = api.get("web").await.unwrap().spec.suspend;
        (gated && web).then_some(())
    })
    .await;
    assert!(
        api.get("stuck").await.unwrap().spec.suspend,
        "stuck was not resumed"
    );

    // The API server stops answering (frozen, as a hung server or a partition looks):
    // a banner within 5 s, stale rows; it clears once the server answers again.
    let guard = support::apiserver::Frozen::freeze();
    let frozen = Instant::now();
    let screen = dash
        .wait_for("the disconnected banner", |s| {
            s.contains("API server unreachable since")
        })
        .await;
    drop(guard);
    let banner_after = frozen.elapsed();
    // The promise is 5 s: the engine probes every second with a 2 s limit, so the
    // banner comes within 3 s plus a draw.
    println!("disconnected banner after {banner_after:?}");
    assert!(banner_after < Duration::from_secs(5), "{banner_after:?}");
    assert!(
        !screen.contains("✓ Ready"),
        "no confident Ready while disconnected:\n{screen}"
    );
    dash.wait_for("the banner cleared", |s| !s.contains("unreachable"))
        .await;

    dash.quit().await;
    ns.delete().await;
}

/// The header's namespace and the rows shown, after a number key or `:ns`.
fn shows(screen: &str, ns: &str, present: &[&str], absent: &[&str]) -> bool {
    let header = screen.lines().next().unwrap_or_default();
    header.contains(&format!(" ns {ns} "))
        && present.iter().all(|n| line_of(screen, n).is_some())
        && absent.iter().all(|n| line_of(screen, n).is_none())
}

#[tokio::test]
async fn number_keys_switch_the_namespace_shown_and_0_shows_all() {
    let _shared = API_SERVER.read().await;
    let client = client().await;
    install_crd(&client).await;
    let a = TestNamespace::new(&client, "tuinav").await;
    let b = TestNamespace::new(&client, "tuinav").await;
    // Suspended: the engine leaves them alone; the table lists them all the same.
    for (ns, name) in [(&a.name, "alpha"), (&b.name, "beta")] {
        let hr = support::from_yaml::<HelmRelease>(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: {name}}}\n\
             spec:\n  suspend: true\n  chart: {{path: {}}}\n",
            chart().display()
        ));
        Api::<HelmRelease>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &hr)
            .await
            .unwrap();
    }
    // Read-only: switching the view needs no engine, and this one must not reconcile
    // the releases of tests running beside it.
    let dash = dashboard(&a.name, &["--readonly"]);
    dash.wait_for("alpha in the start namespace, which is favourite 1", |s| {
        shows(s, &a.name, &["alpha"], &["beta"]) && s.contains(&format!("<1> [{}]", a.name))
    })
    .await;

    // :ns with tab completion: the namespace list comes from the cluster.
    dash.keys(&[":"]);
    dash.type_text(&format!("ns {}", &b.name[..b.name.len() - 1]));
    dash.keys(&["Tab"]);
    dash.wait_for("the completed namespace", |s| {
        s.contains(&format!(":ns {}", b.name)) && s.contains("namespaces: ")
    })
    .await;
    dash.keys(&["Enter"]);
    dash.wait_for("beta, and b as favourite 2: a keeps 1", |s| {
        shows(s, &b.name, &["beta"], &["alpha"])
            && s.contains(&format!("<1> {} <2> [{}]", a.name, b.name))
    })
    .await;

    dash.keys(&["1"]);
    dash.wait_for("1 showing a", |s| shows(s, &a.name, &["alpha"], &["beta"]))
        .await;
    dash.keys(&["0"]);
    // Every namespace holds other tests' releases too, more than a screen: a text filter
    // on the two namespaces' common prefix brings both rows into view.
    dash.keys(&["/"]);
    dash.type_text("tuinav-");
    dash.keys(&["Enter"]);
    dash.wait_for("0 showing every namespace", |s| {
        shows(s, "all namespaces", &["alpha", "beta"], &[])
    })
    .await;
    dash.keys(&["Escape", "2"]);
    dash.wait_for("2 showing b", |s| shows(s, &b.name, &["beta"], &["alpha"]))
        .await;

    // Kept for the next run, in the order of their keys.
    let file = dash.config_dir().join("wheelhouse/favourites.yaml");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let (first, second) = (text.find(&a.name), text.find(&b.name));
    assert!(
        first.is_some() && second.is_some() && first < second,
        "{text}"
    );

    dash.quit().await;
    a.delete().await;
    b.delete().await;
}

/// The local control plane's kube-apiserver process, from the pids file the cluster
/// scripts write beside the kubeconfig.
/// Issue #16: a suspend sent while the API server is frozen (SIGSTOP) gets no answer; the
/// dashboard says its outcome is unknown (never failed), keeps watching, and reports it
/// applied once the server answers again and the release shows it.
#[tokio::test]
async fn a_suspend_without_an_answer_is_reported_when_it_lands() {
    let _alone = API_SERVER.write().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tuifreeze").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let billing = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: billing}}\n\
         spec:\n  chart: {{path: {}}}\n",
        chart().display()
    ));
    api.create(&PostParams::default(), &billing).await.unwrap();
    let dash = dashboard(&ns.name, &[]);
    dash.wait_for("billing Ready", |s| {
        line_of(s, "billing").is_some_and(|l| l.contains("✓ Ready"))
    })
    .await;

    let frozen = support::apiserver::Frozen::freeze();
    dash.keys(&["s"]);
    let what = format!("suspend {}/billing", ns.name);
    let unknown = dash
        .wait_for("the suspend's outcome unknown", |s| {
            s.contains(&format!("{what}: outcome unknown"))
        })
        .await;
    assert!(!unknown.contains(&format!("✗ {what}")), "{unknown}");
    frozen.thaw();

    let landed = dash
        .wait_for("the suspend reported applied", |s| {
            s.contains(&format!(
                "✓ {what}: applied after the API server answered again"
            ))
        })
        .await;
    assert!(!landed.contains(&format!("✗ {what}")), "{landed}");
    assert!(api.get("billing").await.unwrap().spec.suspend);
    dash.wait_for("billing shown suspended", |s| {
        line_of(s, "billing").is_some_and(|l| l.contains("Suspended"))
    })
    .await;
    dash.quit().await;
    ns.delete().await;
}

#[tokio::test]
async fn logs_of_a_crash_looping_pod_appear() {
    // Alone: its dashboard's engine covers every namespace, and a second engine acting on
    // the other tests' releases at the same time would race their waits (a cancel in
    // dashboard_drives_releases went unseen in a fresh-clone run).
    let _alone = API_SERVER.write().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tui-logs").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let hr = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: crashy}}\n\
         spec:\n  chart: {{path: {}}}\n  values: {{behavior: crash-loop}}\n",
        chart().display()
    ));
    let dash = dashboard(&ns.name, &[]);
    api.create(&PostParams::default(), &hr).await.unwrap();
    dash.wait_for("crashy listed", |s| line_of(s, "crashy").is_some())
        .await;
    dash.keys(&["/"]);
    dash.type_text("crashy");
    dash.keys(&["Enter", "Enter"]);
    dash.wait_for("the failing pod in the rollout", |s| {
        s.contains("CrashLoopBackOff")
    })
    .await;
    // The local control plane's pods log 300 numbered lines (tests/cluster/up.sh): the
    // view asks for the last 200 and follows.
    dash.keys(&["l"]);
    let screen = dash
        .wait_for("the pod's last lines", |s| s.contains("current line 300"))
        .await;
    assert!(screen.contains("following"), "{screen}");
    // The crash-looping container's previous logs.
    dash.keys(&["p"]);
    dash.wait_for("the previous container's lines", |s| {
        s.contains("previous line 050") && s.contains("previous container")
    })
    .await;
    // Search: the view jumps to the match.
    dash.keys(&["/"]);
    dash.type_text("line 007");
    dash.keys(&["Enter"]);
    dash.wait_for("the match at the top", |s| {
        s.lines()
            .find(|l| l.contains("previous line"))
            .is_some_and(|l| l.contains("previous line 007"))
    })
    .await;
    // esc leaves the logs (their stream stops) for the detail view.
    dash.keys(&["Escape"]);
    dash.wait_for("back in the detail view", |s| s.contains("Overview (d)"))
        .await;
    dash.quit().await;
    ns.delete().await;
}

fn greeting_of(hr: &HelmRelease) -> Option<&str> {
    hr.spec.values.as_ref()?.get("greeting")?.as_str()
}

#[tokio::test]
async fn a_release_is_rolled_back_and_pinned_then_resumed_and_an_edit_is_reviewed() {
    // Alone: its dashboard's engine covers every namespace (see the logs test).
    let _alone = API_SERVER.write().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tui-pin").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let hr = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: pinme}}\n\
         spec:\n  chart: {{path: {}}}\n  values: {{greeting: one}}\n",
        chart().display()
    ));
    let dash = dashboard(&ns.name, &[]);
    api.create(&PostParams::default(), &hr).await.unwrap();
    dash.wait_for("pinme Ready", |s| {
        line_of(s, "pinme").is_some_and(|l| l.contains("✓ Ready"))
    })
    .await;
    api.patch(
        "pinme",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"values": {"greeting": "two"}}})),
    )
    .await
    .unwrap();
    poll("revision 2 deployed", async || {
        (support::engine::helm_history(&ns.name, "pinme")
            .last()
            .map(|r| (r.0, r.1.clone()))
            == Some((2, "deployed".into())))
        .then_some(())
    })
    .await;

    // The History tab, revision 1 picked: b shows the diff and asks.
    dash.keys(&["/"]);
    dash.type_text("pinme");
    dash.keys(&["Enter", "Enter", "h"]);
    dash.wait_for("the revision picker", |s| s.contains("j/k pick"))
        .await;
    dash.keys(&["j", "b"]);
    let review = dash
        .wait_for("the rollback's diff and question", |s| {
            s.contains("Roll back") && s.contains("line 1/") && s.contains("y: yes")
        })
        .await;
    for part in [
        "revision 2 (now) → revision 1",
        "-  greeting: \"two\"",
        "+  greeting: \"one\"",
        "suspended until resumed",
    ] {
        assert!(review.contains(part), "{part}:\n{review}");
    }
    assert!(!review.contains("not-shown-in-the-dashboard"), "{review}");
    assert_eq!(
        support::engine::helm_history(&ns.name, "pinme").len(),
        2,
        "nothing before y"
    );
    dash.keys(&["y"]);
    let pinned = poll("pinned to revision 1", async || {
        let hr = api.get("pinme").await.unwrap();
        hr.status.as_ref()?.pinned.clone().map(|p| (hr.clone(), p))
    })
    .await;
    assert_eq!(pinned.1.revision, 1);
    assert!(pinned.0.spec.suspend);
    assert_eq!(
        support::engine::helm_history(&ns.name, "pinme")
            .last()
            .unwrap(),
        &(3, "deployed".into(), "Rollback to 1".into())
    );
    dash.keys(&["Escape"]);
    dash.wait_for("the table says pinned", |s| {
        line_of(s, "pinme")
            .is_some_and(|l| l.contains("‖ Suspended") && l.contains("pinned to revision 1"))
    })
    .await;

    // Resume: what returning to the spec changes, rendered by the engine, then y.
    dash.keys(&["S"]);
    let review = dash
        .wait_for("the resume's rendered diff", |s| {
            s.contains("Resume") && s.contains("line 1/") && s.contains("y: yes")
        })
        .await;
    for part in ["-  greeting: \"one\"", "+  greeting: \"two\"", "pinned by"] {
        assert!(review.contains(part), "{part}:\n{review}");
    }
    dash.keys(&["y"]);
    poll("back on the spec at revision 4", async || {
        let hr = api.get("pinme").await.unwrap();
        let status = hr.status.as_ref()?;
        (status.pinned.is_none()
            && status.history.first().map(|h| h.version) == Some(4)
            && hr
                .condition("Ready")
                .is_some_and(|c| c.status == "True" && c.reason == "UpgradeSucceeded"))
        .then_some(())
    })
    .await;

    // A values edit: its diff (values, then the manifest the engine renders) before the
    // write, which happens only on y.
    dash.keys(&["e"]);
    dash.wait_for("the editor", |s| s.contains("greeting: two"))
        .await;
    dash.keys(&["End", "BSpace", "BSpace", "BSpace"]);
    dash.type_text("three");
    dash.keys(&["C-s"]);
    let review = dash
        .wait_for("the edit's rendered diff", |s| {
            s.contains("ConfigMap/pinme-config (changed)") && s.contains("y: apply")
        })
        .await;
    for part in [
        "-greeting: two",
        "+greeting: three",
        "+  greeting: \"three\"",
    ] {
        assert!(review.contains(part), "{part}:\n{review}");
    }
    assert_eq!(
        greeting_of(&api.get("pinme").await.unwrap()),
        Some("two"),
        "nothing before y"
    );
    dash.keys(&["y"]);
    poll("the edit applied", async || {
        (greeting_of(&api.get("pinme").await.unwrap()) == Some("three")).then_some(())
    })
    .await;
    dash.quit().await;
    ns.delete().await;
}

/// A Deployment scaled by hand: the table marks its release drifted within moments, and
/// `w` in its detail view shows the drifted field as a diff (live → the revision).
#[tokio::test]
async fn a_scaled_deployment_is_marked_drifted_and_its_diff_shown() {
    let _alone = API_SERVER.write().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tui-drift").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let hr = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: drifty}}\n\
         spec:\n  chart: {{path: {}}}\n  values: {{replicas: 1}}\n",
        chart().display()
    ));
    let dash = dashboard(&ns.name, &[]);
    api.create(&PostParams::default(), &hr).await.unwrap();
    dash.wait_for("drifty Ready", |s| {
        line_of(s, "drifty").is_some_and(|l| l.contains("✓ Ready"))
    })
    .await;
    // `kubectl scale`, as another field manager.
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns.name)
        .patch(
            "drifty-app",
            &kube::api::PatchParams {
                field_manager: Some("kubectl".into()),
                ..Default::default()
            },
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let table = dash
        .wait_for("drifty marked drifted", |s| {
            line_of(s, "drifty").is_some_and(|l| l.contains("≠ Drifted"))
        })
        .await;
    assert!(table.contains("live objects differ"), "{table}");
    dash.keys(&["/"]);
    dash.type_text("drifty");
    dash.keys(&["Enter", "Enter", "w"]);
    let diff = dash
        .wait_for("the drift diff", |s| s.contains("object(s) drifted"))
        .await;
    for part in ["-  replicas: 4", "+  replicas: 1", "drifty-app (changed)"] {
        assert!(diff.contains(part), "{part}:\n{diff}");
    }
    ns.delete().await;
}

/// A dashboard started with --receiver-addr serves its context's webhook receivers: the
/// registry's notification of a new chart version upgrades a release whose chart is
/// checked only hourly, through the dashboard's in-process engine.
#[tokio::test]
async fn the_dashboard_engine_hears_a_registry_push() {
    let _shared = API_SERVER.read().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tuihook").await;
    let token = format!("reg-{:08x}", support::rand_u32());
    let path = support::hooks::receiver(&client, &ns.name, "registry", "registry", &token).await;
    let port = support::free_port();
    let registry =
        support::oci::NotifyingRegistry::start(&format!("http://127.0.0.1:{port}{path}"), &token);
    let pusher = support::oci::Pusher::new();
    pusher.push(&registry.address, "charts", "1.0.0", "", None);
    let address = format!("127.0.0.1:{port}");
    let dash = dashboard(&ns.name, &["--receiver-addr", &address]);
    let hr: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web"},
        "spec": {"chart": {"repository": format!("oci://{}/charts", registry.address), "name": "webapp",
                           "version": "1.x", "interval": "1h"},
                 "interval": "1h", "values": {"replicaCount": 1}}
    }))
    .unwrap();
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    api.create(&PostParams::default(), &hr).await.unwrap();
    poll("1.0.0 installed by the dashboard's engine", async || {
        deployed(&api, "1.0.0").await
    })
    .await;
    // The receivers answer once loaded: a signed-in call gets more than a 404.
    let deadline = Instant::now() + PATIENCE;
    while support::hooks::post(
        port,
        &path,
        &[("Authorization", &format!("Bearer {token}"))],
        b"{\"events\": []}",
    ) == 404
    {
        assert!(
            Instant::now() < deadline,
            "the dashboard never served its receivers"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pusher.push(&registry.address, "charts", "1.1.0", "", None);
    poll("1.1.0 deployed on the registry's push", async || {
        deployed(&api, "1.1.0").await
    })
    .await;
    dash.quit().await;
    ns.delete().await;
}

/// Some(()) once `web` is Ready with chart `version` deployed.
async fn deployed(api: &Api<HelmRelease>, version: &str) -> Option<()> {
    let s = api.get("web").await.ok()?.status?;
    (s.history.first()?.chart_version == version
        && s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"))
    .then_some(())
}

/// `T`: the Timeline lists wheelhouse's install and the helm CLI's, by who made them; a
/// `helm upgrade` by hand appears at the top while it is open; `enter` on it shows its
/// diff; a dashboard started again lists the same changes.
#[tokio::test]
async fn the_timeline_lists_changes_live_and_opens_the_diff_of_a_helm_upgrade() {
    let _shared = API_SERVER.read().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tui-timeline").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let hello = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/hello");
    support::engine::helm(&ns.name, &["install", "cli", &hello.display().to_string()]);
    let hr = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: web}}\n\
         spec:\n  chart: {{path: {}}}\n",
        chart().display()
    ));
    let dash = dashboard(&ns.name, &[]);
    api.create(&PostParams::default(), &hr).await.unwrap();
    dash.wait_for("web Ready", |s| {
        line_of(s, "web").is_some_and(|l| l.contains('✓'))
    })
    .await;
    dash.keys(&["T"]);
    let row = |s: &str, release: &str, kind: &str, who: &str| {
        s.lines().any(|l| {
            l.contains(&format!("{}/{release}", ns.name)) && l.contains(kind) && l.contains(who)
        })
    };
    dash.wait_for("both installs, by who made them", |s| {
        s.contains("Timeline")
            && row(s, "web", "install", "wheelhouse")
            && row(s, "cli", "install", "helm CLI")
    })
    .await;
    // A change by hand appears at the top while the view is open.
    support::engine::helm(
        &ns.name,
        &[
            "upgrade",
            "cli",
            &hello.display().to_string(),
            "--set",
            "greeting=by-hand",
        ],
    );
    let screen = dash
        .wait_for("the helm upgrade", |s| row(s, "cli", "upgrade", "helm CLI"))
        .await;
    let first_row = screen
        .lines()
        .find(|l| l.contains(&format!("{}/", ns.name)))
        .unwrap();
    assert!(first_row.contains("upgrade"), "{screen}");
    dash.keys(&["g", "Enter"]);
    dash.wait_for("its diff", |s| {
        s.contains("revision 1 → 2") && s.contains("by-hand")
    })
    .await;
    dash.quit().await;
    // Nothing of it lived in the dashboard: a new one lists the same.
    let dash = dashboard(&ns.name, &[]);
    dash.wait_for("web listed", |s| line_of(s, "web").is_some())
        .await;
    dash.keys(&["T"]);
    dash.wait_for("the same changes", |s| {
        row(s, "web", "install", "wheelhouse")
            && row(s, "cli", "install", "helm CLI")
            && row(s, "cli", "upgrade", "helm CLI")
    })
    .await;
    dash.quit().await;
    ns.delete().await;
}

/// Issue #36's acceptance: every kind of change, by whoever made it, in order in the
/// dashboard's Timeline; `enter` on the helm CLI's upgrade shows its diff; a new dashboard
/// lists every row again; `wheelhouse timeline -o markdown` lists the same changes.
#[tokio::test]
async fn every_kind_of_change_is_in_the_timeline_in_order_with_who_made_it_and_survives_a_restart()
{
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};
    // Alone: every dashboard's engine covers every namespace, and this one's releases
    // take long enough (a wait, drift, a rollout) for another test's engine to act on them.
    let _alone = API_SERVER.write().await;
    let client = client().await;
    install_crd(&client).await;
    support::flux::require_flux(&client).await;
    let ns = TestNamespace::new(&client, "tui-changes").await;
    let n = ns.name.clone();
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &n);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &n);
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts");
    let hello = fixtures.join("hello");
    let extra = |value: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-extra"}, "data": {"GREETING": value},
        }))
        .unwrap()
    };
    config_maps
        .create(&PostParams::default(), &extra("hello"))
        .await
        .unwrap();
    let set = |values: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"values": values}})),
            )
            .await
            .unwrap();
        }
    };
    let ready_at = |revision: i32| {
        let api = api.clone();
        async move {
            support::engine::wait_for(&api, "web", &format!("revision {revision} Ready"), |h| {
                h.status.as_ref().is_some_and(|s| {
                    s.history.first().is_some_and(|r| r.version == revision)
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .await;
        }
    };
    let kept = |kind: &'static str| {
        let api = api.clone();
        async move {
            support::engine::wait_for(&api, "web", &format!("a {kind} kept"), |h| {
                h.status
                    .as_ref()
                    .is_some_and(|s| s.changes.iter().any(|c| c.kind == kind))
            })
            .await;
        }
    };

    // The helm CLI's release, then wheelhouse's (drift corrected, config tracked).
    support::engine::helm(&n, &["install", "cli", &hello.display().to_string()]);
    let dash = dashboard(&n, &[]);
    let hr = support::from_yaml::<HelmRelease>(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: web}}\n\
         spec:\n  chart: {{path: {}}}\n  timeout: 5m\n  driftDetection: {{mode: enabled}}\n\
         \x20 values: {{extraConfigMap: web-extra}}\n",
        fixtures.join("webapp").display()
    ));
    api.create(&PostParams::default(), &hr).await.unwrap();
    ready_at(1).await;
    // A wheelhouse upgrade.
    set(serde_json::json!({"extraConfigMap": "web-extra", "message": "two"})).await;
    ready_at(2).await;
    // A helm upgrade by hand.
    support::engine::helm(
        &n,
        &[
            "upgrade",
            "cli",
            &hello.display().to_string(),
            "--set",
            "greeting=by-hand",
        ],
    );
    // Flux's helm-controller installs and upgrades a release of its own.
    let _repo = support::flux::install_and_upgrade(&client, &n, "fluxed").await;
    // A wait that a newer spec cancels, and the fix.
    set(serde_json::json!({"extraConfigMap": "web-extra", "message": "three", "behavior": "never-ready"})).await;
    support::engine::waiting_on(&api, "web", 3).await;
    set(serde_json::json!({"extraConfigMap": "web-extra", "message": "four", "behavior": ""}))
        .await;
    ready_at(4).await;
    // Drift, corrected.
    let out = std::process::Command::new(support::testbin().join("kubectl"))
        .args(["scale", "deployment/web", "--replicas=5", "-n", &n])
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kept("drift-corrected").await;
    // A change of the config the pods read rolls them.
    let mut cm = config_maps.get("web-extra").await.unwrap();
    cm.data = extra("bonjour").data;
    config_maps
        .replace("web-extra", &PostParams::default(), &cm)
        .await
        .unwrap();
    kept("config-rollout").await;
    // An operator suspends it.
    api.patch(
        "web",
        &PatchParams {
            field_manager: Some("on-call".into()),
            ..Default::default()
        },
        &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    kept("suspend").await;

    // Newest first, each with who made it.
    let expected = [
        ("web", "suspend", "on-call"),
        ("web", "config-rollout", "wheelhouse"),
        ("web", "drift-corrected", "wheelhouse"),
        ("web", "upgrade", "wheelhouse"), // revision 4, the fix
        ("web", "cancel", "wheelhouse"),
        ("web", "upgrade", "wheelhouse"), // revision 3, superseded
        ("fluxed", "upgrade", "Flux helm-controller"),
        ("fluxed", "install", "Flux helm-controller"),
        ("cli", "upgrade", "helm CLI"),
        ("web", "upgrade", "wheelhouse"), // revision 2
        ("web", "install", "wheelhouse"),
    ];
    let rows_in_order = |s: &str| {
        let mut from = 0;
        let lines: Vec<&str> = s.lines().collect();
        expected.iter().all(|(release, kind, who)| {
            let found = lines[from..].iter().position(|l| {
                l.contains(&format!("{n}/{release} "))
                    && l.split_whitespace().any(|w| w == *kind)
                    && l.contains(who)
            });
            match found {
                Some(at) => {
                    from += at + 1;
                    true
                }
                None => false,
            }
        })
    };
    dash.keys(&["T"]);
    dash.wait_for("every change, in order, by who made it", rows_in_order)
        .await;
    // `enter` on the helm CLI's upgrade: its diff.
    dash.keys(&["/", "cli upgrade", "Enter"]);
    dash.wait_for("the helm upgrade alone", |s| {
        s.contains("(filter: cli upgrade)")
    })
    .await;
    dash.keys(&["Enter"]);
    dash.wait_for("its diff", |s| {
        s.contains("revision 1 → 2") && s.contains("by-hand")
    })
    .await;
    dash.quit().await;
    // Nothing of it lived in the dashboard: a new one lists every row again.
    let dash = dashboard(&n, &[]);
    dash.wait_for("web listed", |s| line_of(s, "web").is_some())
        .await;
    dash.keys(&["T"]);
    dash.wait_for("every change again", rows_in_order).await;
    dash.quit().await;
    // The CLI, for a postmortem: the same changes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["timeline", "-n", &n, "--since", "10m", "-o", "markdown"])
        .output()
        .unwrap();
    let markdown = String::from_utf8(out.stdout).unwrap();
    let mut from = 0;
    let lines: Vec<&str> = markdown.lines().collect();
    for (release, kind, who) in expected {
        let found = lines[from..]
            .iter()
            .position(|l| l.contains(&format!("| {n}/{release} | {kind} | {who} |")));
        assert!(
            found.is_some(),
            "{release} {kind} {who} not after line {from}:\n{markdown}"
        );
        from += found.unwrap() + 1;
    }
    ns.delete().await;
}

/// `z` over the rows in view freezes them with the reason typed, as the operator the API
/// server knows: the banner says it, the record and the audit Events are on the releases;
/// `Z` thaws what the freeze suspended and leaves the release suspended before it. That
/// release, suspended three days ago by its change log, is then a forgotten suspend: the
/// banner counts it and `/is:forgotten` lists it alone. A suspend by `s` is audited with
/// who made it, and `wheelhouse timeline` shows the freeze, the thaw and the operator's
/// write.
#[tokio::test]
async fn an_incident_freeze_from_the_keys_is_recorded_shown_audited_and_thawed() {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{ListParams, Patch, PatchParams};
    let _shared = API_SERVER.read().await;
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "tuiz").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let create = |name: &str, extra: &str| {
        support::from_yaml::<HelmRelease>(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: {name}}}\n\
             spec:\n  chart: {{path: {}}}\n{extra}",
            chart().display()
        ))
    };
    for (name, extra) in [("alpha", ""), ("beta", ""), ("parked", "  suspend: true\n")] {
        api.create(&PostParams::default(), &create(name, extra))
            .await
            .unwrap();
    }
    // Suspended three days ago, as its change log says (the engine keeps the record: the
    // release is still suspended, so no new one is written).
    let three_days_ago = k8s_openapi::jiff::Timestamp::now()
        .checked_sub(std::time::Duration::from_secs(3 * 24 * 3600))
        .unwrap();
    api.patch_status(
        "parked",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"changes": [{
            "at": three_days_ago.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string(),
            "kind": "suspend", "message": "suspended: the engine starts nothing on it",
            "by": "kubectl-patch"}]}})),
    )
    .await
    .unwrap();
    let me = wheelhouse::cluster::client::username(&client)
        .await
        .expect("the API server says who the test is");

    let dash = dashboard(&ns.name, &[]);
    dash.wait_for("alpha and beta Ready", |s| {
        ["alpha", "beta"]
            .iter()
            .all(|n| line_of(s, n).is_some_and(|l| l.contains("✓ Ready")))
    })
    .await;
    // The forgotten suspend first: counted, and listed alone by its filter.
    dash.wait_for("the forgotten suspend counted", |s| {
        s.contains("⏸ 1 release suspended over")
    })
    .await;
    dash.keys(&["/"]);
    dash.type_text("is:forgotten");
    dash.keys(&["Enter"]);
    let listed = dash
        .wait_for("only parked listed", |s| {
            line_of(s, "parked").is_some() && line_of(s, "alpha").is_none()
        })
        .await;
    assert!(
        line_of(&listed, "parked").is_some_and(|l| l.contains(&format!(
            "⏸ suspended since {}",
            three_days_ago.strftime("%Y-%m-%d %H:%M")
        ))),
        "{listed}"
    );
    dash.keys(&["Escape"]);
    dash.wait_for("every row again", |s| line_of(s, "alpha").is_some())
        .await;

    // z: the reason typed after the filled-in duration; the question says each release.
    dash.keys(&["z"]);
    dash.wait_for("the command line filled", |s| s.contains("freeze 2h"))
        .await;
    dash.type_text("INC-9 bad rollout");
    dash.keys(&["Enter"]);
    let question = dash
        .wait_for("the freeze's question", |s| s.contains("Freeze for 2h"))
        .await;
    assert!(question.contains("suspended already"), "{question}");
    dash.keys(&["y"]);
    let banner = dash
        .wait_for("the banner", |s| {
            s.contains(&format!("❄ FROZEN 3 releases by {me}")) && s.contains("INC-9 bad rollout")
        })
        .await;
    assert!(
        line_of(&banner, "alpha").is_some_and(|l| l.contains("❄ frozen by")),
        "{banner}"
    );
    for name in ["alpha", "beta", "parked"] {
        let hr = api.get(name).await.unwrap();
        assert!(hr.spec.suspend, "{name} not suspended");
        let annotations = hr.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations.get("freeze.wheelhouse.dev/by"),
            Some(&me),
            "{name}"
        );
        assert_eq!(
            annotations
                .get("freeze.wheelhouse.dev/suspendedBefore")
                .map(String::as_str),
            Some(if name == "parked" { "true" } else { "false" }),
            "{name}"
        );
    }
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    let audited = |reason: &'static str, name: &'static str| {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default().fields(&format!("reason={reason}")))
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.involved_object.name.as_deref() == Some(name))
        }
    };
    let frozen = poll("alpha's Frozen Event", async || {
        audited("Frozen", "alpha").await
    })
    .await;
    assert_eq!(frozen.reporting_instance.as_deref(), Some(me.as_str()));

    // Z: the thaw resumes what the freeze suspended, not the release suspended before.
    dash.keys(&["Z"]);
    dash.wait_for("the thaw's question", |s| s.contains("Thaw "))
        .await;
    dash.keys(&["y"]);
    poll("alpha and beta resumed", async || {
        let (a, b) = (api.get("alpha").await.ok()?, api.get("beta").await.ok()?);
        (!a.spec.suspend && !b.spec.suspend).then_some(())
    })
    .await;
    dash.wait_for(
        "the banner gone, the forgotten suspend counted again",
        |s| !s.contains("❄ FROZEN") && s.contains("⏸ 1 release suspended over"),
    )
    .await;
    assert!(api.get("parked").await.unwrap().spec.suspend);
    poll("alpha's Thawed Event", async || {
        audited("Thawed", "alpha").await
    })
    .await;

    // A suspend by `s` on the first row (alpha, by name) is audited with who made it.
    dash.keys(&["g", "s"]);
    poll("alpha suspended by s", async || {
        api.get("alpha").await.ok()?.spec.suspend.then_some(())
    })
    .await;
    let suspend = poll("alpha's audit Event", async || {
        audited("Audited", "alpha").await
    })
    .await;
    assert_eq!(suspend.reporting_instance.as_deref(), Some(me.as_str()));
    assert!(
        suspend
            .message
            .as_deref()
            .is_some_and(|m| m.contains(&format!("suspend {}/alpha by {me}", ns.name))),
        "{suspend:?}"
    );
    // `wheelhouse timeline` reads the audit Events: the freeze, the thaw and the write,
    // each with who made it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .args(["timeline", "-n", &ns.name, "-o", "json"])
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let changes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for kind in ["freeze", "thaw", "operator"] {
        assert!(
            changes
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["release"] == "alpha" && c["kind"] == kind && c["who"] == me.as_str()),
            "no {kind} of alpha by {me}: {changes:#}"
        );
    }
    // The dashboard's Timeline (`T`) lists the same audit Events, each with who made it.
    dash.keys(&["T"]);
    let alpha = format!("{}/alpha", ns.name);
    dash.wait_for(
        "the freeze, thaw and suspend of alpha in the Timeline",
        |s| {
            ["freeze", "thaw", "operator"].iter().all(|kind| {
                s.lines()
                    .any(|l| l.contains(&alpha) && l.contains(kind) && l.contains(me.as_str()))
            })
        },
    )
    .await;
    dash.keys(&["Escape"]);
    dash.quit().await;
    ns.delete().await;
}
