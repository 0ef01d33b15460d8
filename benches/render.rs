//! Render benchmark against the local control plane: `tests/bench.sh render`. It renders
//! the `webapp` test chart as an upgrade (WHEELHOUSE_BENCH_RUNS times, default 50) with
//! each renderer, in the same run:
//!   - the render helper, discovery warm (the digest unchanged, as between two renders
//!     while no CRD or APIService changes);
//!   - the render helper as the engine calls it: one read of the discovery document
//!     for its digest, then the render;
//!   - the render helper with its discovery dropped every time (a new digest);
//!   - the helm CLI, a process per render (`--renderer helm`, the baseline).
//!
//! Target (issue #22): a render of the webapp chart under 15 ms median.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::figures::{self, row};
use wheelhouse::helm::release::Status;
use wheelhouse::helm::render::{
    HelmRenderer, HelperRenderer, Previous, RenderRequest, Rendered, Renderer,
};

const TARGET: Duration = Duration::from_millis(15);

async fn time(
    runs: usize,
    mut once: impl AsyncFnMut(usize) -> Rendered,
) -> (Vec<Duration>, Rendered) {
    // One untimed render first: the helper starts, discovery is read.
    let mut last = once(usize::MAX).await;
    let mut took = Vec::with_capacity(runs);
    for i in 0..runs {
        let started = Instant::now();
        last = once(i).await;
        took.push(started.elapsed());
    }
    (took, last)
}

/// The request every run renders: revision 4 of `web`, an upgrade.
fn upgrade<'a>(
    chart: &'a Path,
    values: &'a serde_json::Map<String, serde_json::Value>,
    discovery: Option<&'a str>,
) -> RenderRequest<'a> {
    RenderRequest {
        release_name: "web",
        namespace: "bench-render",
        chart_path: chart,
        values,
        previous: Some(Previous {
            version: 3,
            status: Status::Deployed,
            chart_name: "webapp",
            chart_version: "1.0.0",
        }),
        discovery,
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

#[tokio::main]
async fn main() {
    let runs = figures::runs(50);
    let client = support::client().await;
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/webapp");
    let kubeconfig = support::kubeconfig_path();
    let values = serde_json::json!({"replicaCount": 2, "image": {"tag": "1.1"}})
        .as_object()
        .cloned()
        .unwrap();
    let helper = HelperRenderer::new(support::render_helper(), Duration::from_secs(60))
        .with_cluster(Some(&kubeconfig), None);
    let helm = HelmRenderer::new(support::testbin().join("helm"), Duration::from_secs(60))
        .with_cluster(Some(&kubeconfig), None);
    println!(
        "Render benchmark: the webapp test chart rendered as an upgrade, {runs} runs each, \
         local control plane, {} ({})",
        env!("CARGO_PKG_VERSION"),
        helper.check().await.expect("the render helper starts")
    );

    let (warm, by_helper) = time(runs, async |_| {
        let req = upgrade(&chart, &values, Some("unchanged"));
        helper.render(req).await.unwrap()
    })
    .await;
    let (as_engine, _) = time(runs, async |_| {
        let discovery = wheelhouse::helm::render::discover(&client).await.unwrap();
        let req = upgrade(&chart, &values, Some(&discovery.digest));
        helper.render(req).await.unwrap()
    })
    .await;
    let (cold, _) = time(runs, async |i| {
        let digest = format!("new-{i}");
        helper
            .render(upgrade(&chart, &values, Some(&digest)))
            .await
            .unwrap()
    })
    .await;
    let (cli, by_helm) = time(runs, async |_| {
        helm.render(upgrade(&chart, &values, None)).await.unwrap()
    })
    .await;
    assert_eq!(
        by_helper, by_helm,
        "the render helper and the helm CLI render the same"
    );

    println!();
    row("  render helper, discovery warm", warm);
    let e = row(
        "  render helper + discovery digest (as the engine renders)",
        as_engine,
    );
    row("  render helper, discovery read afresh every render", cold);
    let c = row("  helm CLI, a process per render (baseline)", cli);
    println!(
        "  target: a render under {} ms median: {} ({} as the engine renders); \
         the helm CLI takes {:.0}x as long",
        TARGET.as_millis(),
        if e < TARGET { "met" } else { "NOT met" },
        figures::fmt(e),
        c.as_secs_f64() / e.as_secs_f64()
    );
}
