//! A fleet: several contexts of one kubeconfig, each reached with its own credentials
//! (`--contexts a,b,c`, `--all-contexts`, or `fleet:` in the config file). Which contexts
//! those are, a client per context built as kubectl builds it (its exec plugin, token or
//! certificate, never another context's), and how a failed connection reads: the
//! credentials refused, or the server not answering.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::Kubeconfig;

use super::client::{ConnectError, Target, connect};

/// How long one context may take to give a client and answer its first request before it
/// is named unreachable (the others never wait for it: each is asked on its own task).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Which contexts were asked for: named ones, or every context of the kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    Named(Vec<String>),
    All,
}

/// The kubeconfig a target reads (the file given, else `$KUBECONFIG`, then
/// `~/.kube/config`).
fn kubeconfig_of(path: Option<&Path>) -> Result<Kubeconfig, ConnectError> {
    Ok(match path {
        Some(path) => Kubeconfig::read_from(path)?,
        None => Kubeconfig::read()?,
    })
}

/// The contexts of `selection` in the kubeconfig, in the order named (the kubeconfig's for
/// `All`), each once; a name the kubeconfig does not have is refused with the names it has.
pub fn resolve(kubeconfig: Option<&Path>, selection: &Selection) -> Result<Vec<String>, String> {
    let config = kubeconfig_of(kubeconfig).map_err(|e| e.to_string())?;
    let known: Vec<String> = config.contexts.iter().map(|c| c.name.clone()).collect();
    let wanted = match selection {
        Selection::All => known.clone(),
        Selection::Named(names) => names.clone(),
    };
    let mut out: Vec<String> = Vec::new();
    for name in wanted {
        if !known.contains(&name) {
            return Err(format!(
                "no context {name:?} in the kubeconfig (it has: {})",
                known.join(", ")
            ));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    if out.is_empty() {
        return Err("the kubeconfig has no contexts".into());
    }
    Ok(out)
}

/// The API server each context of the kubeconfig names, by context: what a remote
/// release's kubeconfig is matched against, to read it there as the operator.
pub fn servers(kubeconfig: Option<&Path>) -> Vec<(String, String)> {
    let Ok(config) = kubeconfig_of(kubeconfig) else {
        return Vec::new();
    };
    config
        .contexts
        .iter()
        .filter_map(|named| {
            let cluster = &named.context.as_ref()?.cluster;
            let server = config
                .clusters
                .iter()
                .find(|c| &c.name == cluster)?
                .cluster
                .as_ref()?
                .server
                .clone()?;
            Some((named.name.clone(), server))
        })
        .collect()
}

/// The kubeconfig's current context, if it names one.
pub fn current_context(kubeconfig: Option<&Path>) -> Option<String> {
    kubeconfig_of(kubeconfig)
        .ok()?
        .current_context
        .filter(|c| !c.is_empty())
}

/// Why a context gives no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The server answered and refused the context's credentials (401, or 403 on the
    /// version every identity may read), or they could not be made (an exec plugin or a
    /// token file failed).
    Credentials(String),
    /// No answer (refused, timed out, unreachable).
    Unreachable(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Self::Credentials(m) | Self::Unreachable(m) => m,
        }
    }

    /// What a failed request says of the context: its credentials, or the server.
    pub fn of(error: &kube::Error) -> Self {
        let text = super::client::api_message(error);
        match error {
            kube::Error::Api(status) if status.code == 401 || status.code == 403 => {
                Self::Credentials(format!("credentials refused: {text}"))
            }
            kube::Error::Auth(_) => Self::Credentials(format!("credentials: {text}")),
            _ => Self::Unreachable(text),
        }
    }

    /// The same judgement on an error already turned into text (a watch's, which the
    /// engine reports as text): an answer of 401 or "Unauthorized" is the credentials.
    pub fn of_text(text: &str) -> Self {
        let refused = ["401", "Unauthorized", "Forbidden", "403"]
            .iter()
            .any(|w| text.contains(w));
        if refused {
            Self::Credentials(text.to_owned())
        } else {
            Self::Unreachable(text.to_owned())
        }
    }
}

/// A client for `context` made from `base`'s kubeconfig with that context's own
/// credentials, checked by asking the server for its version within [`ANSWER_WITHIN`];
/// with the context's default namespace.
pub async fn connect_context(base: &Target, context: &str) -> Result<(Client, String), Failure> {
    let mut target = base.clone();
    target.context = Some(context.to_owned());
    let made = tokio::time::timeout(ANSWER_WITHIN, async {
        let (client, namespace) = connect(&target).await.map_err(|e| match e {
            ConnectError::Kube(e) => Failure::of(&e),
            other => Failure::Credentials(other.to_string()),
        })?;
        client
            .apiserver_version()
            .await
            .map_err(|e| Failure::of(&e))?;
        Ok((client, namespace))
    })
    .await;
    made.unwrap_or_else(|_| {
        Err(Failure::Unreachable(format!(
            "no answer within {}s",
            ANSWER_WITHIN.as_secs()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: b
clusters:
  - {name: one, cluster: {server: "https://127.0.0.1:1"}}
contexts:
  - {name: a, context: {cluster: one, user: u}}
  - {name: b, context: {cluster: one, user: u}}
  - {name: c, context: {cluster: one, user: u}}
users:
  - {name: u, user: {token: t}}
"#;

    fn file() -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), KUBECONFIG).unwrap();
        f
    }

    #[test]
    fn contexts_are_the_ones_named_in_order_each_once() {
        let f = file();
        let named = Selection::Named(vec!["c".into(), "a".into(), "c".into()]);
        assert_eq!(resolve(Some(f.path()), &named).unwrap(), ["c", "a"]);
        assert_eq!(
            resolve(Some(f.path()), &Selection::All).unwrap(),
            ["a", "b", "c"]
        );
        assert_eq!(current_context(Some(f.path())).as_deref(), Some("b"));
    }

    #[test]
    fn an_unknown_context_is_refused_with_the_known_ones() {
        let f = file();
        let err = resolve(Some(f.path()), &Selection::Named(vec!["x".into()])).unwrap_err();
        assert!(err.contains("\"x\"") && err.contains("a, b, c"), "{err}");
    }

    #[test]
    fn a_refusal_is_the_credentials_and_silence_the_server() {
        assert!(matches!(
            Failure::of_text("ApiError: Unauthorized (401)"),
            Failure::Credentials(_)
        ));
        assert!(matches!(
            Failure::of_text("no answer within 2s"),
            Failure::Unreachable(_)
        ));
    }
}
