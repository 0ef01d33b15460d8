//! The dashboard's other kinds of release, end to end: the real binary in tmux beside
//! Flux's real helm-controller and source-controller and the real helm CLI, all on the
//! local control plane. A Flux release is listed with live readiness and driven through
//! Flux's own API; a helm CLI release is rolled back and uninstalled by wheelhouse with
//! the same result as `helm rollback` / `helm uninstall` on a twin release.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::engine::{helm, helm_try};
use support::flux::{self, annotation};
use support::tmux::Dashboard;
use support::{PATIENCE, TestNamespace, client, install_crd};
use wheelhouse::api::flux::{FluxHelmRelease, annotations};

fn dashboard(namespace: &str) -> Dashboard {
    Dashboard::start(
        &format!("wheelhouse-test-{namespace}"),
        // Its engine reconciles this namespace only, never the releases of tests beside it.
        &[
            "-n",
            namespace,
            "--lease-namespace",
            namespace,
            "--engine-scope",
            "namespace",
        ],
    )
}

fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/tui-app")
}

/// The table row of `name` of `kind` (the KIND column: wh, flux, helm).
fn row<'a>(screen: &'a str, name: &str, kind: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let plain = l.replace(['│', '›', '●'], " ");
        let words: Vec<&str> = plain.split_whitespace().collect();
        words.windows(2).any(|w| w[0] == name && w[1] == kind)
    })
}

fn rows_named(screen: &str, name: &str) -> usize {
    ["wh", "flux", "helm"]
        .iter()
        .filter(|kind| row(screen, name, kind).is_some())
        .count()
}

async fn poll<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < PATIENCE * 2, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Puts the cursor on `name` with the filter.
fn select(dash: &Dashboard, name: &str) {
    dash.keys(&["/"]);
    dash.type_text(name);
    dash.keys(&["Enter"]);
}

#[tokio::test]
async fn a_flux_release_is_listed_live_and_driven_through_flux() {
    let client = client().await;
    flux::require_flux(&client).await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "kflux").await;
    let (_server, url) = flux::serve(&chart(), "tui-app", &["0.1.0"]).await;
    flux::helm_repository(&client, &ns.name, "charts", &url).await;
    flux::helm_release(
        &client,
        &ns.name,
        "web",
        "  interval: 10m\n  chart:\n    spec:\n      chart: tui-app\n      version: 0.1.0\n      \
         sourceRef: {kind: HelmRepository, name: charts}\n  values: {greeting: one}\n",
    )
    .await;
    // A helm CLI release beside it: its row shows the storage watch has read this
    // namespace's records, Flux's among them.
    helm(
        &ns.name,
        &[
            "install",
            "cli",
            chart().to_str().unwrap(),
            "--set",
            "greeting=cli",
        ],
    );
    let flux_api: Api<FluxHelmRelease> = Api::namespaced(client.clone(), &ns.name);

    let dash = dashboard(&ns.name);
    // Listed with its kind and live readiness of its workload (1/1 replicas).
    let screen = dash
        .wait_for("the Flux release Ready with 1/1 replicas", |s| {
            row(s, "web", "flux").is_some_and(|l| l.contains("✓ Ready") && l.contains("1/1"))
                && row(s, "cli", "helm").is_some_and(|l| l.contains("✓ Ready"))
        })
        .await;
    // Flux's own Helm records are in this namespace too: the release shows once, under
    // its manager.
    assert_eq!(rows_named(&screen, "web"), 1, "{screen}");

    // Suspend from the dashboard: spec.suspend, and helm-controller honours it (a
    // changed spec is not applied while suspended; its log says why).
    select(&dash, "web");
    dash.keys(&["s"]);
    dash.wait_for("suspend done", |s| {
        s.contains(&format!("✓ suspend {}/web (flux): done", ns.name))
    })
    .await;
    assert!(flux_api.get("web").await.unwrap().spec.suspend);
    dash.wait_for("web shown as Suspended", |s| {
        row(s, "web", "flux").is_some_and(|l| l.contains("‖ Suspended"))
    })
    .await;
    // helm-controller logs each reconcile of a suspended object, with its namespace.
    let suspended_lines = |log: &str| {
        log.lines()
            .filter(|l| l.contains("suspended for this object") && l.contains(&ns.name))
            .count()
    };
    let logged_before = suspended_lines(&flux::helm_controller_log());
    flux_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"greeting": "two"}}})),
        )
        .await
        .unwrap();
    poll("helm-controller seeing the suspended object", async || {
        (suspended_lines(&flux::helm_controller_log()) > logged_before).then_some(())
    })
    .await;
    assert_eq!(
        flux::revision(&flux_api.get("web").await.unwrap()),
        1,
        "applied while suspended"
    );

    // Resume: helm-controller applies the changed values (revision 2).
    dash.keys(&["S"]);
    dash.wait_for("resume done", |s| {
        s.contains(&format!("✓ resume {}/web (flux): done", ns.name))
    })
    .await;
    flux::until(&client, &ns.name, "web", "revision 2 Ready", |hr| {
        flux::revision(hr) == 2 && flux::ready(hr)
    })
    .await;
    dash.wait_for("revision 2 on screen", |s| {
        row(s, "web", "flux").is_some_and(|l| l.contains(" 2 ") && l.contains("✓ Ready"))
    })
    .await;

    // Reconcile: the request annotation, handled by helm-controller.
    dash.keys(&["r"]);
    dash.wait_for("reconcile done", |s| {
        s.contains(&format!("✓ reconcile {}/web (flux): done", ns.name))
    })
    .await;
    let token = annotation(
        &flux_api.get("web").await.unwrap(),
        annotations::RECONCILE_REQUESTED_AT,
    )
    .expect("requestedAt written");
    flux::until(
        &client,
        &ns.name,
        "web",
        "the reconcile request handled",
        |hr| {
            hr.status
                .as_ref()
                .and_then(|s| s.last_handled_reconcile_at.as_deref())
                == Some(token.as_str())
        },
    )
    .await;

    // Force: a one-off upgrade (revision 3), the request handled.
    dash.keys(&["F"]);
    dash.wait_for("force done", |s| {
        s.contains("(flux): done") && s.contains("force")
    })
    .await;
    let forced = flux::until(
        &client,
        &ns.name,
        "web",
        "a forced upgrade to revision 3",
        |hr| flux::revision(hr) == 3 && flux::ready(hr),
    )
    .await;
    assert_eq!(
        forced
            .status
            .as_ref()
            .and_then(|s| s.last_handled_force_at.clone()),
        annotation(&forced, annotations::FORCE_AT),
    );

    // Cancel-wait is a reconcile request, and the question says what that does in Flux.
    dash.keys(&["c"]);
    let screen = dash
        .wait_for("the cancel question", |s| s.contains("(y/n)"))
        .await;
    assert!(
        screen.contains("CancelHealthCheckOnNewRevision"),
        "{screen}"
    );
    dash.keys(&["n"]);

    // Actions of other kinds are not offered: no values editor for a Flux release.
    dash.keys(&["e"]);
    dash.wait_for("edit refused", |s| s.contains("not offered"))
        .await;

    dash.quit().await;
    ns.delete().await;
}

#[tokio::test]
async fn a_helm_cli_release_is_rolled_back_and_uninstalled_as_helm_does() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "khelm").await;
    let chart = chart();
    let chart = chart.to_str().unwrap();
    // Two identical releases: wheelhouse acts on `app` from the dashboard, the real helm
    // CLI on `twin`; their histories must agree.
    for name in ["app", "twin"] {
        helm(&ns.name, &["install", name, chart, "--set", "greeting=one"]);
        helm(&ns.name, &["upgrade", name, chart, "--set", "greeting=two"]);
    }
    helm(&ns.name, &["rollback", "twin", "1"]);

    let dash = dashboard(&ns.name);
    dash.wait_for("app listed as a helm release at revision 2", |s| {
        row(s, "app", "helm").is_some_and(|l| l.contains(" 2 ") && l.contains("✓ Ready"))
    })
    .await;
    select(&dash, "app");
    dash.keys(&["Enter", "h"]);
    dash.wait_for("the history with both revisions", |s| {
        s.contains("Install complete") && s.contains("Upgrade complete")
    })
    .await;
    // Newest first: one down picks revision 1.
    dash.keys(&["j", "b"]);
    // The diff of what it changes, then the question under it.
    let screen = dash
        .wait_for("the rollback's diff and question", |s| {
            s.contains("line 1/") && s.contains("y: yes")
        })
        .await;
    assert!(
        screen.contains("to revision 1") && screen.contains("tui-app-0.1.0"),
        "{screen}"
    );
    dash.keys(&["y"]);
    dash.wait_for("rollback done", |s| {
        s.contains(&format!("✓ roll back {}/app to revision 1: done", ns.name))
    })
    .await;
    let history = |name: &str| -> Vec<(i64, String, String, String)> {
        support::engine::helm_history_json(&ns.name, name)
            .iter()
            .map(|r| {
                let text = |k: &str| r[k].as_str().unwrap().to_owned();
                (
                    r["revision"].as_i64().unwrap(),
                    text("status"),
                    text("chart"),
                    text("description"),
                )
            })
            .collect()
    };
    assert_eq!(history("app"), history("twin"));
    assert_eq!(history("app").last().unwrap().3, "Rollback to 1");
    // The values of revision 1 are back, as helm says.
    assert_eq!(
        helm(&ns.name, &["get", "values", "app", "-o", "json"]),
        helm(&ns.name, &["get", "values", "twin", "-o", "json"])
    );

    // Uninstall, as `helm uninstall` does: objects and history gone.
    dash.keys(&["Escape", "D"]);
    dash.wait_for("the uninstall question", |s| {
        s.contains("Uninstall") && s.contains("(y/n)")
    })
    .await;
    dash.keys(&["y"]);
    dash.wait_for("uninstall done", |s| {
        s.contains(&format!("✓ uninstall {}/app: done", ns.name))
    })
    .await;
    helm(&ns.name, &["uninstall", "twin"]);
    for name in ["app", "twin"] {
        let (ok, out) = helm_try(&ns.name, &["status", name]);
        assert!(!ok && out.contains("not found"), "{name}: {out}");
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    for name in ["app-app", "twin-app"] {
        // Deleted in the foreground by neither: gone or going.
        let d = deployments.get_opt(name).await.unwrap();
        assert!(
            d.is_none_or(|d| d.metadata.deletion_timestamp.is_some()),
            "{name} still there"
        );
    }
    dash.wait_for("app gone from the table", |s| {
        row(s, "app", "helm").is_none()
    })
    .await;

    // This dashboard's engine leads (the namespace engine's Lease); q lets the Lease go
    // on its way out, without waiting for the engine's step.
    dash.wait_for("the engine running here", |s| s.contains("engine here"))
        .await;
    let quit = dash.quit().await;
    let coverage = wheelhouse::engine::Coverage::new(
        wheelhouse::cluster::client::Scope::Namespace(ns.name.clone()),
        None,
    );
    let (lease_ns, lease_name) = coverage.lease(&ns.name);
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), &lease_ns)
            .get(&lease_name)
            .await
            .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        None,
        "the Lease is still held {} ms after q",
        quit.as_millis()
    );
    ns.delete().await;
}
