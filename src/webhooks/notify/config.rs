//! The notifications setting: key `config.yaml` of the ConfigMap
//! `wheelhouse-notifications` in the engine's namespace. Read strictly (an unknown field
//! is an error, so a misspelt `severitys:` never silently routes everything) and checked
//! as a whole before it replaces the setting in use.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{Error, Severity};
use crate::api::Duration;

/// The ConfigMap that holds the setting, in the namespace of the engine's Lease.
pub const CONFIGMAP: &str = "wheelhouse-notifications";
/// Its key.
pub const KEY: &str = "config.yaml";
/// The key of a provider's Secret that holds its address (Flux's Provider convention).
pub const ADDRESS_KEY: &str = "address";

/// The whole setting.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub providers: Vec<Provider>,
    #[serde(default)]
    pub routes: Vec<Route>,
    #[serde(default)]
    pub retry: Retry,
    /// How long one delivery attempt may take.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
}

/// Where messages go.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Provider {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: ProviderType,
    /// A Secret in the same namespace whose key `address` is the webhook URL.
    #[serde(default)]
    pub secret_ref: Option<SecretRef>,
    /// The URL itself, for endpoints that carry no credential (Flux's in-cluster event
    /// receiver). A Slack or Teams webhook URL is a credential: use `secretRef`.
    #[serde(default)]
    pub address: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub name: String,
}

/// The payload a provider is sent (`format.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// A Slack incoming webhook (or anything that accepts its JSON: Mattermost, ...).
    Slack,
    /// A Microsoft Teams webhook (Workflows), sent an Adaptive Card.
    Msteams,
    /// wheelhouse's own JSON document.
    Generic,
    /// Flux notification-controller's event receiver, sent Flux's `event.Event`.
    Flux,
}

impl ProviderType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slack => "slack",
            Self::Msteams => "msteams",
            Self::Generic => "generic",
            Self::Flux => "flux",
        }
    }
}

/// Which releases' events go to which providers. Every listed filter must match; an
/// absent or empty one matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Route {
    pub providers: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Globs on the HelmRelease name: `*` any run of characters, `?` one character.
    #[serde(default)]
    pub names: Vec<String>,
    /// Globs on the chart's name: only releases of those charts, in any namespace
    /// (unless `namespaces` says).
    #[serde(default)]
    pub charts: Vec<String>,
    /// What is sent: every severity but `info` when empty; `info` only when named.
    #[serde(default)]
    pub severities: Vec<Severity>,
}

/// How a message that could not be delivered is tried again: `attempts` in all, the
/// delay doubling from `initialDelay` up to `maxDelay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retry {
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    #[serde(default = "default_initial_delay")]
    pub initial_delay: Duration,
    #[serde(default = "default_max_delay")]
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: default_attempts(),
            initial_delay: default_initial_delay(),
            max_delay: default_max_delay(),
        }
    }
}

impl Retry {
    /// The delay after failed attempt number `attempt` (1 = the first).
    pub fn delay(&self, attempt: u32) -> std::time::Duration {
        let doubled = self
            .initial_delay
            .as_std()
            .saturating_mul(1 << attempt.saturating_sub(1).min(20));
        doubled.min(self.max_delay.as_std())
    }
}

fn default_attempts() -> u32 {
    5
}
fn default_initial_delay() -> Duration {
    Duration::from_secs(1)
}
fn default_max_delay() -> Duration {
    Duration::from_secs(30)
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

/// More attempts than this would keep one provider's queue blocked for too long.
const MAX_ATTEMPTS: u32 = 20;

/// What is wrong with the notification setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Yaml(#[from] crate::text::yaml::Error),
    #[error("a provider has no name")]
    UnnamedProvider,
    #[error("provider {0:?} is defined twice")]
    DuplicateProvider(String),
    #[error("provider {0:?} has both secretRef and address; give one")]
    SecretAndAddress(String),
    #[error("provider {0:?} needs secretRef (a Secret with key `{key}`) or address", key = ADDRESS_KEY)]
    NoAddress(String),
    #[error("provider {0:?}: secretRef has no name")]
    UnnamedSecret(String),
    /// The address itself is never quoted: it may be a credential.
    #[error("provider {0:?}: address is not an http:// or https:// URL")]
    BadAddress(String),
    #[error("route {0} names no provider")]
    RouteWithoutProvider(usize),
    #[error("route {route} names provider {provider:?}, which is not defined")]
    UnknownProvider { route: usize, provider: String },
    #[error("retry.attempts must be between 1 and {max}, not {0}", max = MAX_ATTEMPTS)]
    Attempts(u32),
    #[error("retry.initialDelay ({initial}) is longer than retry.maxDelay ({max})")]
    Delays { initial: Duration, max: Duration },
    #[error("timeout must be more than 0s")]
    ZeroTimeout,
}

impl Config {
    /// Reads and checks `config.yaml`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let invalid = |reason: ConfigError| Error::InvalidConfig { reason };
        let config: Self = crate::text::yaml::from_str(text).map_err(|e| invalid(e.into()))?;
        config.check().map_err(invalid)?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let mut names = BTreeSet::new();
        for p in &self.providers {
            if p.name.is_empty() {
                return Err(ConfigError::UnnamedProvider);
            }
            if !names.insert(p.name.as_str()) {
                return Err(ConfigError::DuplicateProvider(p.name.clone()));
            }
            match (&p.secret_ref, &p.address) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError::SecretAndAddress(p.name.clone()));
                }
                (None, None) => {
                    return Err(ConfigError::NoAddress(p.name.clone()));
                }
                (Some(s), None) if s.name.is_empty() => {
                    return Err(ConfigError::UnnamedSecret(p.name.clone()));
                }
                // The address itself is never quoted: it may be a credential.
                (None, Some(a)) if super::address::parse_address(a).is_none() => {
                    return Err(ConfigError::BadAddress(p.name.clone()));
                }
                _ => {}
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            let n = i + 1;
            if r.providers.is_empty() {
                return Err(ConfigError::RouteWithoutProvider(n));
            }
            if let Some(unknown) = r.providers.iter().find(|p| !names.contains(p.as_str())) {
                return Err(ConfigError::UnknownProvider {
                    route: n,
                    provider: unknown.clone(),
                });
            }
        }
        let retry = &self.retry;
        if retry.attempts == 0 || retry.attempts > MAX_ATTEMPTS {
            return Err(ConfigError::Attempts(retry.attempts));
        }
        if retry.initial_delay > retry.max_delay {
            return Err(ConfigError::Delays {
                initial: retry.initial_delay,
                max: retry.max_delay,
            });
        }
        if self.timeout.as_std().is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        Ok(())
    }

    /// The Secrets the providers name.
    pub fn secret_names(&self) -> BTreeSet<String> {
        self.providers
            .iter()
            .filter_map(|p| p.secret_ref.as_ref().map(|s| s.name.clone()))
            .collect()
    }

    /// The providers that should receive an event of `severity` about the release
    /// `namespace/name`, each once however many routes name it, in the order defined.
    pub fn providers_for(
        &self,
        namespace: &str,
        name: &str,
        chart: Option<&str>,
        severity: Severity,
    ) -> Vec<&Provider> {
        let wanted: BTreeSet<&str> = self
            .routes
            .iter()
            .filter(|r| r.matches(namespace, name, chart, severity))
            .flat_map(|r| r.providers.iter().map(String::as_str))
            .collect();
        self.providers
            .iter()
            .filter(|p| wanted.contains(p.name.as_str()))
            .collect()
    }
}

impl Route {
    pub fn matches(
        &self,
        namespace: &str,
        name: &str,
        chart: Option<&str>,
        severity: Severity,
    ) -> bool {
        let asked = match severity {
            // Successes are many: off unless asked for.
            Severity::Info => self.severities.contains(&severity),
            _ => self.severities.is_empty() || self.severities.contains(&severity),
        };
        asked
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
            && (self.names.is_empty() || self.names.iter().any(|g| glob(g, name)))
            && (self.charts.is_empty()
                || chart.is_some_and(|c| self.charts.iter().any(|g| glob(g, c))))
    }
}

/// Whether `text` matches `pattern`, where `*` is any run of characters (none included)
/// and `?` exactly one; everything else stands for itself.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Classic two-pointer match with backtracking to the last `*`: linear in practice,
    // never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
providers:
  - name: oncall-slack
    type: slack
    secretRef: {name: oncall-slack-webhook}
  - name: flux
    type: flux
    address: http://notification-controller.flux-system.svc.cluster.local./
routes:
  - providers: [oncall-slack]
    namespaces: [payments]
    names: ["api-*"]
    severities: [failure, recovery, cancellation, drift]
  - providers: [flux, oncall-slack]
"#;

    #[test]
    fn the_documented_example_reads_with_defaults_filled_in() {
        let c = Config::parse(EXAMPLE).unwrap();
        assert_eq!(c.providers.len(), 2);
        assert_eq!(c.providers[0].type_, ProviderType::Slack);
        assert_eq!(
            c.providers[0].secret_ref,
            Some(SecretRef {
                name: "oncall-slack-webhook".into()
            })
        );
        assert_eq!(c.routes[0].severities.len(), 4);
        assert!(c.routes[1].namespaces.is_empty() && c.routes[1].severities.is_empty());
        assert_eq!(c.retry, Retry::default());
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(
            c.secret_names(),
            BTreeSet::from(["oncall-slack-webhook".to_owned()])
        );
        // An empty document is a setting with nothing in it, not an error.
        assert_eq!(Config::parse("").unwrap().providers, vec![]);
    }

    #[test]
    fn retry_and_timeout_can_be_set_and_the_delay_doubles_up_to_its_cap() {
        let c = Config::parse(
            "retry: {attempts: 3, initialDelay: 100ms, maxDelay: 250ms}\ntimeout: 2s\n",
        )
        .unwrap();
        assert_eq!(c.retry.attempts, 3);
        let delays: Vec<u128> = (1..=4).map(|a| c.retry.delay(a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 250, 250]);
        assert_eq!(c.timeout, Duration::from_secs(2));
        let default: Vec<u64> = (1..=6)
            .map(|a| Retry::default().delay(a).as_secs())
            .collect();
        assert_eq!(default, [1, 2, 4, 8, 16, 30]);
        assert_eq!(Retry::default().delay(u32::MAX).as_secs(), 30);
    }

    #[test]
    fn invalid_settings_say_what_is_wrong_without_quoting_an_address() {
        let secret_url = "https://hooks.example/services/T0/B0/s3cr3t";
        let cases: Vec<(String, &str)> = vec![
            ("providers: [{name: a, type: pager, address: http://x/}]".into(), "pager"),
            ("providers: [{name: a, type: slack}]".into(), "needs secretRef"),
            (
                "providers: [{name: a, type: slack, address: http://x/, secretRef: {name: s}}]"
                    .into(),
                "both secretRef and address",
            ),
            (
                "providers: [{name: a, type: slack, address: http://x/}, {name: a, type: flux, address: http://y/}]"
                    .into(),
                "defined twice",
            ),
            (
                "providers: [{name: a, type: slack, address: http://x/}]\nroutes: [{providers: [b]}]"
                    .into(),
                "route 1 names provider \"b\"",
            ),
            ("routes: [{providers: []}]".into(), "route 1 names no provider"),
            (
                "providers: [{name: a, type: slack, address: http://x/}]\nroutes: [{providers: [a], severities: [panic]}]"
                    .into(),
                "panic",
            ),
            (
                "providers: [{name: a, type: slack, address: http://x/}]\nroutes: [{providers: [a], severitys: [failure]}]"
                    .into(),
                "severitys",
            ),
            ("retry: {attempts: 0}".into(), "retry.attempts"),
            ("retry: {initialDelay: 1m, maxDelay: 1s}".into(), "initialDelay"),
            ("timeout: 0s".into(), "timeout"),
            ("timeout: soon".into(), "invalid duration"),
            (
                format!("providers: [{{name: a, type: slack, address: \"{secret_url} x\"}}]"),
                "not an http",
            ),
            (
                "providers: [{name: a, type: slack, address: \"ftp://files/\"}]".into(),
                "not an http",
            ),
            ("providers: {name: a}".into(), "invalid type"),
        ];
        for (text, says) in cases {
            let err = Config::parse(&text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}\n→ {err}\n(expected {says:?})");
            assert!(!err.contains("s3cr3t"), "the address leaked: {err}");
        }
    }

    #[test]
    fn routes_match_namespace_name_glob_and_severity() {
        let c = Config::parse(EXAMPLE).unwrap();
        let route = &c.routes[0];
        let cases = [
            ("payments", "api-gateway", Severity::Failure, true),
            ("payments", "api-", Severity::Recovery, true),
            ("payments", "web", Severity::Failure, false),
            ("shop", "api-gateway", Severity::Failure, false),
            ("payments", "api-gateway", Severity::Drift, true),
        ];
        for (ns, name, severity, expected) in cases {
            assert_eq!(
                route.matches(ns, name, None, severity),
                expected,
                "{ns}/{name} {severity:?}"
            );
        }
        let only_failures = Route {
            providers: vec!["x".into()],
            namespaces: vec![],
            names: vec![],
            charts: vec![],
            severities: vec![Severity::Failure],
        };
        assert!(only_failures.matches("any", "thing", None, Severity::Failure));
        assert!(!only_failures.matches("any", "thing", None, Severity::Recovery));
        // A provider named by two matching routes is sent the message once.
        let names = |ns, name| {
            c.providers_for(ns, name, None, Severity::Failure)
                .iter()
                .map(|p| p.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("payments", "api-a"), ["oncall-slack", "flux"]);
        assert_eq!(names("shop", "web"), ["oncall-slack", "flux"]);
        let narrow = Config::parse(
            "providers: [{name: a, type: generic, address: http://x/}]\nroutes: [{providers: [a], namespaces: [payments]}]",
        )
        .unwrap();
        assert!(
            narrow
                .providers_for("shop", "web", None, Severity::Failure)
                .is_empty()
        );
    }

    /// Flux's own example: the frontend team hears of every new version of the frontend
    /// chart, in any namespace, and of nothing else; a route that does not ask for info
    /// never gets it.
    #[test]
    fn info_goes_only_to_routes_that_ask_for_it_filtered_by_chart() {
        let c = Config::parse(
            "providers: [{name: frontend, type: generic, address: http://x/}, {name: oncall, type: generic, address: http://y/}]\n\
             routes:\n\
             - {providers: [frontend], charts: [webapp], severities: [info]}\n\
             - {providers: [oncall]}",
        )
        .unwrap();
        let to = |ns, chart, severity| {
            c.providers_for(ns, "any", chart, severity)
                .iter()
                .map(|p| p.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(to("shop", Some("webapp"), Severity::Info), ["frontend"]);
        assert_eq!(to("payments", Some("webapp"), Severity::Info), ["frontend"]);
        assert!(to("shop", Some("api"), Severity::Info).is_empty());
        assert!(to("shop", None, Severity::Info).is_empty());
        // The chart filter narrows the frontend route for every severity.
        assert_eq!(to("shop", Some("api"), Severity::Failure), ["oncall"]);
        let web = Route {
            providers: vec!["x".into()],
            namespaces: vec![],
            names: vec![],
            charts: vec!["web*".into()],
            severities: vec![],
        };
        assert!(web.matches("a", "b", Some("webapp"), Severity::Failure));
        assert!(!web.matches("a", "b", Some("webapp"), Severity::Info));
    }

    #[test]
    fn globs_match_as_shells_do() {
        let cases = [
            ("api-*", "api-gateway", true),
            ("api-*", "api-", true),
            ("api-*", "web-api-x", false),
            ("*-db", "orders-db", true),
            ("*-db", "orders-db-2", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("**x", "x", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob(pattern, text), expected, "{pattern:?} ~ {text:?}");
        }
    }
}
