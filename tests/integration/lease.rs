//! One engine at a time: the Lease against the real API server.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::{TestNamespace, client};
use tokio_util::sync::CancellationToken;
use wheelhouse::engine::lease::{self, LeaseConfig, Observation, Role};

#[tokio::test]
async fn second_engine_follows_until_the_first_lets_go() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease").await;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let first = LeaseConfig::new(&ns.name, "engine-a");
    let second = LeaseConfig::new(&ns.name, "engine-b");
    let (mut seen_a, mut seen_b) = (Observation::default(), Observation::default());

    assert_eq!(
        lease::try_acquire(&api, &first, &mut seen_a).await.unwrap(),
        Role::Leader
    );
    assert_eq!(
        lease::try_acquire(&api, &second, &mut seen_b)
            .await
            .unwrap(),
        Role::Follower {
            holder: "engine-a".into()
        }
    );
    // Renewal keeps it.
    assert_eq!(
        lease::try_acquire(&api, &first, &mut seen_a).await.unwrap(),
        Role::Leader
    );

    lease::release(&api, &first).await.unwrap();
    assert_eq!(
        lease::try_acquire(&api, &second, &mut seen_b)
            .await
            .unwrap(),
        Role::Leader
    );
    assert_eq!(
        lease::try_acquire(&api, &first, &mut seen_a).await.unwrap(),
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
    let mut seen = Observation::default();
    assert_eq!(
        lease::try_acquire(&api, &dead, &mut seen).await.unwrap(),
        Role::Leader
    );
    // The holder was killed: it never renews or releases. A candidate takes over once it
    // has seen the record unchanged for the lease's duration on its own clock.
    let next = LeaseConfig::new(&ns.name, "new-engine");
    let mut seen = Observation::default();
    assert!(matches!(
        lease::try_acquire(&api, &next, &mut seen).await.unwrap(),
        Role::Follower { .. }
    ));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        lease::try_acquire(&api, &next, &mut seen).await.unwrap(),
        Role::Leader
    );
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
        idle(),
        stop_a.clone(),
    );
    role_a.wait_for(|r| *r == Role::Leader).await.unwrap();

    let mut cfg_b = LeaseConfig::new(&ns.name, "b");
    cfg_b.retry = Duration::from_millis(200);
    let stop_b = CancellationToken::new();
    let (mut role_b, task_b) = lease::run(client.clone(), cfg_b, able(), idle(), stop_b.clone());
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

fn able() -> futures::future::BoxFuture<'static, Result<(), wheelhouse::engine::Unable>> {
    Box::pin(async { Ok(()) })
}

/// No workers run beside these bare candidates.
fn idle() -> tokio::sync::watch::Receiver<bool> {
    tokio::sync::watch::channel(true).1
}

#[tokio::test]
async fn an_engine_that_cannot_work_never_takes_the_lease() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-unable").await;
    let stop = CancellationToken::new();
    let (mut role, task) = lease::run(
        client.clone(),
        LeaseConfig::new(&ns.name, "broken"),
        Box::pin(async {
            Err(wheelhouse::engine::Unable::Render(
                wheelhouse::helm::render::Error::Unavailable("no helm".into()),
            ))
        }),
        idle(),
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
        idle(),
        stop.clone(),
    );
    other.wait_for(|r| *r == Role::Leader).await.unwrap();
    stop.cancel();
    task.await.unwrap();
    other_task.await.unwrap();
    ns.delete().await;
}

/// Writes the lease as a holder whose clock reads `renew` would.
async fn write_lease(api: &Api<Lease>, holder: &str, renew: &str, duration_s: i32) {
    use kube::api::{Patch, PatchParams};
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease::LEASE_NAME},
        "spec": {"holderIdentity": holder, "renewTime": renew, "acquireTime": renew,
                 "leaseDurationSeconds": duration_s, "leaseTransitions": 0}
    });
    api.patch(
        lease::LEASE_NAME,
        &PatchParams::apply("skewed-holder").force(),
        &Patch::Apply(&lease),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn clock_skew_neither_hands_the_lease_over_early_nor_keeps_it_forever() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-skew").await;
    let api: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let candidate = LeaseConfig::new(&ns.name, "candidate");

    // A holder whose clock runs decades ahead, then stops renewing: taken over once the
    // record sat unchanged for its 1 s duration on the candidate's clock.
    write_lease(&api, "ahead", "2099-01-01T00:00:00.000000Z", 1).await;
    let mut seen = Observation::default();
    assert!(matches!(
        lease::try_acquire(&api, &candidate, &mut seen)
            .await
            .unwrap(),
        Role::Follower { .. }
    ));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        lease::try_acquire(&api, &candidate, &mut seen)
            .await
            .unwrap(),
        Role::Leader
    );

    // A holder whose clock runs decades behind but keeps renewing keeps the lease.
    let mut seen = Observation::default();
    for i in 0..8 {
        write_lease(
            &api,
            "behind",
            &format!("2000-01-01T00:00:{i:02}.000000Z"),
            1,
        )
        .await;
        assert!(
            matches!(
                lease::try_acquire(&api, &candidate, &mut seen)
                    .await
                    .unwrap(),
                Role::Follower { .. }
            ),
            "round {i}"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    ns.delete().await;
}

/// A loopback TCP proxy to the API server that can stop passing bytes, as a hung API
/// server or a network partition would.
struct StallingProxy {
    port: u16,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

async fn stalling_proxy(upstream: String) -> StallingProxy {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stalled.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            for (mut from, mut to, flag) in [
                (
                    Box::new(ri) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                    Box::new(wo) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                    flag.clone(),
                ),
                (Box::new(ro), Box::new(wi), flag.clone()),
            ] {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        if flag.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        match tokio::time::timeout(Duration::from_millis(100), from.read(&mut buf))
                            .await
                        {
                            Err(_) => continue,
                            Ok(Ok(0) | Err(_)) => return,
                            Ok(Ok(n)) => {
                                if to.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        }
    });
    StallingProxy { port, stalled }
}

#[tokio::test]
async fn a_leader_whose_api_stalls_steps_down_before_anyone_may_take_over() {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let client = client().await;
    let ns = TestNamespace::new(&client, "lease-stall").await;
    let kubeconfig = Kubeconfig::read_from(support::kubeconfig_path()).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap();
    let upstream = config.cluster_url.authority().unwrap().to_string();
    let proxy = stalling_proxy(upstream).await;
    config.cluster_url = format!("https://127.0.0.1:{}", proxy.port).parse().unwrap();
    let through_proxy = kube::Client::try_from(config).unwrap();

    let timing = |id: &str| {
        let mut c = LeaseConfig::new(&ns.name, id);
        c.duration = Duration::from_secs(4);
        c.renew_deadline = Duration::from_secs(2);
        c.retry = Duration::from_millis(300);
        c.call_timeout = Duration::from_millis(500);
        c
    };
    let stop = CancellationToken::new();
    let (mut role_a, task_a) = lease::run(through_proxy, timing("a"), able(), idle(), stop.clone());
    tokio::time::timeout(
        Duration::from_secs(20),
        role_a.wait_for(|r| *r == Role::Leader),
    )
    .await
    .unwrap()
    .unwrap();
    let (mut role_b, task_b) =
        lease::run(client.clone(), timing("b"), able(), idle(), stop.clone());
    tokio::time::timeout(
        Duration::from_secs(20),
        role_b.wait_for(|r| matches!(r, Role::Follower { holder } if holder == "a")),
    )
    .await
    .unwrap()
    .unwrap();

    proxy
        .stalled
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let stalled_at = std::time::Instant::now();
    tokio::time::timeout(
        Duration::from_secs(10),
        role_a.wait_for(|r| *r != Role::Leader),
    )
    .await
    .expect("the stalled leader steps down")
    .unwrap();
    let a_down = stalled_at.elapsed();
    tokio::time::timeout(
        Duration::from_secs(20),
        role_b.wait_for(|r| *r == Role::Leader),
    )
    .await
    .expect("the other takes over once the lease passed")
    .unwrap();
    let b_up = stalled_at.elapsed();
    println!("stalled leader stepped down after {a_down:?}; the other took over after {b_up:?}");
    // The renew deadline (2 s) runs from when the last successful renew was sent, which
    // was before the stall, and the leader steps down when it passes even with a call
    // hanging: well inside the 4 s lease. (Before, it checked only at the end of a round,
    // stamped after the call returned.) Half a second of room for a loaded machine.
    assert!(a_down <= Duration::from_millis(2500), "{a_down:?}");
    assert!(a_down < b_up, "{a_down:?} vs {b_up:?}");
    stop.cancel();
    task_a.await.unwrap();
    task_b.await.unwrap();
    ns.delete().await;
}

/// The holder of the Lease `name`, if any.
async fn holder(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// A rolling restart (issue "Keeps shipping fixes on a degraded cluster", point 4):
/// SIGTERM of the controller that holds the Lease hands it back before the process exits
/// (the release call is not cut short), and the standby takes over without waiting for
/// the Lease to expire.
#[tokio::test]
async fn sigterm_of_the_leader_hands_the_lease_to_the_standby() {
    use support::controller::Controller;
    let client = client().await;
    support::install_crd(&client).await;
    let ns = TestNamespace::new(&client, "lease-term").await;
    let scope = [
        "--namespace",
        ns.name.as_str(),
        "--lease-namespace",
        ns.name.as_str(),
    ];
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let name = "wheelhouse-engine-ns";
    let mut first = Controller::start(&scope);
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while holder(&leases, name).await.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "nobody took the Lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = holder(&leases, name).await.unwrap();
    let second = Controller::start(&scope);
    // The standby is up and standing by (a positive sign it will contend).
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !second.log().contains("standing by") {
        assert!(std::time::Instant::now() < deadline, "{}", second.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let terminated = std::time::Instant::now();
    first.terminate();
    assert!(
        first.exited_within(Duration::from_secs(25)).await,
        "SIGTERM did not stop it"
    );
    let log = first.log();
    assert!(log.contains("\"stopped\""), "{log}");
    assert!(!log.contains("could not release"), "{log}");
    assert!(
        !log.contains("releasing the engine lease timed out"),
        "{log}"
    );
    // Handed over: the standby holds it, well before the 15 s a killed holder costs.
    let deadline = std::time::Instant::now() + support::PATIENCE;
    loop {
        match holder(&leases, name).await {
            Some(h) if h != leader => break,
            _ => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the standby never took over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let takeover = terminated.elapsed();
    println!("takeover after SIGTERM: {:.2} s", takeover.as_secs_f64());
    assert!(
        takeover < Duration::from_secs(10),
        "took {takeover:?}: the Lease expired instead"
    );
    drop(second);
    ns.delete().await;
}
