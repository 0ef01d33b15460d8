//! The Timeline's records on screen, read whole on a task (the rows themselves come from
//! what the dashboard watches: see `crate::frontend::timeline::from_watched`).

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::frontend::timeline::Change;
use crate::frontend::tui::components::timeline::RecordRef;

/// One record read whole, as its Timeline rows (its revision, its last test run); `None`
/// when it is gone or does not decode (its row keeps what its labels say).
pub async fn read_revision(client: Client, record: &RecordRef) -> Option<Vec<Change>> {
    let key = &record.key;
    let api: Api<Secret> = Api::namespaced(client, &key.namespace);
    let name = crate::helm::release::storage::secret_name(&key.name, record.version);
    let secret = api.get_opt(&name).await.ok()??;
    let release = crate::helm::release::storage::from_secret(secret).ok()?;
    Some(crate::frontend::timeline::of_record_read(
        &release,
        &key.namespace,
    ))
}
