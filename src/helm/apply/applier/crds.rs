//! The CustomResourceDefinitions of a chart's `crds/` directory: installed as the policy
//! says, then waited for until discovery serves their kinds.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

use super::{Applier, post_params};
use crate::api::CrdPolicy;
use crate::helm::apply::manifest::{ObjectRef, parse_manifest};
use crate::helm::apply::{Error, is_status};

/// How long a CustomResourceDefinition may take to become Established (and served), as
/// Helm waits for the CRDs of a chart's `crds/` directory.
const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

const CRD_KIND: &str = "CustomResourceDefinition";
const CRD_GROUP: &str = "apiextensions.k8s.io";

/// For a CustomResourceDefinition: the group and kind it defines.
pub(super) fn crd_defines(obj: &DynamicObject) -> Option<(String, String)> {
    let reference = ObjectRef::from_object(obj);
    if reference.kind != CRD_KIND || reference.group() != CRD_GROUP {
        return None;
    }
    let spec = obj.data.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let kind = spec.pointer("/names/kind")?.as_str()?;
    Some((group.to_string(), kind.to_string()))
}

impl Applier {
    /// Installs the CustomResourceDefinitions of a chart's `crds/` directory (one string
    /// per file, each may hold several documents) and waits until they are Established
    /// and served. `Skip` does nothing; `Create` creates the missing ones and leaves
    /// existing ones alone; `CreateReplace` server-side applies all of them. Returns the
    /// CRDs created or applied. Anything but a CRD in `crds/` is an error.
    pub async fn apply_crds(
        &self,
        crd_docs: &[String],
        policy: CrdPolicy,
    ) -> Result<Vec<ObjectRef>, Error> {
        if policy == CrdPolicy::Skip {
            return Ok(Vec::new());
        }
        let mut objects = Vec::new();
        for doc in crd_docs {
            objects.extend(parse_manifest(doc)?);
        }
        let mut installed = Vec::new();
        for obj in objects {
            if crd_defines(&obj).is_none() {
                return Err(Error::Parse {
                    origin: "crds/".to_string(),
                    message: format!(
                        "{} is not a CustomResourceDefinition (with spec.group and spec.names.kind)",
                        ObjectRef::from_object(&obj)
                    ),
                });
            }
            let target = self.target(obj, "").await?;
            let api = target.api(&self.client);
            match policy {
                CrdPolicy::Skip => unreachable!("returned above"),
                CrdPolicy::Create => match api.create(&post_params(), &target.obj).await {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 409) => continue,
                    Err(e) => return Err(target.api_error("create")(e)),
                },
                CrdPolicy::CreateReplace => {
                    self.server_side_apply(&target).await?;
                }
            }
            installed.push(target);
        }
        for target in &installed {
            self.wait_crd_served(&target.obj).await?;
        }
        Ok(installed.into_iter().map(|t| t.reference).collect())
    }

    /// Waits until a CRD is Established and discovery serves its kind, so objects of it
    /// can be applied next.
    pub(super) async fn wait_crd_served(&self, crd: &DynamicObject) -> Result<(), Error> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let timed_out = || Error::CrdNotEstablished {
            name: name.clone(),
            timeout: CRD_ESTABLISH_TIMEOUT,
        };
        let deadline = tokio::time::Instant::now() + CRD_ESTABLISH_TIMEOUT;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        match tokio::time::timeout_at(
            deadline,
            await_condition(api, &name, conditions::is_crd_established()),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::Watch {
                    object: format!("CustomResourceDefinition/{name}"),
                    message: e.to_string(),
                });
            }
            Err(_) => return Err(timed_out()),
        }

        // Discovery catches up with an Established CRD a moment later.
        let Some((group, kind)) = crd_defines(crd) else {
            return Ok(());
        };
        let version = crd
            .data
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.get("served").and_then(Value::as_bool) != Some(false))
            })
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let api_version = format!("{group}/{version}");
        while self.find_resource(&api_version, &kind).await?.is_none() {
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_defines_reads_group_and_kind() {
        let crd: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}}
        }))
        .unwrap();
        assert_eq!(
            crd_defines(&crd),
            Some(("example.com".to_string(), "Widget".to_string()))
        );
        let other: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x"}, "spec": {"group": "g", "names": {"kind": "K"}}
        }))
        .unwrap();
        assert_eq!(crd_defines(&other), None);
    }
}
