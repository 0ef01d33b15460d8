//! Issue #17: an API server outage in the middle of a health check. The engine loses its
//! Lease while the server does not answer and stops acting; when the server is back it
//! takes the Lease again and resumes its own pending revision's wait, the desired state
//! unchanged: no revision marked failed, none applied again. This binary holds one test:
//! it freezes the API server every other test would use.

mod support;

use std::time::Duration;

use support::apiserver::Frozen;
use support::engine::{self as eng, install_webapp, set_values};

/// How long the API server stays frozen: far past the engine's 15 s Lease.
const OUTAGE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_wait_through_a_60s_api_outage_resumes_without_a_failed_revision() {
    let (client, ns, api) = eng::setup("outage").await;
    let engine = eng::start(&client, &ns.name).await;
    install_webapp(&api, "web", serde_json::json!({"timeout": "10m"})).await;
    set_values(&api, "web", serde_json::json!({"behavior": "never-ready"})).await;
    let waiting = eng::waiting_on(&api, "web", 2).await;
    let began = waiting.status.unwrap().wait.unwrap();

    let mut role = engine.handle.role();
    let frozen = Frozen::freeze();
    // The positive sign that the outage reached the engine: it let its Lease go.
    tokio::time::timeout(
        Duration::from_secs(30),
        role.wait_for(|r| *r != wheelhouse::engine::Role::Leader),
    )
    .await
    .expect("the engine stops acting once its Lease can pass")
    .unwrap();
    tokio::time::sleep(OUTAGE).await;
    frozen.thaw();
    tokio::time::timeout(
        support::PATIENCE,
        role.wait_for(|r| *r == wheelhouse::engine::Role::Leader),
    )
    .await
    .expect("the engine leads again once the API server answers")
    .unwrap();

    // It picks its wait up again, and it ends as it would have without the outage.
    eng::assert_wait_resumed_then_deployed(&client, &api, &ns.name, &began).await;
    ns.delete().await;
}
