//! The `wheelhouse.dev/v1alpha1` API: the HelmRelease types and their CRD.

pub mod conditions;
pub mod duration;
pub mod flux;
pub mod helmrelease;
pub mod raw;
pub mod suspend_owner;

pub use duration::Duration;
pub use helmrelease::*;
pub use raw::{RawHelmRelease, Undecodable};

use kube::CustomResourceExt;

/// The CustomResourceDefinition for HelmRelease, generated from the Rust types.
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    HelmRelease::crd()
}

/// The CRD as a YAML document, ready for `kubectl apply -f -`.
pub fn crd_yaml() -> String {
    crate::text::yaml::to_string(&crd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    #[test]
    fn crd_has_names_columns_and_status() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("helmreleases.wheelhouse.dev")
        );
        assert_eq!(crd.spec.names.short_names, Some(vec!["whr".to_string()]));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["Ready", "Status", "Revision", "Suspended", "Age"]);
    }

    #[test]
    fn crd_carries_server_side_validation() {
        let yaml = crd_yaml();
        for needle in [
            "x-kubernetes-validations",
            "chart needs either path, repository and name, or git",
            "x-kubernetes-preserve-unknown-fields: true",
            "CreateReplace",
        ] {
            assert!(yaml.contains(needle), "CRD lacks {needle:?}");
        }
        // It reads back as generated, the duration pattern (quoted, as it has `\`) too.
        let read: CustomResourceDefinition = crate::text::yaml::from_str(&yaml).unwrap();
        assert_eq!(read, crd());
        let pattern = serde_json::to_string(duration::PATTERN).unwrap();
        assert!(
            serde_json::to_string(&read).unwrap().contains(&pattern),
            "CRD lacks {pattern}"
        );
    }
}
