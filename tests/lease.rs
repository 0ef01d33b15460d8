//! One engine at a time: the Lease against the real API server.

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::{TestNamespace, client};
use tokio_util::sync::CancellationToken;
use wheelhouse::engine::lease::{self, LeaseConfig, Role};

#[tokio::test]
async fn second_engine_follows_until_the_first_lets_go() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease").await;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let first = LeaseConfig::new(&ns.name, "engine-a");
    let second = LeaseConfig::new(&ns.name, "engine-b");

    assert_eq!(
        lease::try_acquire(&api, &first).await.unwrap(),
        Role::Leader
    );
    assert_eq!(
        lease::try_acquire(&api, &second).await.unwrap(),
        Role::Follower {
            holder: "engine-a".into()
        }
    );
    // Renewal keeps it.
    assert_eq!(
        lease::try_acquire(&api, &first).await.unwrap(),
        Role::Leader
    );

    lease::release(&api, &first).await.unwrap();
    assert_eq!(
        lease::try_acquire(&api, &second).await.unwrap(),
        Role::Leader
    );
    assert_eq!(
        lease::try_acquire(&api, &first).await.unwrap(),
        Role::Follower {
            holder: "engine-b".into()
        }
    );
    ns.delete().await;
}

#[tokio::test]
async fn an_expired_lease_is_taken_over() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-expiry").await;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let mut dead = LeaseConfig::new(&ns.name, "killed-engine");
    dead.duration = Duration::from_secs(1);
    assert_eq!(lease::try_acquire(&api, &dead).await.unwrap(), Role::Leader);
    // The holder was killed: it never renews or releases.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let next = LeaseConfig::new(&ns.name, "new-engine");
    assert_eq!(lease::try_acquire(&api, &next).await.unwrap(), Role::Leader);
    let spec = api.get(lease::LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("new-engine"));
    assert_eq!(spec.lease_transitions, Some(1));
    ns.delete().await;
}

#[tokio::test]
async fn the_background_task_reports_roles_and_releases_on_stop() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-run").await;
    let stop_a = CancellationToken::new();
    let (mut role_a, task_a) = lease::run(
        client.clone(),
        LeaseConfig::new(&ns.name, "a"),
        able(),
        stop_a.clone(),
    );
    role_a.wait_for(|r| *r == Role::Leader).await.unwrap();

    let mut cfg_b = LeaseConfig::new(&ns.name, "b");
    cfg_b.retry = Duration::from_millis(200);
    let stop_b = CancellationToken::new();
    let (mut role_b, task_b) = lease::run(client.clone(), cfg_b, able(), stop_b.clone());
    role_b
        .wait_for(|r| matches!(r, Role::Follower { holder } if holder == "a"))
        .await
        .unwrap();

    stop_a.cancel();
    task_a.await.unwrap();
    tokio::time::timeout(support::PATIENCE, role_b.wait_for(|r| *r == Role::Leader))
        .await
        .expect("b took over after a released the lease")
        .unwrap();
    stop_b.cancel();
    task_b.await.unwrap();
    ns.delete().await;
}

fn able() -> futures::future::BoxFuture<'static, Result<(), String>> {
    Box::pin(async { Ok(()) })
}

#[tokio::test]
async fn an_engine_that_cannot_work_never_takes_the_lease() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-unable").await;
    let stop = CancellationToken::new();
    let (mut role, task) = lease::run(
        client.clone(),
        LeaseConfig::new(&ns.name, "broken"),
        Box::pin(async { Err("cannot render charts: no helm".to_string()) }),
        stop.clone(),
    );
    role.wait_for(|r| matches!(r, Role::Unable { reason } if reason.contains("no helm")))
        .await
        .unwrap();
    // Another engine takes the lease at once: nobody holds it.
    let (mut other, other_task) = lease::run(
        client.clone(),
        LeaseConfig::new(&ns.name, "able"),
        able(),
        stop.clone(),
    );
    other.wait_for(|r| *r == Role::Leader).await.unwrap();
    stop.cancel();
    task.await.unwrap();
    other_task.await.unwrap();
    ns.delete().await;
}
