//! A permission the API server refused the engine, read from its Forbidden message, and
//! whether the engine has it now (a SelfSubjectAccessReview, which every authenticated
//! identity may create): a release refused for want of it starts again once it is
//! granted, not when its backoff runs out.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// One refused permission: `verb` on `resource[/subresource]` of `group`, in `namespace`
/// (none: at the cluster scope).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
}

impl Access {
    /// The permission a Forbidden message names, as the API server's authorizer words
    /// it: `... cannot <verb> resource "<resource>" in API group "<group>" in the
    /// namespace "<ns>"` (or `at the cluster scope`). None for any other message.
    pub fn refused_in(message: &str) -> Option<Self> {
        let (_, rest) = message.split_once(" cannot ")?;
        let (verb, rest) = rest.split_once(" resource \"")?;
        let (resource, rest) = rest.split_once('"')?;
        let rest = rest.strip_prefix(" in API group \"")?;
        let (group, rest) = rest.split_once('"')?;
        let namespace = if let Some(rest) = rest.strip_prefix(" in the namespace \"") {
            Some(rest.split_once('"')?.0.to_string())
        } else if rest.starts_with(" at the cluster scope") {
            None
        } else {
            return None;
        };
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (resource.to_string(), None),
        };
        if verb.is_empty() || verb.contains(' ') || resource.is_empty() {
            return None;
        }
        Some(Self {
            verb: verb.to_string(),
            group: group.to_string(),
            resource,
            subresource,
            namespace,
        })
    }

    /// Whether the client's identity has this permission now.
    pub async fn allowed(&self, client: &kube::Client) -> kube::Result<bool> {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(self.verb.clone()),
                    group: Some(self.group.clone()),
                    resource: Some(self.resource.clone()),
                    subresource: self.subresource.clone(),
                    namespace: self.namespace.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorizers_messages_are_read() {
        let namespaced = Access::refused_in(
            r#"secrets is forbidden: User "system:serviceaccount:a:engine" cannot list resource "secrets" in API group "" in the namespace "kube-system""#,
        )
        .unwrap();
        assert_eq!(
            namespaced,
            Access {
                verb: "list".into(),
                group: String::new(),
                resource: "secrets".into(),
                subresource: None,
                namespace: Some("kube-system".into()),
            }
        );
        let cluster = Access::refused_in(
            r#"x is forbidden: User "u" cannot patch resource "deployments/scale" in API group "apps" at the cluster scope: RBAC: clusterrole "y" not found"#,
        )
        .unwrap();
        assert_eq!(cluster.verb, "patch");
        assert_eq!(cluster.group, "apps");
        assert_eq!(cluster.resource, "deployments");
        assert_eq!(cluster.subresource.as_deref(), Some("scale"));
        assert_eq!(cluster.namespace, None);
        assert_eq!(
            Access::refused_in(r#"User "u" cannot get path "/healthz""#),
            None
        );
        assert_eq!(Access::refused_in("connection refused"), None);
    }
}
