//! The dashboard's freeze and thaw: the engine's writes (`engine/freeze.rs`), as the
//! operator the API server knows, reported as one result (what failed, by name).

use std::time::Duration;

use kube::Client;

use crate::cluster::client::{Scope, username};
use crate::engine::{
    FreezeDone, FreezeReport, FreezeRequest, FreezeSelection, ReleaseKey, freeze_releases,
    thaw_releases,
};

fn selection(names: Vec<ReleaseKey>) -> FreezeSelection {
    FreezeSelection {
        scope: Scope::All,
        labels: None,
        names,
    }
}

/// Done, or partial with each release that failed and why.
fn result(report: &FreezeReport) -> Result<(), String> {
    let failed: Vec<String> = report
        .releases
        .iter()
        .filter_map(|r| match &r.done {
            FreezeDone::Failed { error } => Some(format!("{}/{}: {error}", r.namespace, r.name)),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("partial: {}", failed.join("; ")))
    }
}

pub async fn freeze(
    client: Client,
    names: Vec<ReleaseKey>,
    duration: Duration,
    reason: String,
) -> Result<(), String> {
    // The record says who froze: as the API server knows the operator.
    let by = username(&client)
        .await
        .ok_or("the API server did not say who you are (SelfSubjectReview): nothing frozen")?;
    let request = FreezeRequest {
        by,
        reason,
        duration,
        until_thawed: false,
    };
    result(&freeze_releases(&client, &selection(names), &request).await)
}

pub async fn thaw(client: Client, names: Vec<ReleaseKey>) -> Result<(), String> {
    let by = username(&client)
        .await
        .unwrap_or_else(|| "an unknown user".into());
    result(&thaw_releases(&client, &selection(names), &by).await)
}
