//! Both renderers on a fixture chart against the local control plane (each renders as a
//! server dry-run, with discovery and lookup): the helm CLI, and the render helper on
//! Helm's Go SDK, which must give the very same result for every request.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use wheelhouse::helm::release::Status;
use wheelhouse::helm::render::{
    Error, HelmRenderer, HelperFault, HelperRenderer, Previous, RenderRequest, Rendered, Renderer,
};

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/apply-render")
}

fn helm() -> HelmRenderer {
    HelmRenderer::new(support::testbin().join("helm"), Duration::from_secs(60))
        .with_cluster(Some(&support::kubeconfig_path()), None)
}

fn helper() -> HelperRenderer {
    HelperRenderer::new(support::render_helper(), Duration::from_secs(60))
        .with_cluster(Some(&support::kubeconfig_path()), None)
}

fn renderers() -> [(&'static str, Box<dyn Renderer>); 2] {
    [
        ("helm CLI", Box::new(helm())),
        ("render helper", Box::new(helper())),
    ]
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
        discovery: None,
        as_user: None,
        kubeconfig: None,
        priority: Default::default(),
        post_renderers: &[],
        post_render_strategy: Default::default(),
        skip_schema_validation: false,
        chart_values: None,
        kept: None,
    }
}

/// What both renderers render, which must be the same.
async fn render(req: RenderRequest<'_>) -> Rendered {
    let mut rendered = Vec::new();
    for (name, renderer) in renderers() {
        let r = renderer
            .render(req)
            .await
            .unwrap_or_else(|e| panic!("{name}: render failed: {e}"));
        rendered.push(r);
    }
    assert_eq!(
        rendered[1], rendered[0],
        "the render helper renders what the helm CLI renders"
    );
    rendered.pop().unwrap()
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
    let mut said = Vec::new();
    for (name, renderer) in renderers() {
        let err = renderer
            .render(request(&values, &chart))
            .await
            .expect_err("the chart was told to fail");
        let Error::Failed { stderr, .. } = &err else {
            panic!("{name}: expected Failed, got {err:?}")
        };
        assert!(
            stderr.contains("apply-render was told to fail"),
            "{name}: stderr: {stderr}"
        );
        assert!(
            err.to_string().contains("apply-render was told to fail"),
            "{name}: {err}"
        );
        said.push(stderr.lines().last().unwrap_or_default().to_owned());
    }
    // The same words from both: the helm CLI's last line is its error.
    assert_eq!(said[1], said[0]);
}

#[tokio::test]
async fn a_missing_chart_or_program_is_reported() {
    let values = Map::new();
    let missing = Path::new("/nonexistent/chart");
    for (name, renderer) in renderers() {
        let err = renderer
            .render(request(&values, missing))
            .await
            .expect_err("no such chart");
        assert!(
            err.to_string().contains("/nonexistent/chart"),
            "{name}: {err}"
        );
    }

    let chart = chart();
    let nobody = HelmRenderer::new(PathBuf::from("/nonexistent/helm"), Duration::from_secs(5));
    let err = nobody
        .render(request(&values, &chart))
        .await
        .expect_err("no such helm");
    assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/helm"), "{err}");

    let nobody = HelperRenderer::new(
        PathBuf::from("/nonexistent/wheelhouse-render"),
        Duration::from_secs(5),
    );
    let err = nobody
        .render(request(&values, &chart))
        .await
        .expect_err("no such helper");
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(
        err.to_string().contains("/nonexistent/wheelhouse-render"),
        "{err}"
    );
}

/// A stand-in program at `dir/name` running `script`, retried past ETXTBSY (another test
/// thread forking while the script was open for writing makes exec fail for a moment).
fn stand_in(dir: &Path, name: &str, script: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

async fn render_past_etxtbsy(renderer: &dyn Renderer, req: RenderRequest<'_>) -> Error {
    let mut err = renderer.render(req).await.expect_err("fails");
    for _ in 0..20 {
        let busy = match &err {
            Error::Spawn { source, .. } => source.raw_os_error() == Some(26),
            Error::Unavailable(m) => m.contains("Text file busy"),
            _ => false,
        };
        if !busy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        err = renderer.render(req).await.expect_err("fails");
    }
    err
}

/// A helper that says it is ready and then never answers is stopped by the timeout, and
/// the render is tried on a new helper; one that exits is started again and the render
/// tried there. Failing twice is the helper's fault ([`Error::Helper`]), never a template
/// error: it costs a release no retry.
#[tokio::test]
async fn a_hanging_or_dying_helper_is_replaced_and_the_render_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart();
    let values = Map::new();
    let silent = stand_in(
        dir.path(),
        "silent",
        "#!/bin/sh\necho '{\"ready\":true,\"helm\":\"v0\"}'\nsleep 30\n",
    );
    let slow = HelperRenderer::new(silent, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = render_past_etxtbsy(&slow, request(&values, &chart)).await;
    assert!(
        matches!(
            err,
            Error::Helper {
                fault: HelperFault::Hung(_)
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Neither hung helper outlives its render (the stand-in's shell keeps its name).
    let running = || {
        let out = std::process::Command::new("pgrep")
            .args(["-f", &format!("{}/silent", dir.path().display())])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while running() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a timed-out helper is still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Dies on every request; counts its starts in a file.
    let starts = dir.path().join("starts");
    let dying = stand_in(
        dir.path(),
        "dying",
        &format!(
            "#!/bin/sh\necho started >> {}\necho '{{\"ready\":true,\"helm\":\"v0\"}}'\nread line\necho 'out of memory' >&2\nexit 2\n",
            starts.display()
        ),
    );
    let dying = HelperRenderer::new(dying, Duration::from_secs(10));
    let err = render_past_etxtbsy(&dying, request(&values, &chart)).await;
    assert!(
        matches!(
            &err,
            Error::Helper {
                fault: HelperFault::Exited(_)
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("exited"), "{err}");
    let starts = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(
        starts.lines().count(),
        2,
        "the render was tried on a second helper"
    );
}

/// A helper that dies (or writes garbage) on its first start: the render it held comes
/// back from the next helper, rendered, and the replacement is counted by cause.
#[tokio::test]
async fn a_render_held_by_a_dying_helper_is_rendered_by_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart();
    let values = values(json!({"greeting": "survived"}));
    let real = support::render_helper();
    let count = |cause: &str| {
        wheelhouse::helm::render::helper_restarts()
            .get_or_create(&labels(cause))
            .get()
    };
    for (name, failure, cause) in [
        ("dies-once", "echo 'killed' >&2; kill -9 $$", "exited"),
        (
            "garbles-once",
            "echo 'not json at all'; sleep 30",
            "garbage",
        ),
    ] {
        let starts = dir.path().join(format!("{name}.starts"));
        let program = stand_in(
            dir.path(),
            name,
            &format!(
                "#!/bin/sh\nif [ ! -e {starts} ]; then\n  touch {starts}\n  echo '{{\"ready\":true,\"helm\":\"v0\"}}'\n  read line\n  {failure}\nfi\nexec {real}\n",
                starts = starts.display(),
                real = real.display(),
            ),
        );
        let before = count(cause);
        let renderer = HelperRenderer::new(program, Duration::from_secs(30))
            .with_cluster(Some(&support::kubeconfig_path()), None);
        let mut rendered = renderer.render(request(&values, &chart)).await;
        for _ in 0..20 {
            match &rendered {
                Err(Error::Unavailable(m)) if m.contains("Text file busy") => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    rendered = renderer.render(request(&values, &chart)).await;
                }
                _ => break,
            }
        }
        let rendered = rendered.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(rendered.manifest.contains("survived"), "{name}");
        // Counted where it is seen (an exit by the task that reaps the helper); other
        // tests of this binary may count theirs too.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while count(cause) <= before {
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: no {cause} replacement counted"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn labels(cause: &str) -> wheelhouse::helm::render::FaultLabels {
    wheelhouse::helm::render::FaultLabels::new(cause)
}

#[tokio::test]
async fn a_hanging_helm_is_stopped_by_the_timeout() {
    // A stand-in helm that never finishes.
    let dir = tempfile::tempdir().unwrap();
    let fake = stand_in(dir.path(), "helm", "#!/bin/sh\nexec sleep 30\n");

    let chart = chart();
    let values = Map::new();
    let slow = HelmRenderer::new(fake, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = render_past_etxtbsy(&slow, request(&values, &chart)).await;
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
    let docs = wheelhouse::text::yaml::parse_documents(&manifest).unwrap();
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
        // The document src/helm/values/mod.rs's unit test pins.
        "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n1: one\ntrue: yes\nf: 1.5\nbig: 18446744073709551615\ntagged: !custom 7\n",
    ];
    let mut differences = Vec::new();
    for case in cases {
        let theirs = helm_reads(case);
        let ours = wheelhouse::text::yaml::parse_documents(case).map(|mut d| d.swap_remove(0));
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
