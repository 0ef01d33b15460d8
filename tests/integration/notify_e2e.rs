//! Notifications (docs/user-guide/notifications.md): the setting is a ConfigMap beside the
//! engine's Lease, webhook URLs come from Secrets, and a local receiver on 127.0.0.1
//! records what each provider type is sent. A failing then recovering release sends one
//! failure and one recovery; a superseded wait is one cancellation; the setting and its
//! Secrets apply without a restart; a route's filters hold; a webhook that fails twice
//! gets the message on the third attempt; and no webhook URL ever reaches the engine's
//! log.

use crate::support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use support::controller::Controller;
use support::engine::{self as eng, events_about, is, set_values, wait_for, webapp};
use support::receiver::{Received, Receiver};
use wheelhouse::api::HelmRelease;
use wheelhouse::webhooks::notify::config::CONFIGMAP;

/// Creates a Secret `name` holding `address` under the key Flux's Providers read.
async fn webhook_secret(client: &Client, ns: &str, name: &str, address: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"address": address},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// Writes the setting: the ConfigMap beside the engine's Lease (the test's namespace).
async fn configure(client: &Client, ns: &str, config_yaml: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIGMAP},
        "data": {"config.yaml": config_yaml},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// Waits until the engine records an Event of `reason` on the ConfigMap; its note.
async fn setting_event(client: &Client, ns: &str, reason: &str) -> String {
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    loop {
        let events = events_about(client, ns, CONFIGMAP).await;
        if let Some(e) = events.iter().find(|e| e.reason.as_deref() == Some(reason)) {
            return e.note.clone().unwrap_or_default();
        }
        let said: Vec<_> = events
            .iter()
            .map(|e| format!("{:?}: {:?}", e.reason, e.note))
            .collect();
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} Event on the ConfigMap; its Events: {said:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until the engine says the setting is in force with every provider's address
/// read: the positive sign before anything is expected of it.
async fn notifications_ready(client: &Client, ns: &str) {
    setting_event(client, ns, "NotificationsReady").await;
}

/// Creates `name` of the webapp chart with pods that crash-loop: its install fails fast.
async fn crash_looping(api: &Api<HelmRelease>, name: &str) -> HelmRelease {
    let spec = json!({"timeout": "5m", "values": {"replicaCount": 1, "behavior": "crash-loop"}});
    api.create(&PostParams::default(), &webapp(name, spec))
        .await
        .unwrap()
}

/// Creates `name` of the webapp chart with pods that never become ready: its install
/// fails when its 2 s wait times out. (A fix of a crash-looping release can fail fast on
/// the old pods, the fail-fast rule's 2 s clock slack counting them as the fix's.)
async fn never_ready(api: &Api<HelmRelease>, name: &str, spec: Value) -> HelmRelease {
    let mut with =
        json!({"timeout": "2s", "values": {"replicaCount": 1, "behavior": "never-ready"}});
    eng::merge_into(&mut with, spec);
    api.create(&PostParams::default(), &webapp(name, with))
        .await
        .unwrap()
}

/// Ready, whatever made it so (the fix of a failed install is an upgrade).
fn ready(h: &HelmRelease) -> bool {
    eng::condition(h, "Ready").is_some_and(|(s, _)| s == "True")
}

/// The bodies received on `path`, as JSON.
fn bodies(received: &[Received], path: &str) -> Vec<Value> {
    received
        .iter()
        .filter(|r| r.path == path)
        .map(Received::json)
        .collect()
}

/// How many generic messages of `event` about `name` were received.
fn count(received: &[Received], name: &str, event: &str) -> usize {
    received
        .iter()
        .map(Received::json)
        .filter(|b| b["release"]["name"] == name && b["event"] == event)
        .count()
}

/// A receiver, and the setting routing everything to it as one generic provider.
async fn generic_hook(client: &Client, ns: &str) -> Receiver {
    let receiver = Receiver::start().await;
    webhook_secret(client, ns, "hook", &receiver.url("/hook")).await;
    configure(
        client,
        ns,
        &format!(
            "providers:\n- {{name: hook, type: generic, secretRef: {{name: hook}}}}\nroutes:\n- providers: [hook]\n{FAST_RETRY}"
        ),
    )
    .await;
    receiver
}

const FAST_RETRY: &str = "retry: {attempts: 3, initialDelay: 200ms, maxDelay: 1s}\ntimeout: 5s\n";

#[tokio::test]
async fn a_failing_then_recovering_release_sends_one_failure_and_one_recovery() {
    let (client, ns, api) = eng::setup("notify-once").await;
    let receiver = Receiver::start().await;
    webhook_secret(&client, &ns.name, "oncall-hook", &receiver.url("/oncall")).await;
    configure(
        &client,
        &ns.name,
        &format!(
            "providers:\n- {{name: oncall, type: generic, secretRef: {{name: oncall-hook}}}}\nroutes:\n- providers: [oncall]\n{FAST_RETRY}"
        ),
    )
    .await;
    let _engine = eng::start(&client, &ns.name).await;
    notifications_ready(&client, &ns.name).await;

    // It fails, is remediated, fails again and stalls: several failing reconciles, one
    // failing episode.
    never_ready(
        &api,
        "web",
        json!({"install": {"remediation": {"retries": 1}}}),
    )
    .await;
    wait_for(&api, "web", "retries used up", |h| {
        is(h, "Stalled", "True", "RetriesExceeded")
    })
    .await;
    receiver
        .wait_for("the failure", |r| count(r, "web", "failure") > 0)
        .await;

    // The fix: pods that run.
    set_values(&api, "web", json!({"behavior": ""})).await;
    let hr = wait_for(&api, "web", "the fix Ready", ready).await;
    let received = receiver
        .wait_for("the recovery", |r| count(r, "web", "recovery") > 0)
        .await;

    // Counted once the recovery arrived: everything before it has been delivered.
    assert_eq!(count(&received, "web", "failure"), 1, "{received:#?}");
    assert_eq!(count(&received, "web", "recovery"), 1, "{received:#?}");
    let failure = received
        .iter()
        .map(Received::json)
        .find(|b| b["event"] == "failure")
        .unwrap();
    assert_eq!(failure["severity"], "error");
    assert_eq!(failure["reason"], "InstallFailed");
    assert!(
        failure["message"].as_str().unwrap().starts_with(&format!(
            "timed out after 2s waiting for Deployment/{}/web",
            ns.name
        )),
        "{failure:#}"
    );
    assert_eq!(failure["release"]["uid"], json!(hr.metadata.uid));
    let recovery = received
        .iter()
        .map(Received::json)
        .find(|b| b["event"] == "recovery")
        .unwrap();
    let (_, reason) = eng::condition(&hr, "Ready").unwrap();
    assert_eq!(
        (&recovery["severity"], &recovery["reason"]),
        (&json!("info"), &json!(reason))
    );
    ns.delete().await;
}

#[tokio::test]
async fn each_provider_type_is_sent_its_own_format() {
    let (client, ns, api) = eng::setup("notify-formats").await;
    let receiver = Receiver::start().await;
    for kind in ["slack", "msteams", "generic"] {
        let url = receiver.url(&format!("/{kind}/T0/B0/token"));
        webhook_secret(&client, &ns.name, &format!("{kind}-hook"), &url).await;
    }
    // Flux's in-cluster receiver carries no credential: its address may be inline.
    let flux = receiver.url("/flux");
    configure(
        &client,
        &ns.name,
        &format!(
            "providers:
- {{name: chat, type: slack, secretRef: {{name: slack-hook}}}}
- {{name: teams, type: msteams, secretRef: {{name: msteams-hook}}}}
- {{name: json, type: generic, secretRef: {{name: generic-hook}}}}
- {{name: flux, type: flux, address: \"{flux}\"}}
routes:
- providers: [chat, teams, json, flux]
{FAST_RETRY}"
        ),
    )
    .await;
    let _engine = eng::start(&client, &ns.name).await;
    notifications_ready(&client, &ns.name).await;

    never_ready(&api, "web", json!({})).await;
    receiver
        .wait_for("a failure at each of the four", |r| r.len() >= 4)
        .await;
    set_values(&api, "web", json!({"behavior": ""})).await;
    let hr = wait_for(&api, "web", "the fix Ready", ready).await;
    let (_, fixed) = eng::condition(&hr, "Ready").unwrap();
    let received = receiver
        .wait_for("a recovery at each of the four", |r| r.len() >= 8)
        .await;
    assert_eq!(received.len(), 8, "{received:#?}");
    for r in &received {
        assert_eq!(r.method, "POST");
        assert_eq!(
            r.headers.get("content-type").map(String::as_str),
            Some("application/json"),
            "{r:#?}"
        );
    }
    let ns_name = ns.name.as_str();
    let object = format!("helmrelease/web.{ns_name}");

    let slack = bodies(&received, "/slack/T0/B0/token");
    assert_eq!(slack.len(), 2, "{slack:#?}");
    assert_eq!(
        slack[0]["text"],
        format!("HelmRelease {ns_name}/web failed (InstallFailed)")
    );
    assert_eq!(slack[0]["username"], "wheelhouse");
    assert_eq!(slack[0]["attachments"][0]["color"], "danger");
    assert_eq!(slack[0]["attachments"][0]["author_name"], object.as_str());
    assert!(
        slack[0]["attachments"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "timed out after 2s waiting for Deployment/{ns_name}/web"
            )),
        "{slack:#?}"
    );
    assert_eq!(
        slack[1]["text"],
        format!("HelmRelease {ns_name}/web recovered ({fixed})")
    );
    assert_eq!(slack[1]["attachments"][0]["color"], "good");

    let teams = bodies(&received, "/msteams/T0/B0/token");
    assert_eq!(teams.len(), 2, "{teams:#?}");
    assert_eq!(teams[0]["type"], "message");
    let card = &teams[0]["attachments"][0];
    assert_eq!(
        card["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert_eq!(card["content"]["type"], "AdaptiveCard");
    let items = &card["content"]["body"][0]["items"];
    assert_eq!(items[0]["text"], object.as_str());
    assert_eq!(items[2]["color"], "attention");
    assert_eq!(
        items[3]["facts"][0],
        json!({"title": "event", "value": "failure"})
    );
    assert_eq!(
        teams[1]["attachments"][0]["content"]["body"][0]["items"][2]["color"],
        "good"
    );

    let generic = bodies(&received, "/generic/T0/B0/token");
    let events: Vec<&Value> = generic.iter().map(|b| &b["event"]).collect();
    assert_eq!(events, [&json!("failure"), &json!("recovery")]);
    assert_eq!(
        generic[0]["release"],
        json!({
            "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
            "namespace": ns_name, "name": "web", "uid": hr.metadata.uid,
            "generation": 1,
        })
    );
    assert_eq!(generic[1]["chart"]["name"], "webapp");
    let newest = &hr.status.as_ref().unwrap().history[0];
    assert_eq!(
        generic[1]["helmRevision"], newest.version,
        "{:#}",
        generic[1]
    );

    let flux_events = bodies(&received, "/flux");
    assert_eq!(flux_events.len(), 2, "{flux_events:#?}");
    let (failure, recovery) = (&flux_events[0], &flux_events[1]);
    assert_eq!(
        failure["involvedObject"]["kind"], "HelmRelease",
        "{failure:#}"
    );
    assert_eq!(
        failure["involvedObject"]["apiVersion"],
        "wheelhouse.dev/v1alpha1"
    );
    assert_eq!(failure["involvedObject"]["namespace"], ns_name);
    assert_eq!(failure["involvedObject"]["name"], "web");
    assert_eq!(failure["involvedObject"]["uid"], json!(hr.metadata.uid));
    assert_eq!(failure["severity"], "error");
    assert_eq!(failure["reason"], "InstallFailed");
    assert_eq!(failure["reportingController"], "wheelhouse");
    assert_eq!(
        failure["reportingInstance"],
        format!("test-engine-{ns_name}")
    );
    let timestamp = failure["timestamp"].as_str().unwrap();
    assert!(
        timestamp.len() == 20 && timestamp.ends_with('Z'),
        "metav1.Time is RFC 3339 in whole seconds: {timestamp}"
    );
    let chart_version = hr.status.as_ref().unwrap().history[0].chart_version.clone();
    assert_eq!(
        failure["metadata"]["wheelhouse.dev/revision"],
        chart_version.as_str()
    );
    assert!(
        failure["metadata"]["wheelhouse.dev/token"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(
        (&recovery["severity"], &recovery["reason"]),
        (&json!("info"), &json!(fixed))
    );
    ns.delete().await;
}

#[tokio::test]
async fn a_superseded_wait_is_told_as_a_cancellation_and_is_no_failure() {
    let (client, ns, api) = eng::setup("notify-cancel").await;
    let receiver = generic_hook(&client, &ns.name).await;
    let _engine = eng::start(&client, &ns.name).await;
    notifications_ready(&client, &ns.name).await;

    // Stuck in its wait; the fix supersedes it.
    never_ready(&api, "web", json!({"timeout": "5m"})).await;
    eng::waiting_on(&api, "web", 1).await;
    set_values(&api, "web", json!({"behavior": ""})).await;
    wait_for(&api, "web", "the fix Ready", ready).await;
    // The positive sign that everything about `web` was handled: a release failing
    // after it was fixed is told.
    crash_looping(&api, "later").await;
    let received = receiver
        .wait_for("later's failure", |r| count(r, "later", "failure") > 0)
        .await;
    let about_web: Vec<Value> = received
        .iter()
        .map(Received::json)
        .filter(|b| b["release"]["name"] == "web")
        .collect();
    let told: Vec<&Value> = about_web.iter().map(|b| &b["event"]).collect();
    assert_eq!(told, [&json!("cancellation")], "{about_web:#?}");
    assert_eq!(about_web[0]["reason"], "HealthCheckCanceled");
    assert_eq!(about_web[0]["severity"], "error");
    ns.delete().await;
}

#[tokio::test]
async fn the_setting_applies_without_a_restart_and_an_invalid_one_keeps_the_last() {
    let (client, ns, api) = eng::setup("notify-live").await;
    let receiver = Receiver::start().await;
    let _engine = eng::start(&client, &ns.name).await;
    // Written once the engine runs, naming a Secret that does not exist yet.
    let valid = format!(
        "providers:\n- {{name: hook, type: generic, secretRef: {{name: hook}}}}\nroutes:\n- providers: [hook]\n{FAST_RETRY}"
    );
    configure(&client, &ns.name, &valid).await;
    let unavailable = setting_event(&client, &ns.name, "ProviderUnavailable").await;
    assert!(
        unavailable.contains("provider hook: Secret hook does not exist"),
        "{unavailable}"
    );
    webhook_secret(&client, &ns.name, "hook", &receiver.url("/hook")).await;
    notifications_ready(&client, &ns.name).await;
    crash_looping(&api, "first").await;
    receiver
        .wait_for("first's failure", |r| count(r, "first", "failure") > 0)
        .await;

    // A typo: reported, and the last valid setting stays in force.
    Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .patch(
            CONFIGMAP,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"data": {"config.yaml": "providers: [{name: hook, type: pager}]"}}),
            ),
        )
        .await
        .unwrap();
    let invalid = setting_event(&client, &ns.name, "InvalidConfig").await;
    assert!(
        invalid.contains("pager") && invalid.contains("the last valid setting stays in force"),
        "{invalid}"
    );
    crash_looping(&api, "second").await;
    let received = receiver
        .wait_for("second's failure", |r| count(r, "second", "failure") > 0)
        .await;
    assert_eq!(received.len(), 2, "{received:#?}");
    ns.delete().await;
}

#[tokio::test]
async fn a_release_outside_the_routes_sends_nothing() {
    let (client, ns, api) = eng::setup("notify-routes").await;
    let receiver = Receiver::start().await;
    webhook_secret(&client, &ns.name, "hook", &receiver.url("/hook")).await;
    let ns_name = ns.name.as_str();
    // `web` is neither an `api-*` release here, nor in the namespace whose `web` is routed.
    configure(
        &client,
        ns_name,
        &format!(
            "providers:\n- {{name: hook, type: generic, secretRef: {{name: hook}}}}\nroutes:\n- {{providers: [hook], namespaces: [{ns_name}], names: [\"api-*\"]}}\n- {{providers: [hook], namespaces: [elsewhere], names: [web]}}\n- {{providers: [hook], namespaces: [{ns_name}], names: [web], severities: [recovery]}}\n{FAST_RETRY}"
        ),
    )
    .await;
    let _engine = eng::start(&client, ns_name).await;
    notifications_ready(&client, ns_name).await;

    crash_looping(&api, "web").await;
    wait_for(&api, "web", "its failure written", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    // The positive sign: a release that matches, failing after `web` did, was told
    // (messages go out in order).
    crash_looping(&api, "api-gateway").await;
    let received = receiver
        .wait_for("api-gateway's failure", |r| {
            count(r, "api-gateway", "failure") > 0
        })
        .await;
    assert_eq!(count(&received, "web", "failure"), 0, "{received:#?}");
    assert_eq!(received.len(), 1, "{received:#?}");
    ns.delete().await;
}

/// The real controller process, logging at debug: a webhook answering 500 twice gets the
/// message on the third attempt; one that refuses it (403) and one that cannot be
/// reached are logged by provider name; no webhook URL, nor any part of one that carries
/// its credential, appears in the log.
#[tokio::test]
async fn a_webhook_that_fails_twice_gets_the_message_and_no_url_is_ever_logged() {
    let (client, ns, api) = eng::setup("notify-retry").await;
    let flaky = "/services/T0FLAKY/B0FLAKY/flaky-secret-token";
    let refusing = "/services/T0REFUSE/B0REFUSE/refused-secret-token";
    let receiver = Receiver::answering(&[(flaky, &[500, 500]), (refusing, &[403; 10])]).await;
    // A port nothing listens on: bound, then closed.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let unreachable = format!("http://127.0.0.1:{closed}/services/T0DEAD/B0DEAD/dead-secret-token");
    let addresses = BTreeMap::from([
        ("flaky-hook", receiver.url(flaky)),
        ("refusing-hook", receiver.url(refusing)),
        ("unreachable-hook", unreachable.clone()),
    ]);
    for (name, address) in &addresses {
        webhook_secret(&client, &ns.name, name, address).await;
    }
    configure(
        &client,
        &ns.name,
        &format!(
            "providers:
- {{name: flaky, type: generic, secretRef: {{name: flaky-hook}}}}
- {{name: refusing, type: slack, secretRef: {{name: refusing-hook}}}}
- {{name: unreachable, type: msteams, secretRef: {{name: unreachable-hook}}}}
routes:
- providers: [flaky, refusing, unreachable]
{FAST_RETRY}"
        ),
    )
    .await;
    let controller = Controller::start_with_env(
        &["--namespace", &ns.name, "--lease-namespace", &ns.name],
        &[("WHEELHOUSE_LOG", "debug,kube=info,tower=info,h2=info")],
    );
    notifications_ready(&client, &ns.name).await;

    crash_looping(&api, "web").await;
    let received = receiver
        .wait_for("the flaky webhook's success", |r| {
            r.iter().any(|x| x.path == flaky && x.answered == 200)
        })
        .await;
    let at_flaky: Vec<&Received> = received.iter().filter(|r| r.path == flaky).collect();
    let answers: Vec<u16> = at_flaky.iter().map(|r| r.answered).collect();
    assert_eq!(
        answers,
        [500, 500, 200],
        "three attempts, the last delivered"
    );
    assert!(
        at_flaky.iter().all(|r| r.body == at_flaky[0].body),
        "every attempt sends the same message"
    );
    assert_eq!(at_flaky[0].json()["event"], "failure");
    // A 403 is the receiver refusing the message: not tried again.
    assert_eq!(
        received.iter().filter(|r| r.path == refusing).count(),
        1,
        "{received:#?}"
    );

    // The unreachable one gives up after its attempts; then everything is logged.
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    let log = loop {
        let log = controller.log();
        let gave_up = log
            .lines()
            .any(|l| l.contains("giving up") && l.contains("\"provider\":\"unreachable\""));
        if gave_up {
            break log;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the unreachable webhook was never given up on; log:\n{log}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(
        log.lines()
            .any(|l| l.contains("\"provider\":\"refusing\"") && l.contains("answered 403")),
        "the refusal is logged by provider name with its status:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("\"provider\":\"flaky\"") && l.contains("answered 500")),
        "failed attempts are logged (at debug) by provider name:\n{log}"
    );
    for secret in [
        "flaky-secret-token",
        "refused-secret-token",
        "dead-secret-token",
        "T0FLAKY",
        "T0REFUSE",
        "T0DEAD",
    ] {
        assert!(
            !log.contains(secret),
            "{secret} (part of a webhook URL) is in the controller's log:\n{}",
            log.lines()
                .filter(|l| l.contains(secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    for address in addresses.values() {
        assert!(!log.contains(address.as_str()));
    }
    ns.delete().await;
}

/// Object drift (a Deployment scaled by hand) is told once, as drift; with driftDetection
/// enabled its correction is told instead.
#[tokio::test]
async fn drift_and_a_revision_of_another_tool_are_told_as_drift() {
    let (client, ns, api) = eng::setup("notify-drift").await;
    let receiver = generic_hook(&client, &ns.name).await;
    let _engine = eng::start(&client, &ns.name).await;
    notifications_ready(&client, &ns.name).await;
    for (name, mode) in [("warned", "warn"), ("fixed", "enabled")] {
        let spec = json!({"values": {"replicaCount": 1}, "driftDetection": {"mode": mode}});
        api.create(&PostParams::default(), &webapp(name, spec))
            .await
            .unwrap();
        wait_for(&api, name, "installed", ready).await;
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns.name)
            .patch(
                name,
                &kube::api::PatchParams {
                    field_manager: Some("kubectl".into()),
                    ..Default::default()
                },
                &kube::api::Patch::Merge(json!({"spec": {"replicas": 3}})),
            )
            .await
            .unwrap();
    }
    let received = receiver
        .wait_for("both releases' drift", |r| {
            count(r, "warned", "drift") > 0 && count(r, "fixed", "drift") > 0
        })
        .await;
    let told = |name: &str| -> Vec<Value> {
        received
            .iter()
            .map(Received::json)
            .filter(|b| b["release"]["name"] == name)
            .collect()
    };
    let warned = told("warned");
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert_eq!(warned[0]["reason"], "Drifted");
    assert!(
        warned[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Deployment/warned: /spec/replicas")),
        "{warned:#?}"
    );
    let fixed = told("fixed");
    assert_eq!(fixed.len(), 1, "{fixed:#?}");
    assert_eq!(fixed[0]["reason"], "DriftCorrected");
    ns.delete().await;
}

/// A value from a Secret holding every character a message escapes (`"`, `\`, `<`, `&`,
/// `>`, a non-ASCII letter), quoted by the API server as Go quotes it (`Invalid value:
/// "esc \"S3cretQ\" \\ ..."`): masked in Ready, the whole status (history included),
/// Events, Helm's stored description, every webhook payload and the controller's log.
#[tokio::test]
async fn a_secret_value_escaped_by_the_api_server_is_masked_everywhere() {
    let (client, ns, api) = eng::setup("notify-mask").await;
    let receiver = generic_hook(&client, &ns.name).await;
    let controller = Controller::start(&["-n", &ns.name, "--lease-namespace", &ns.name]);
    notifications_ready(&client, &ns.name).await;
    let secret = r#"esc "S3cretQ" \ value <&> é"#;
    let values = format!("behavior: {}\n", serde_json::to_string(secret).unwrap());
    let holder: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "stringData": {"values.yaml": values},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &holder)
        .await
        .unwrap();
    let spec = json!({
        "valuesFrom": [{"kind": "Secret", "name": "creds"}],
        "install": {"remediation": {"retries": 1}},
    });
    api.create(&PostParams::default(), &eng::release("web", "shared", spec))
        .await
        .unwrap();
    let failed = wait_for(&api, "web", "refused by the API server, twice", |h| {
        h.status.as_ref().is_some_and(|s| s.install_failures >= 2)
            && is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let leaked = |what: &str, text: &str| {
        assert!(!text.contains("S3cretQ"), "the value is in {what}: {text}");
    };
    let ready = eng::condition(&failed, "Ready");
    let message = failed.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("Invalid value: \"***\""),
        "{message} ({ready:?})"
    );
    leaked(
        "the status",
        &serde_json::to_string(&failed.status).unwrap(),
    );
    for event in eng::events_of(&client, &ns.name, "web").await {
        leaked("an Event", &event);
    }
    let history = eng::helm_history(&ns.name, "web");
    assert!(
        history.iter().any(|(_, _, d)| d.contains("***")),
        "{history:?}"
    );
    for (_, _, description) in &history {
        leaked("Helm's description", description);
    }
    // The failure reached the webhook (the positive sign), masked.
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    while count(&receiver.received(), "web", "failure") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no failure message");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for body in receiver.received() {
        leaked("a webhook payload", &body.body);
    }
    leaked("the controller's log", &controller.log());
    ns.delete().await;
}

/// Flux's own example as one route: `charts: [webapp]` with `severities: [info]` hears
/// each successful install and upgrade of a webapp release, in either namespace the engine
/// covers, and nothing of another chart's release nor of failures; a route without
/// `severities` never gets info.
#[tokio::test]
async fn a_chart_route_hears_each_successful_change_of_that_chart_in_any_namespace() {
    let (client, ns, api) = eng::setup("notify-info").await;
    let other = support::TestNamespace::new(&client, "notify-info-b").await;
    let other_api: Api<HelmRelease> = Api::namespaced(client.clone(), &other.name);
    let receiver = Receiver::start().await;
    webhook_secret(&client, &ns.name, "team", &receiver.url("/team")).await;
    webhook_secret(&client, &ns.name, "oncall", &receiver.url("/oncall")).await;
    configure(
        &client,
        &ns.name,
        &format!(
            "providers:\n- {{name: team, type: generic, secretRef: {{name: team}}}}\n- {{name: oncall, type: generic, secretRef: {{name: oncall}}}}\nroutes:\n- {{providers: [team], charts: [webapp], severities: [info]}}\n- {{providers: [oncall]}}\n{FAST_RETRY}"
        ),
    )
    .await;
    // One engine over both namespaces, for the releases labelled into its shard.
    let (mut config, cache) = eng::config(&ns.name, &format!("test-engine-{}", ns.name));
    config.coverage = wheelhouse::engine::Coverage::new(
        wheelhouse::cluster::client::Scope::All,
        Some(ns.name.clone()),
    );
    let _engine = eng::start_leading(&client, config, cache).await;
    notifications_ready(&client, &ns.name).await;
    let in_shard = |mut hr: HelmRelease| {
        hr.metadata
            .labels
            .get_or_insert_default()
            .insert(wheelhouse::engine::SHARD_LABEL.into(), ns.name.clone());
        hr
    };
    let create = |api: &Api<HelmRelease>, hr: HelmRelease| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &hr).await.unwrap() }
    };
    create(&api, in_shard(webapp("web", json!({})))).await;
    create(&other_api, in_shard(webapp("shop", json!({})))).await;
    create(&api, in_shard(eng::release("greeter", "hello", json!({})))).await;
    for (api, name) in [(&api, "web"), (&other_api, "shop"), (&api, "greeter")] {
        wait_for(api, name, "installed", ready).await;
    }
    set_values(&api, "web", json!({"message": "v2"})).await;
    set_values(&other_api, "shop", json!({"message": "v2"})).await;
    set_values(&api, "greeter", json!({"message": "v2"})).await;
    for (api, name) in [(&api, "web"), (&other_api, "shop"), (&api, "greeter")] {
        wait_for(api, name, "upgraded", |h| {
            ready(h)
                && h.status
                    .as_ref()
                    .and_then(|s| s.history.first())
                    .is_some_and(|s| s.version == 2)
        })
        .await;
    }
    // The positive sign: both webapp upgrades were told.
    let received = receiver
        .wait_for("the two webapp upgrades", |r| {
            bodies(r, "/team")
                .iter()
                .filter(|b| b["reason"] == "UpgradeSucceeded")
                .count()
                == 2
        })
        .await;
    let team = bodies(&received, "/team");
    let told: std::collections::BTreeSet<(String, String, String)> = team
        .iter()
        .map(|b| {
            assert_eq!(b["event"], "info", "{b:#}");
            assert_eq!(b["severity"], "info", "{b:#}");
            assert_eq!(b["chart"]["name"], "webapp", "{b:#}");
            (
                b["release"]["namespace"].as_str().unwrap().to_owned(),
                b["release"]["name"].as_str().unwrap().to_owned(),
                b["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: std::collections::BTreeSet<(String, String, String)> = [
        (ns.name.as_str(), "web", "InstallSucceeded"),
        (ns.name.as_str(), "web", "UpgradeSucceeded"),
        (other.name.as_str(), "shop", "InstallSucceeded"),
        (other.name.as_str(), "shop", "UpgradeSucceeded"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    // One message per change: four in all, none for greeter.
    assert_eq!(team.len(), 4, "{team:#?}");
    assert_eq!(told, expected);
    let upgrade = team
        .iter()
        .find(|b| b["reason"] == "UpgradeSucceeded" && b["release"]["name"] == "web")
        .unwrap();
    assert!(
        upgrade["message"]
            .as_str()
            .unwrap()
            .starts_with("Helm release web upgraded (chart webapp "),
        "{upgrade:#}"
    );
    assert_eq!(upgrade["helmRevision"], 2);
    // The route without severities gets no info at all.
    assert!(bodies(&received, "/oncall").is_empty(), "{received:#?}");
    other.delete().await;
    ns.delete().await;
}
