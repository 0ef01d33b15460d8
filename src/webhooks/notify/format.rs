//! What each provider type is sent, as JSON.
//!
//! - `slack`: a Slack incoming-webhook message: `text` says what happened in words, and
//!   one attachment (coloured by severity) carries the release's message and facts.
//! - `msteams`: the Adaptive Card message Flux's msteams provider posts to a Teams
//!   Workflows webhook (`type: message`, one `application/vnd.microsoft.card.adaptive`
//!   attachment: the object as `kind/name.namespace`, the message, a fact set).
//! - `generic`: wheelhouse's own document, every field named (docs/user-guide/notifications.md, "Providers").
//! - `flux`: Flux's `event.Event` as notification-controller's event receiver reads it;
//!   metadata keys carry the involved object's group (`wheelhouse.dev/revision`,
//!   `.../token`), the only ones the receiver keeps besides its own.

use serde_json::{Map, Value, json};

use super::{Notification, ProviderType, Severity};
use crate::api::{GROUP, KIND, VERSION};

/// Flux's `reportingController`, and the name the messages go by.
pub const CONTROLLER: &str = "wheelhouse";

pub fn body(type_: ProviderType, n: &Notification) -> Value {
    match type_ {
        ProviderType::Slack => slack(n),
        ProviderType::Msteams => msteams(n),
        ProviderType::Generic => generic(n),
        ProviderType::Flux => flux(n),
    }
}

/// `helmrelease/name.namespace`, as Flux's providers name an object.
fn object_name(n: &Notification) -> String {
    format!("{}/{}.{}", KIND.to_lowercase(), n.name, n.namespace)
}

/// What happened, in words (status is never told by colour alone).
fn headline(n: &Notification) -> String {
    let what = match n.severity {
        Severity::Failure => "failed",
        Severity::Recovery => "recovered",
        Severity::Cancellation => "health check canceled",
        Severity::Drift => "drifted",
        Severity::Info => "changed",
        Severity::Freeze if n.reason == crate::api::conditions::reason::THAWED => "thawed",
        Severity::Freeze => "frozen",
    };
    format!("{KIND} {}/{} {what} ({})", n.namespace, n.name, n.reason)
}

/// The facts every provider shows, in a stable order.
fn facts(n: &Notification) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("event", n.severity.as_str().to_owned()),
        ("reason", n.reason.clone()),
    ];
    if let Some(v) = &n.chart_version {
        out.push(("revision", v.clone()));
    }
    if let Some(v) = &n.app_version {
        out.push(("app-version", v.clone()));
    }
    if let Some(v) = n.helm_revision {
        out.push(("helm-revision", v.to_string()));
    }
    out
}

/// Seconds precision in UTC, as Kubernetes' `metav1.Time` is written.
fn timestamp(n: &Notification) -> String {
    n.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Slack reads `&`, `<` and `>` as markup in text.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn slack(n: &Notification) -> Value {
    let color = match n.severity {
        Severity::Failure => "danger",
        Severity::Recovery | Severity::Info => "good",
        Severity::Cancellation | Severity::Drift | Severity::Freeze => "warning",
    };
    let author = object_name(n);
    let first_line = n.message.lines().next().unwrap_or_default();
    let fields: Vec<Value> = facts(n)
        .into_iter()
        .map(|(k, v)| json!({"title": k, "value": slack_escape(&v), "short": true}))
        .collect();
    json!({
        "username": CONTROLLER,
        "text": slack_escape(&headline(n)),
        "attachments": [{
            "fallback": slack_escape(&format!("{author}: {first_line}")),
            "color": color,
            "author_name": author,
            "text": slack_escape(&n.message),
            "mrkdwn_in": ["text"],
            "fields": fields,
        }],
    })
}

fn msteams(n: &Notification) -> Value {
    let mut message = json!({"type": "TextBlock", "text": n.message, "wrap": true});
    match n.severity {
        Severity::Recovery | Severity::Info => message["color"] = json!("good"),
        _ => message["color"] = json!("attention"),
    }
    let facts: Vec<Value> = facts(n)
        .into_iter()
        .map(|(k, v)| json!({"title": k, "value": v}))
        .collect();
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "msteams": {"width": "Full"},
                "body": [{
                    "type": "Container",
                    "items": [
                        {"type": "TextBlock", "text": object_name(n), "size": "large", "weight": "bolder", "wrap": true},
                        {"type": "TextBlock", "text": headline(n), "weight": "bolder", "wrap": true},
                        message,
                        {"type": "FactSet", "facts": facts},
                    ],
                }],
            },
        }],
    })
}

fn generic(n: &Notification) -> Value {
    json!({
        "event": n.severity.as_str(),
        "severity": n.severity.flux_severity(),
        "release": {
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": KIND,
            "namespace": n.namespace,
            "name": n.name,
            "uid": n.uid,
            "generation": n.generation,
        },
        "reason": n.reason,
        "message": n.message,
        "summary": headline(n),
        "timestamp": timestamp(n),
        "chart": {
            "name": n.chart_name,
            "version": n.chart_version,
            "appVersion": n.app_version,
        },
        "helmRevision": n.helm_revision,
        "configDigest": n.config_digest,
        "reportingController": CONTROLLER,
        "reportingInstance": n.instance,
    })
}

fn flux(n: &Notification) -> Value {
    let key = |k: &str| format!("{GROUP}/{k}");
    let mut metadata = Map::new();
    if let Some(v) = &n.chart_version {
        metadata.insert(key("revision"), json!(v));
    }
    if let Some(v) = &n.config_digest {
        metadata.insert(key("token"), json!(v));
    }
    if let Some(v) = &n.app_version {
        metadata.insert(key("app-version"), json!(v));
    }
    metadata.insert(key("event"), json!(n.severity.as_str()));
    let mut involved = json!({
        "kind": KIND,
        "namespace": n.namespace,
        "name": n.name,
        "uid": n.uid,
        "apiVersion": format!("{GROUP}/{VERSION}"),
    });
    if let Some(rv) = &n.resource_version {
        involved["resourceVersion"] = json!(rv);
    }
    let mut event = json!({
        "involvedObject": involved,
        "severity": n.severity.flux_severity(),
        "timestamp": timestamp(n),
        "message": n.message,
        "reason": n.reason,
        "metadata": metadata,
        "reportingController": CONTROLLER,
    });
    // Flux leaves `reportingInstance` out when it has none.
    if !n.instance.is_empty() {
        event["reportingInstance"] = json!(n.instance);
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification(severity: Severity) -> Notification {
        Notification {
            severity,
            namespace: "payments".into(),
            name: "api".into(),
            uid: "0b0e-uid".into(),
            resource_version: Some("1234".into()),
            generation: Some(2),
            reason: "HealthCheckFailed".into(),
            message: "pod api-1 is in CrashLoopBackOff <restarts & more>\nsecond line".into(),
            timestamp: "2026-11-24T10:11:12.345Z".parse().unwrap(),
            chart_version: Some("1.2.3".into()),
            config_digest: Some("sha256:abc".into()),
            chart_name: Some("api".into()),
            app_version: Some("4.5".into()),
            helm_revision: Some(7),
            instance: "controller-0".into(),
        }
    }

    #[test]
    fn flux_gets_its_event_type_with_the_objects_group_on_metadata() {
        let got = body(ProviderType::Flux, &notification(Severity::Failure));
        let expected = json!({
            "involvedObject": {
                "kind": "HelmRelease",
                "namespace": "payments",
                "name": "api",
                "uid": "0b0e-uid",
                "apiVersion": "wheelhouse.dev/v1alpha1",
                "resourceVersion": "1234",
            },
            "severity": "error",
            "timestamp": "2026-11-24T10:11:12Z",
            "message": "pod api-1 is in CrashLoopBackOff <restarts & more>\nsecond line",
            "reason": "HealthCheckFailed",
            "metadata": {
                "wheelhouse.dev/revision": "1.2.3",
                "wheelhouse.dev/token": "sha256:abc",
                "wheelhouse.dev/app-version": "4.5",
                "wheelhouse.dev/event": "failure",
            },
            "reportingController": "wheelhouse",
            "reportingInstance": "controller-0",
        });
        assert_eq!(got, expected);
        let recovered = body(ProviderType::Flux, &notification(Severity::Recovery));
        assert_eq!(recovered["severity"], "info");
    }

    #[test]
    fn slack_says_what_happened_in_words_and_escapes_markup() {
        let got = body(ProviderType::Slack, &notification(Severity::Failure));
        assert_eq!(
            got["text"],
            "HelmRelease payments/api failed (HealthCheckFailed)"
        );
        let a = &got["attachments"][0];
        assert_eq!(a["color"], "danger");
        assert_eq!(a["author_name"], "helmrelease/api.payments");
        assert_eq!(
            a["text"],
            "pod api-1 is in CrashLoopBackOff &lt;restarts &amp; more&gt;\nsecond line"
        );
        assert_eq!(
            a["fallback"],
            "helmrelease/api.payments: pod api-1 is in CrashLoopBackOff &lt;restarts &amp; more&gt;"
        );
        assert_eq!(
            a["fields"][0],
            json!({"title": "event", "value": "failure", "short": true})
        );
        assert_eq!(
            a["fields"][2],
            json!({"title": "revision", "value": "1.2.3", "short": true})
        );
        let colours: Vec<Value> = [Severity::Recovery, Severity::Cancellation, Severity::Drift]
            .into_iter()
            .map(|s| body(ProviderType::Slack, &notification(s))["attachments"][0]["color"].clone())
            .collect();
        assert_eq!(colours, [json!("good"), json!("warning"), json!("warning")]);
    }

    #[test]
    fn msteams_gets_flux_s_adaptive_card() {
        let got = body(ProviderType::Msteams, &notification(Severity::Cancellation));
        assert_eq!(got["type"], "message");
        let attachment = &got["attachments"][0];
        assert_eq!(
            attachment["contentType"],
            "application/vnd.microsoft.card.adaptive"
        );
        let card = &attachment["content"];
        assert_eq!(card["type"], "AdaptiveCard");
        assert_eq!(card["version"], "1.4");
        assert_eq!(
            card["$schema"],
            "http://adaptivecards.io/schemas/adaptive-card.json"
        );
        let items = card["body"][0]["items"].as_array().unwrap();
        assert_eq!(items[0]["text"], "helmrelease/api.payments");
        assert_eq!(
            items[1]["text"],
            "HelmRelease payments/api health check canceled (HealthCheckFailed)"
        );
        assert_eq!(items[2]["color"], "attention");
        assert_eq!(items[3]["type"], "FactSet");
        assert_eq!(
            items[3]["facts"][0],
            json!({"title": "event", "value": "cancellation"})
        );
    }

    #[test]
    fn generic_names_every_field() {
        let got = body(ProviderType::Generic, &notification(Severity::Recovery));
        assert_eq!(got["event"], "recovery");
        assert_eq!(got["severity"], "info");
        assert_eq!(
            got["release"],
            json!({"apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease", "namespace": "payments", "name": "api", "uid": "0b0e-uid", "generation": 2})
        );
        assert_eq!(
            got["chart"],
            json!({"name": "api", "version": "1.2.3", "appVersion": "4.5"})
        );
        assert_eq!(got["helmRevision"], 7);
        assert_eq!(got["timestamp"], "2026-11-24T10:11:12Z");
        assert_eq!(got["reportingController"], "wheelhouse");
    }
}
