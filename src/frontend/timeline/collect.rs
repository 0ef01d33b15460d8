//! Reading the timeline's records: Helm's storage Secrets (their labels first, so only the
//! records written within the window are read whole) and the `status.changes` of
//! wheelhouse's HelmReleases.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};

use super::{AUDIT_REASONS, Change, newest_first, of_audit, of_record, of_record_read};
use crate::api::RawHelmRelease;
use crate::cluster::client::Scope;

/// Records read whole at once.
const READS: usize = 8;

/// Every change in `scope` at or after `since`, newest first. A record that cannot be
/// read or decoded is left out (one bad record hides only itself); a cluster without
/// wheelhouse's CRD has only Helm's records.
pub async fn changes(
    client: &Client,
    scope: &Scope,
    since: Timestamp,
) -> crate::engine::Result<Vec<Change>> {
    let secrets: Api<Secret> = scope.api(client.clone());
    let records = secrets
        .list_metadata(&ListParams::default().labels(crate::frontend::inventory::stored::SELECTOR))
        .await?;
    // A record's labels say when it was last written (`modifiedAt`, else `createdAt`):
    // older ones are not read.
    let within = records.items.into_iter().filter(|m| {
        let labels = m.metadata.labels.as_ref();
        let written = labels
            .and_then(|l| l.get("modifiedAt").or_else(|| l.get("createdAt")))
            .and_then(|t| t.parse::<i64>().ok());
        written.is_none_or(|t| t >= since.as_second())
    });
    let mut found: Vec<Change> = futures::stream::iter(within.map(|m| {
        let namespace = m.metadata.namespace.clone().unwrap_or_default();
        let name = m.metadata.name.clone().unwrap_or_default();
        let client = client.clone();
        async move {
            let api: Api<Secret> = Api::namespaced(client, &namespace);
            let secret = api.get_opt(&name).await.ok()??;
            let release = crate::helm::release::storage::from_secret(secret).ok()?;
            Some(of_record_read(&release, &namespace))
        }
    }))
    .buffer_unordered(READS)
    .filter_map(|c| async move { c })
    .flat_map(futures::stream::iter)
    .collect()
    .await;
    let releases: Api<RawHelmRelease> = scope.api(client.clone());
    match releases.list(&ListParams::default()).await {
        Ok(list) => {
            for raw in list.items {
                let Ok(hr) = raw.decode() else { continue };
                let kept = hr
                    .status
                    .as_ref()
                    .map(|s| s.changes.clone())
                    .unwrap_or_default();
                found.extend(kept.iter().filter_map(|r| of_record(&hr, r)));
            }
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    found.extend(audited(client, scope).await);
    found.retain(|c| c.at >= since);
    newest_first(&mut found);
    Ok(found)
}

/// The freezes, thaws and dashboard writes their audit Events record, for as long as the
/// cluster keeps Events (an hour by default: the API server's `--event-ttl`). Best
/// effort: an identity that may not list Events sees the other records only.
pub async fn audited(client: &Client, scope: &Scope) -> Vec<Change> {
    let events: Api<k8s_openapi::api::core::v1::Event> = scope.api(client.clone());
    let reasons: std::collections::BTreeSet<&str> =
        AUDIT_REASONS.iter().map(|(_, r, _)| *r).collect();
    let lists = reasons.into_iter().map(|reason| {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default().fields(&format!("reason={reason}")))
                .await
                .map(|l| l.items)
                .unwrap_or_default()
        }
    });
    futures::future::join_all(lists)
        .await
        .iter()
        .flatten()
        .filter_map(of_audit)
        .collect()
}
