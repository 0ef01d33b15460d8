//! Issue #56, the fleet on one screen, end to end: the real dashboard binary in tmux and the
//! real `wheelhouse list` / `timeline` over three real API servers (the suite's main and
//! remote control planes, and a third bare one this test starts with the project's
//! `tests/cluster/up.sh --bare` and stops with `down.sh`), joined in one kubeconfig with a
//! fourth context whose credentials the main server refuses. The third one's API server is
//! stopped (SIGSTOP) and resumed: only this binary uses it, and a guard resumes it however
//! the test ends.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::fleet::{BareCluster, client_of, fleet_kubeconfig};
use support::tmux::Dashboard;
use support::{PATIENCE, install_crd, kubeconfig_path, remote_kubeconfig_path};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::FluxHelmRelease;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("tests/fixtures/charts/tui-app")
}

/// A bare control plane of this test's own, stopped when dropped.
/// Flux's HelmRelease CRD (from the project's Flux build), for the bare clusters that do
/// not run Flux: their Flux releases are listed, never reconciled.
fn install_flux_crd(kubeconfig: &Path) {
    let out = Command::new(root().join("tests/cluster/flux.sh"))
        .output()
        .expect("tests/cluster/flux.sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flux = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let crd = flux.join("crds/helm.toolkit.fluxcd.io_helmreleases.yaml");
    let status = Command::new(support::testbin().join("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--force-conflicts", "-f"])
        .arg(&crd)
        .status()
        .unwrap();
    assert!(status.success(), "kubectl apply {}", crd.display());
    let status = Command::new(support::testbin().join("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "wait",
            "--for=condition=Established",
            "crd/helmreleases.helm.toolkit.fluxcd.io",
        ])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The three kinds of release in `ns` of one cluster: a wheelhouse HelmRelease `fleetweb`,
/// a suspended Flux HelmRelease `fleetflux` and a helm CLI release `fleetcli` of
/// `cli_chart`.
async fn seed(kubeconfig: &Path, ns: &str, cli_chart: &Path) {
    let client = client_of(kubeconfig).await;
    install_crd(&client).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &support::from_yaml(&format!("metadata: {{name: {ns}}}")),
        )
        .await;
    let whr: Api<HelmRelease> = Api::namespaced(client.clone(), ns);
    whr.create(
        &PostParams::default(),
        &support::from_yaml(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: fleetweb}}\n\
             spec:\n  chart: {{path: {}}}\n  values: {{greeting: hi}}\n",
            chart().display()
        )),
    )
    .await
    .unwrap();
    let flux: Api<FluxHelmRelease> = Api::namespaced(client.clone(), ns);
    let flux_hr: serde_json::Value = serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "fleetflux"},
        "spec": {
            "interval": "10m",
            "suspend": true,
            "chart": {"spec": {"chart": "podinfo",
                               "sourceRef": {"kind": "HelmRepository", "name": "nowhere"}}}
        }
    });
    flux.patch(
        "fleetflux",
        &PatchParams::apply("wheelhouse-tests").force(),
        &Patch::Apply(&flux_hr),
    )
    .await
    .unwrap();
    let out = Command::new(support::testbin().join("helm"))
        .args(["install", "fleetcli"])
        .arg(cli_chart)
        .args(["--namespace", ns, "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The row of `name` of `kind` in `cluster`.
fn row<'a>(screen: &'a str, cluster: &str, name: &str, kind: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let plain = l.replace(['│', '›', '●'], " ");
        let words: Vec<&str> = plain.split_whitespace().collect();
        words.first() == Some(&cluster) && words.windows(2).any(|w| w[0] == name && w[1] == kind)
    })
}

/// The fleet header's line of `cluster`.
fn tile<'a>(screen: &'a str, cluster: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.len() > 2 && words[1] == cluster && !l.contains('│')
    })
}

/// The screen as one line of words: a question wrapped in its box reads whole.
fn flat(screen: &str) -> String {
    screen
        .replace(['│', '─', '┌', '┐', '└', '┘'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// `wheelhouse ARGS` on the fleet's kubeconfig: whether it succeeded, its stdout, its
/// stderr and how long it took.
fn wheelhouse(kubeconfig: &Path, args: &[&str]) -> (bool, String, String, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_wheelhouse"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn the_fleet_on_one_screen_with_a_cluster_stopped_and_failing_credentials() {
    let third = BareCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("fleet.yaml");
    let (main_kc, remote_kc) = (kubeconfig_path(), remote_kubeconfig_path());
    fleet_kubeconfig(
        &[
            ("main", main_kc.as_path()),
            ("remote", remote_kc.as_path()),
            ("third", third.kubeconfig().as_path()),
        ],
        &kubeconfig,
    );
    let ns = format!("fleet-{}", support::rand_u32() % 100_000);
    install_flux_crd(&main_kc);
    install_flux_crd(&remote_kc);
    install_flux_crd(&third.kubeconfig());
    // The third cluster's helm CLI release runs the chart at another version.
    let newer = dir.path().join("tui-app-0.2.0");
    support::copy_dir(&chart(), &newer);
    let chart_yaml = std::fs::read_to_string(newer.join("Chart.yaml")).unwrap();
    std::fs::write(
        newer.join("Chart.yaml"),
        chart_yaml.replace("version: 0.1.0", "version: 0.2.0"),
    )
    .unwrap();
    seed(&main_kc, &ns, &chart()).await;
    seed(&remote_kc, &ns, &chart()).await;
    seed(&third.kubeconfig(), &ns, &newer).await;
    let contexts = "main,remote,third,broken";

    // `wheelhouse list` over the fleet: every kind in every cluster, each row naming its
    // cluster; the refused credentials named, the exit status saying so.
    let (ok, out, err, _) = wheelhouse(
        &kubeconfig,
        &["list", "--contexts", contexts, "-n", &ns, "-o", "json"],
    );
    assert!(
        !ok,
        "a cluster that did not answer fails the exit status: {out}"
    );
    assert!(err.contains("did not answer: broken"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    for cluster in ["main", "remote", "third"] {
        for (name, kind) in [
            ("fleetweb", "wh"),
            ("fleetflux", "flux"),
            ("fleetcli", "helm"),
        ] {
            assert!(
                json["releases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["cluster"] == cluster && r["name"] == name && r["kind"] == kind),
                "{cluster} {name} {kind}: {out}"
            );
        }
    }
    let broken = json["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == "broken")
        .unwrap();
    assert_eq!(broken["status"], "credentials", "{out}");
    let (_, wide, _, _) = wheelhouse(
        &kubeconfig,
        &["list", "--contexts", contexts, "-n", &ns, "-o", "wide"],
    );
    assert!(
        wide.lines().next().unwrap().starts_with("CLUSTER"),
        "{wide}"
    );
    assert!(
        wide.lines()
            .any(|l| l.starts_with("broken") && l.contains("CredentialsFailed")),
        "{wide}"
    );
    // The timeline: the helm CLI installs, each naming its cluster.
    let (_, timeline, _, _) = wheelhouse(
        &kubeconfig,
        &[
            "timeline",
            "--contexts",
            "main,remote,third",
            "-n",
            &ns,
            "-o",
            "json",
        ],
    );
    let changes: serde_json::Value =
        serde_json::from_str(&timeline).unwrap_or_else(|e| panic!("{e}: {timeline}"));
    for cluster in ["main", "remote", "third"] {
        assert!(
            changes["changes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["cluster"] == cluster && c["release"] == "fleetcli"),
            "{cluster}: {timeline}"
        );
    }

    // The dashboard over the fleet: one table, a CLUSTER column, a tile per cluster.
    let dash = Dashboard::start_on(
        &format!("wheelhouse-test-{ns}"),
        &kubeconfig,
        &["--contexts", contexts, "-n", &ns, "--lease-namespace", &ns],
    );
    let screen = dash
        .wait_for(
            "every kind of every cluster, and the refused credentials",
            |s| {
                ["main", "remote", "third"].iter().all(|c| {
                    row(s, c, "fleetweb", "wh").is_some()
                        && row(s, c, "fleetflux", "flux").is_some()
                        && row(s, c, "fleetcli", "helm").is_some()
                }) && tile(s, "broken").is_some_and(|t| t.contains("credentials failed"))
                    && tile(s, "main").is_some_and(|t| t.contains("engine here"))
            },
        )
        .await;
    assert!(screen.contains("CLUSTER"), "{screen}");
    for c in ["main", "remote", "third"] {
        assert!(
            tile(&screen, c).is_some_and(|t| t.contains("connected")),
            "{c}:\n{screen}"
        );
    }
    assert!(
        tile(&screen, "main").unwrap().contains("engine here"),
        "{screen}"
    );
    assert!(
        tile(&screen, "remote").unwrap().contains("no engine here"),
        "{screen}"
    );

    // Where is it? The grid by chart: tui-app at two versions across the clusters.
    dash.keys(&[":"]);
    dash.type_text("grid chart");
    dash.keys(&["Enter"]);
    dash.wait_for("tui-app at 0.1.0 and 0.2.0 on one line of the grid", |s| {
        s.lines()
            .any(|l| l.contains("tui-app") && l.contains("0.1.0") && l.contains("0.2.0"))
    })
    .await;
    dash.keys(&["Escape"]);
    dash.wait_for("the table again", |s| s.contains("CLUSTER"))
        .await;

    // The Timeline across the fleet: the helm installs of each cluster, each naming its
    // cluster; the diff of third's is read in third (its copy of the chart is 0.2.0).
    dash.keys(&["T"]);
    dash.wait_for("the helm installs of every cluster", |s| {
        ["main", "remote", "third"].iter().all(|c| {
            s.lines().any(|l| {
                l.trim_start_matches('│').trim_start().starts_with(c)
                    && l.contains(&format!("{ns}/fleetcli"))
                    && l.contains("install")
            })
        })
    })
    .await;
    dash.keys(&["/"]);
    dash.type_text("cluster:third fleetcli");
    dash.keys(&["Enter"]);
    dash.wait_for("third's changes only", |s| {
        s.contains("(filter: cluster:third fleetcli)")
            && !s.lines().any(|l| {
                l.contains(&format!("{ns}/fleetcli"))
                    && (l.contains("main ") || l.contains("remote "))
            })
    })
    .await;
    dash.keys(&["G", "Enter"]);
    dash.wait_for("third's first revision, read in third", |s| {
        s.contains("fleetcli: revision 1, whole") && s.contains("tui-app-0.2.0")
    })
    .await;
    dash.keys(&["Escape", "Escape"]);
    dash.wait_for("the table again", |s| {
        s.contains("CLUSTER") && !s.contains("Timeline ·")
    })
    .await;

    // A release main's engine deploys to remote (spec.kubeConfig): its detail reads its
    // records and workloads in the remote context, the one whose server its kubeconfig
    // names, with the operator's own credentials there.
    let main_client = client_of(&main_kc).await;
    let text = std::fs::read_to_string(&remote_kc).unwrap();
    support::kubeconfig_secret(&main_client, &ns, "far", "value", &text).await;
    Api::<HelmRelease>::namespaced(main_client.clone(), &ns)
        .create(
            &PostParams::default(),
            &support::from_yaml(&format!(
                "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: fleetfar}}\n\
                 spec:\n  chart: {{path: {}}}\n  kubeConfig: {{secretRef: {{name: far}}}}\n",
                chart().display()
            )),
        )
        .await
        .unwrap();
    dash.keys(&["/"]);
    dash.type_text("fleetfar");
    dash.keys(&["Enter"]);
    dash.wait_for("fleetfar ready in main's table", |s| {
        row(s, "main", "fleetfar", "wh").is_some_and(|l| l.contains("Ready"))
    })
    .await;
    dash.keys(&["Enter"]);
    dash.wait_for("fleetfar's workload read in remote", |s| {
        s.contains("read in context remote, the cluster of its kubeConfig Secret")
            && s.contains("Deployment/fleetfar-app")
    })
    .await;
    assert!(
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(main_client.clone(), &ns)
            .get_opt("fleetfar-app")
            .await
            .unwrap()
            .is_none(),
        "fleetfar deployed to main"
    );
    dash.keys(&["Escape", "Escape"]);
    dash.wait_for("the table again", |s| {
        s.contains("CLUSTER") && !s.contains("read in context")
    })
    .await;

    // One bulk suspend over the wheelhouse rows of three clusters.
    dash.keys(&["/"]);
    dash.type_text("fleetweb");
    dash.keys(&["Enter", "C-a", "s"]);
    dash.wait_for("the question naming each cluster", |s| {
        let s = flat(s);
        s.contains("fleetweb in remote") && s.contains("fleetweb in third")
    })
    .await;
    dash.keys(&["y"]);
    for kc in [&main_kc, &remote_kc, &third.kubeconfig()] {
        let api: Api<HelmRelease> = Api::namespaced(client_of(kc).await, &ns);
        let start = Instant::now();
        while !api.get("fleetweb").await.unwrap().spec.suspend {
            assert!(
                start.elapsed() < PATIENCE,
                "fleetweb never suspended in {}",
                kc.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // The status line says how the writes ended in each cluster.
    dash.wait_for("the bulk suspend reported per cluster", |s| {
        flat(s).contains("suspend 3: main 1 done; remote 1 done; third 1 done")
    })
    .await;
    dash.wait_for("fleetweb suspended in every cluster", |s| {
        ["main", "remote", "third"]
            .iter()
            .all(|c| row(s, c, "fleetweb", "wh").is_some_and(|l| l.contains("Suspended")))
    })
    .await;
    dash.keys(&["Escape"]);

    // The third API server stops answering: marked within 5 s, its rows kept as last
    // known with their age; the other clusters stay live.
    let frozen = third.freeze();
    let stopped = Instant::now();
    let screen = dash
        .wait_for("third marked unreachable", |s| {
            tile(s, "third").is_some_and(|t| t.contains("unreachable"))
        })
        .await;
    let marked = stopped.elapsed();
    assert!(
        marked < Duration::from_secs(5),
        "marked after {marked:?}:\n{screen}"
    );
    dash.wait_for("third's rows as last known, with their age", |s| {
        row(s, "third", "fleetweb", "wh").is_some_and(|l| l.contains("old)"))
    })
    .await;
    // A change in the main and the remote cluster still reaches the screen at once.
    let main_api: Api<HelmRelease> = Api::namespaced(client_of(&main_kc).await, &ns);
    let remote_api: Api<HelmRelease> = Api::namespaced(client_of(&remote_kc).await, &ns);
    let resume = Patch::Merge(serde_json::json!({"spec": {"suspend": false}}));
    let changed = Instant::now();
    main_api
        .patch("fleetweb", &PatchParams::default(), &resume)
        .await
        .unwrap();
    remote_api
        .patch("fleetweb", &PatchParams::default(), &resume)
        .await
        .unwrap();
    let screen = dash
        .wait_for("main and remote live while third is stopped", |s| {
            ["main", "remote"]
                .iter()
                .all(|c| row(s, c, "fleetweb", "wh").is_some_and(|l| !l.contains("Suspended")))
        })
        .await;
    let live = changed.elapsed();
    eprintln!(
        "fleet: third marked unreachable {marked:?} after SIGSTOP; main and remote changes on screen in {live:?} meanwhile"
    );
    assert!(live < Duration::from_secs(3), "{live:?}:\n{screen}");
    assert!(
        tile(&screen, "third").is_some_and(|t| t.contains("unreachable")),
        "{screen}"
    );
    // `wheelhouse list` names the stopped cluster within its bound and lists the others.
    let (ok, out, _, took) = wheelhouse(
        &kubeconfig,
        &["list", "--contexts", "main,remote,third", "-n", &ns],
    );
    assert!(!ok, "{out}");
    assert!(took < Duration::from_secs(15), "{took:?}: {out}");
    eprintln!("fleet: wheelhouse list with third stopped answered in {took:?}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("third") && l.contains("Unreachable")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("main") && l.contains("fleetweb")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("remote") && l.contains("fleetweb")),
        "{out}"
    );

    // Resumed: connected again and live, with no change missed.
    frozen.thaw();
    dash.wait_for("third connected again", |s| {
        tile(s, "third").is_some_and(|t| t.contains("connected"))
    })
    .await;
    let third_api: Api<HelmRelease> = Api::namespaced(client_of(&third.kubeconfig()).await, &ns);
    third_api
        .patch("fleetweb", &PatchParams::default(), &resume)
        .await
        .unwrap();
    dash.wait_for("third's change on screen", |s| {
        row(s, "third", "fleetweb", "wh")
            .is_some_and(|l| !l.contains("Suspended") && !l.contains("old)"))
    })
    .await;
    let quit = dash.quit().await;
    eprintln!("fleet: quit in {quit:?}");
    assert!(quit < Duration::from_secs(1), "quit took {quit:?}");
    for kc in [&main_kc, &remote_kc] {
        let namespaces: Api<Namespace> = Api::all(client_of(kc).await);
        let _ = namespaces.delete(&ns, &Default::default()).await;
    }
}
