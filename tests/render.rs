//! The helm renderer, run with the real helm binary on a fixture chart against the local
//! control plane (it renders as a server dry-run, with discovery and lookup).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use wheelhouse::release::Status;
use wheelhouse::render::{Error, HelmRenderer, Previous, RenderRequest, Rendered, Renderer};

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/apply-render")
}

fn helm() -> HelmRenderer {
    HelmRenderer::new(support::testbin().join("helm"), Duration::from_secs(60))
        .with_cluster(Some(&support::kubeconfig_path()), None)
}

fn values(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("values are an object")
}

fn request<'a>(values: &'a Map<String, Value>, chart: &'a Path) -> RenderRequest<'a> {
    RenderRequest {
        release_name: "demo",
        namespace: "demo-ns",
        chart_path: chart,
        values,
        previous: None,
    }
}

async fn render(req: RenderRequest<'_>) -> Rendered {
    helm()
        .render(req)
        .await
        .unwrap_or_else(|e| panic!("render failed: {e}"))
}

#[tokio::test]
async fn values_reach_the_manifest() {
    let chart = chart();
    let values = values(json!({"greeting": "hi from the test: 'quoted' \"too\""}));
    let rendered = render(request(&values, &chart)).await;
    assert!(
        rendered
            .manifest
            .contains(r#"greeting: "hi from the test: 'quoted' \"too\"""#),
        "{}",
        rendered.manifest
    );
    assert!(rendered.manifest.contains("namespace: demo-ns"));
    assert!(
        rendered
            .manifest
            .starts_with("---\n# Source: apply-render/templates/configmap.yaml\n"),
        "{}",
        rendered.manifest
    );
    // The conditional template rendered nothing and left no empty document behind.
    assert!(!rendered.manifest.contains("extra.yaml"));
    assert!(!rendered.manifest.contains("fail.yaml"));
    assert_eq!(rendered.manifest.matches("---\n").count(), 2);

    let values = self::values(json!({"extra": true}));
    let rendered = render(request(&values, &chart)).await;
    assert!(rendered.manifest.contains("name: demo-extra"));
}

#[tokio::test]
async fn is_upgrade_and_capabilities_reach_the_templates() {
    let chart = chart();
    let values = Map::new();
    let install = render(request(&values, &chart)).await;
    assert!(install.manifest.contains(r#"isUpgrade: "false""#));
    assert!(install.manifest.contains(r#"hasWidgets: "false""#));

    assert!(install.manifest.contains(r#"revision: "1""#));
    // The server's version, from discovery.
    let version = support::client().await.apiserver_version().await.unwrap();
    assert!(
        install
            .manifest
            .contains(&format!(r#"kubeVersion: "{}""#, version.git_version)),
        "{}",
        install.manifest
    );

    // After revision 4 (even one still pending: a wait is running), helm renders
    // revision 5 as an upgrade.
    let upgrade = render(RenderRequest {
        previous: Some(Previous {
            version: 4,
            status: Status::PendingUpgrade,
            chart_name: "apply-render",
            chart_version: "0.1.0",
        }),
        ..request(&values, &chart)
    })
    .await;
    assert!(upgrade.manifest.contains(r#"isUpgrade: "true""#));
    assert!(
        upgrade.manifest.contains(r#"revision: "5""#),
        "{}",
        upgrade.manifest
    );
    assert_eq!(upgrade.revision, 5);
}

#[tokio::test]
async fn hooks_are_split_out_with_weights_and_policies() {
    let chart = chart();
    let values = Map::new();
    let rendered = render(request(&values, &chart)).await;
    assert!(!rendered.manifest.contains("helm.sh/hook"));

    let names: Vec<_> = rendered.hooks.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["demo-test", "demo-migrate"]);
    let test = &rendered.hooks[0];
    assert_eq!(test.kind, "Pod");
    assert_eq!(test.events, ["test"]);
    assert_eq!(test.weight, -1);
    assert_eq!(
        test.path,
        "apply-render/templates/tests/test-connection.yaml"
    );
    // As helm records it: the default policy (before-hook-creation) is applied when the
    // hook runs (`Applier::run_hooks`), not at render time.
    assert!(
        test.delete_policies.is_empty(),
        "{:?}",
        test.delete_policies
    );

    let job = &rendered.hooks[1];
    assert_eq!(job.kind, "Job");
    assert_eq!(job.events, ["post-upgrade"]);
    assert_eq!(job.weight, 5);
    assert_eq!(job.delete_policies, ["hook-succeeded"]);
    assert!(job.manifest.contains("name: demo-migrate"));
    assert!(!job.manifest.contains("# Source"));
}

#[tokio::test]
async fn a_template_error_carries_helms_message() {
    let chart = chart();
    let values = values(json!({"fail": true}));
    let err = helm()
        .render(request(&values, &chart))
        .await
        .expect_err("the chart was told to fail");
    let Error::Failed { stderr, .. } = &err else {
        panic!("expected Failed, got {err:?}")
    };
    assert!(
        stderr.contains("apply-render was told to fail"),
        "stderr: {stderr}"
    );
    assert!(
        err.to_string().contains("apply-render was told to fail"),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_chart_or_helm_binary_is_reported() {
    let values = Map::new();
    let missing = Path::new("/nonexistent/chart");
    let err = helm()
        .render(request(&values, missing))
        .await
        .expect_err("no such chart");
    assert!(err.to_string().contains("/nonexistent/chart"), "{err}");

    let chart = chart();
    let nobody = HelmRenderer::new(PathBuf::from("/nonexistent/helm"), Duration::from_secs(5));
    let err = nobody
        .render(request(&values, &chart))
        .await
        .expect_err("no such helm");
    assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/helm"), "{err}");
}

#[tokio::test]
async fn a_hanging_helm_is_stopped_by_the_timeout() {
    // A stand-in helm that never finishes.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("helm");
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let chart = chart();
    let values = Map::new();
    let slow = HelmRenderer::new(fake, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let mut err = slow
        .render(request(&values, &chart))
        .await
        .expect_err("timed out");
    // Another test thread forking while the script was open for writing makes exec fail
    // with ETXTBSY for a moment; that is the test's doing, not the renderer's.
    for _ in 0..20 {
        match &err {
            Error::Spawn { source, .. } if source.raw_os_error() == Some(26) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                err = slow
                    .render(request(&values, &chart))
                    .await
                    .expect_err("timed out");
            }
            _ => break,
        }
    }
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// How `helm template` (v4.3.1, the pinned binary) reads a values file: the values as the
/// templates see them (`toJson .Values`), or helm's error.
fn helm_reads(values_yaml: &str) -> Result<Value, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values_yaml).unwrap();
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/values-json");
    let out = std::process::Command::new(support::testbin().join("helm"))
        .args(["template", "probe"])
        .arg(&chart)
        .arg("-f")
        .arg(&file)
        .output()
        .expect("helm runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let manifest = String::from_utf8(out.stdout).unwrap();
    let docs = wheelhouse::yaml::parse_documents(&manifest).unwrap();
    let text = docs[0]["data"]["values.json"].as_str().unwrap().to_owned();
    Ok(serde_json::from_str(&text).unwrap())
}

/// Helm holds every number of its values as a float64 (it decodes them from JSON), and
/// wheelhouse hands its values to helm as JSON: numbers compare as float64.
fn as_helm_holds(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(as_helm_holds).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), as_helm_holds(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// YAML tags in a values file, read by wheelhouse exactly as helm v4.3.1 reads them: each
/// expectation comes from running the real helm on the same text, not from a table.
#[test]
fn values_with_yaml_tags_read_as_helm_reads_them() {
    let cases = [
        "a: !!str 12\n",
        "a: !!str yes\n",
        "a: !!int \"7\"\n",
        "a: !!int 0x1F\n",
        "a: !!float 1\n",
        "a: !!float \"1.5\"\n",
        "a: !!bool \"true\"\n",
        "a: !!null ~\n",
        "a: !!binary aGVsbG8=\n",
        "a: !custom 5\n",
        "a: !custom yes\n",
        "a: !thing {b: 1}\n",
        "a: !!map {b: 1}\n",
        "a: !!seq [1, 2]\n",
        "a: !!timestamp 2001-12-14\n",
        "a: 2001-12-14t21:59:43.10-05:00\n",
        "a: !!int x\n",
        "a: !!float x\n",
        "a: !!bool x\n",
        // The document src/values/mod.rs's unit test pins.
        "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n1: one\ntrue: yes\nf: 1.5\nbig: 18446744073709551615\ntagged: !custom 7\n",
    ];
    let mut differences = Vec::new();
    for case in cases {
        let theirs = helm_reads(case);
        let ours = wheelhouse::yaml::parse_documents(case).map(|mut d| d.swap_remove(0));
        let same = match (&theirs, &ours) {
            (Ok(a), Ok(b)) => as_helm_holds(a) == as_helm_holds(b),
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            differences.push(format!("{case:?}: helm {theirs:?}, wheelhouse {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}
