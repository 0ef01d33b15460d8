//! The migrated object checked by reading it back as wheelhouse reads it.

use serde_json::Value;

use super::Error;
use super::helm_identity::HelmIdentity;
use crate::api::HelmRelease;

/// `object` read as wheelhouse reads it. Fails when a key the mapping wrote is not a field
/// of wheelhouse's (serde would drop it silently), or when the release it names is not
/// Flux's.
pub(super) fn read_back(object: &Value, helm: &HelmIdentity) -> Result<HelmRelease, Error> {
    let release: HelmRelease =
        serde_json::from_value(object.clone()).map_err(|e| Error::Invalid(e.to_string()))?;
    let again = serde_json::to_value(&release).map_err(|e| Error::Invalid(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_keys(object, &again, "", &mut unknown);
    if !unknown.is_empty() {
        return Err(Error::Invalid(format!(
            "wheelhouse has no field {}",
            unknown.join(", ")
        )));
    }
    let resolved = (
        release.release_name(),
        release.target_namespace(),
        release.storage_namespace(),
    );
    let flux = (
        helm.release_name.clone(),
        helm.target_namespace.clone(),
        helm.storage_namespace.clone(),
    );
    if resolved != flux {
        return Err(Error::Invalid(format!(
            "it resolves to Helm release {:?} where Flux's is {flux:?}",
            resolved
        )));
    }
    Ok(release)
}

/// Paths of keys in `written` that `read` (its round trip through the typed object) lacks.
fn unknown_keys(written: &Value, read: &Value, path: &str, found: &mut Vec<String>) {
    match (written, read) {
        (Value::Object(w), Value::Object(r)) => {
            for (key, value) in w {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match r.get(key) {
                    Some(again) => unknown_keys(value, again, &at, found),
                    None => found.push(at),
                }
            }
        }
        (Value::Array(w), Value::Array(r)) => {
            for (i, (value, again)) in w.iter().zip(r).enumerate() {
                unknown_keys(value, again, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}
