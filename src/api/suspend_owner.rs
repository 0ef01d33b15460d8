//! Who set `spec.suspend`: the managedFields entries that own it. Read by the change log
//! (who suspended), the freeze's thaw rule (whose suspend it is now), the forgotten
//! suspends (since when) and the inventory's watch (which keeps only that entry).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

/// Whether `entry` owns `spec.suspend`.
pub fn owns_suspend(entry: &ManagedFieldsEntry) -> bool {
    entry
        .fields_v1
        .as_ref()
        .and_then(|v| v.0.get("f:spec"))
        .is_some_and(|spec| spec.get("f:suspend").is_some())
}

/// The managedFields entries of `meta` that own `spec.suspend`.
pub fn suspend_owners(meta: &ObjectMeta) -> impl Iterator<Item = &ManagedFieldsEntry> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|f| owns_suspend(f))
}
