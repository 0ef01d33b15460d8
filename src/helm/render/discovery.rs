//! Whether the API server's discovery is complete, checked before every render.
//!
//! `.Capabilities.APIVersions` comes from discovery. When an aggregated API is down (an
//! APIService whose backend is gone, a crashed metrics-server), discovery leaves its group
//! out and helm renders on without it, as `helm upgrade` does on such a cluster. A
//! template gated on that API may then not render what it rendered before, so the apply
//! that follows prunes nothing while discovery is incomplete. The aggregated discovery
//! document marks such a group `Stale`; one request tells what is missing.

use kube::Client;
use serde_json::Value;

use super::Error;

const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// What one read of the aggregated discovery document says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The `group/version`s the server registers but cannot discover now (an APIService
    /// whose backend is down); empty when discovery is complete. A server without
    /// aggregated discovery (before Kubernetes 1.26) cannot say, and reads as complete.
    pub unavailable: Vec<String>,
    /// A digest of the whole document: it changes when a group, version or resource
    /// comes or goes, or goes stale, so a renderer that keeps discovery knows to read it
    /// again.
    pub digest: String,
}

/// Reads the aggregated discovery document (one request).
pub async fn discover(client: &Client) -> Result<Discovery, Error> {
    let text = discovery_text(client).await?;
    let document: Value =
        serde_json::from_str(&text).map_err(|e| Error::Discovery(e.to_string()))?;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    Ok(Discovery {
        unavailable: stale_groups(&document),
        digest: digest[..16].iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// Reads of discovery shared by the callers that ask while one is under way: each caller
/// gets a read that started after it asked (so it is as fresh as a read of its own), but
/// a burst of renders costs one or two reads, not one each.
#[derive(Default)]
pub struct SharedReads<T: Clone> {
    /// The newest read and when it started; held while a read is under way (in order).
    last: tokio::sync::Mutex<Option<(std::time::Instant, T)>>,
}

impl<T: Clone> SharedReads<T> {
    /// A read that started after this call, `read`'s own or another caller's. An error is
    /// its caller's alone: the next caller reads again.
    pub async fn get<E, F>(&self, read: impl FnOnce() -> F) -> Result<T, E>
    where
        F: std::future::Future<Output = Result<T, E>>,
    {
        let asked = std::time::Instant::now();
        let mut last = self.last.lock().await;
        if let Some((started, value)) = last.as_ref()
            && *started >= asked
        {
            return Ok(value.clone());
        }
        let started = std::time::Instant::now();
        let value = read().await?;
        *last = Some((started, value.clone()));
        Ok(value)
    }
}

/// The `group/version`s discovery cannot serve now (see [`Discovery::unavailable`]).
pub async fn unavailable_groups(client: &Client) -> Result<Vec<String>, Error> {
    Ok(discover(client).await?.unavailable)
}

/// Discovery as one document tells it: the `group/version`s marked stale, and those
/// served (fresh).
pub async fn discovery_state(client: &Client) -> Result<(Vec<String>, Vec<String>), Error> {
    let text = discovery_text(client).await?;
    let document: Value =
        serde_json::from_str(&text).map_err(|e| Error::Discovery(e.to_string()))?;
    Ok((stale_groups(&document), fresh_groups(&document)))
}

async fn discovery_text(client: &Client) -> Result<String, Error> {
    // Renders share one read (a lock), so a fix may wait on a read routine work started.
    let request = hyper::Request::get("/apis")
        .header(hyper::header::ACCEPT, AGGREGATED)
        .extension(crate::cluster::slots::GoesFirst)
        .body(Vec::new())
        .map_err(|e| Error::Discovery(e.to_string()))?;
    client
        .request_text(request)
        .await
        .map_err(|e| Error::Discovery(crate::cluster::client::api_message(&e)))
}

/// The APIService that serves `group_version` (`v1beta1.metrics.k8s.io` for
/// `metrics.k8s.io/v1beta1`), for messages.
pub fn apiservice_of(group_version: &str) -> String {
    match group_version.split_once('/') {
        Some((group, version)) => format!("{version}.{group}"),
        None => group_version.to_string(),
    }
}

/// `group/version` of every version the aggregated document marks stale.
fn stale_groups(document: &Value) -> Vec<String> {
    versions_where(document, |v| v["freshness"] == "Stale")
}

/// `group/version` of every version served now (not stale).
fn fresh_groups(document: &Value) -> Vec<String> {
    versions_where(document, |v| v["freshness"] != "Stale")
}

fn versions_where(document: &Value, keep: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut found = Vec::new();
    for group in document["items"].as_array().into_iter().flatten() {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        for version in group["versions"].as_array().into_iter().flatten() {
            if keep(version) {
                found.push(format!(
                    "{name}/{}",
                    version["version"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers that ask while a read runs share the next one; none gets a read that
    /// started before it asked.
    #[tokio::test]
    async fn callers_during_a_read_share_the_next_one() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let shared = std::sync::Arc::new(SharedReads::<usize>::default());
        let reads = std::sync::Arc::new(AtomicUsize::new(0));
        let read = |reads: std::sync::Arc<AtomicUsize>| async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok::<_, ()>(reads.fetch_add(1, Ordering::SeqCst) + 1)
        };
        // The first caller reads alone.
        let first = shared.get(|| read(reads.clone())).await.unwrap();
        assert_eq!(first, 1);
        // Ten callers at once: the first of them reads, the others asked before that read
        // started or after; either way at most two reads serve all ten.
        let callers: Vec<_> = (0..10)
            .map(|_| {
                let (shared, reads) = (shared.clone(), reads.clone());
                tokio::spawn(async move { shared.get(|| read(reads)).await.unwrap() })
            })
            .collect();
        let got: Vec<usize> = futures::future::join_all(callers)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(got.iter().all(|&g| g > first), "{got:?}");
        assert!(reads.load(Ordering::SeqCst) <= 3, "{got:?}");
        // A caller after all that gets a read of its own, never an older one.
        let after = shared.get(|| read(reads.clone())).await.unwrap();
        assert!(after > *got.iter().max().unwrap());
    }

    #[test]
    fn stale_versions_are_named() {
        let doc = serde_json::json!({"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "freshness": "Current"}]},
            {"metadata": {"name": "metrics.k8s.io"}, "versions": [{"version": "v1beta1", "freshness": "Stale"}]},
        ]});
        assert_eq!(stale_groups(&doc), ["metrics.k8s.io/v1beta1"]);
        // A server without aggregated discovery answers an APIGroupList: nothing to say.
        let legacy = serde_json::json!({"kind": "APIGroupList", "groups": [{"name": "apps"}]});
        assert!(stale_groups(&legacy).is_empty());
    }
}
