//! The order in which Helm installs and uninstalls objects, by kind
//! (`pkg/release/v1/util/kind_sorter.go` in Helm 4).

use std::cmp::Ordering;

/// Kinds earlier in the list are installed first; kinds not listed come last.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Kinds earlier in the list are deleted first; kinds not listed come last. Not simply
/// the reverse of [`INSTALL_ORDER`]: validating webhooks go before mutating ones so
/// neither blocks the removal, and Services go before the workloads behind them.
pub const UNINSTALL_ORDER: &[&str] = &[
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "APIService",
    "Ingress",
    "IngressClass",
    "Service",
    "CronJob",
    "Job",
    "StatefulSet",
    "HorizontalPodAutoscaler",
    "Deployment",
    "ReplicaSet",
    "ReplicationController",
    "Pod",
    "DaemonSet",
    "RoleBindingList",
    "RoleBinding",
    "RoleList",
    "Role",
    "ClusterRoleBindingList",
    "ClusterRoleBinding",
    "ClusterRoleList",
    "ClusterRole",
    "CustomResourceDefinition",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "ConfigMap",
    "SecretList",
    "Secret",
    "ServiceAccount",
    "PodDisruptionBudget",
    "PodSecurityPolicy",
    "LimitRange",
    "ResourceQuota",
    "NetworkPolicy",
    "Namespace",
    "PriorityClass",
];

/// Helm's `lessByKind`: listed kinds by their position, unlisted kinds after them in
/// alphabetical order.
pub fn compare_kinds(a: &str, b: &str, order: &[&str]) -> Ordering {
    let rank = |kind: &str| order.iter().position(|k| *k == kind);
    match (rank(a), rank(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Sorts by kind in `order`, keeping the manifest's order within a kind (a stable sort,
/// as Helm's: a manifest is already in template path order, then document order).
pub fn sort_by_kind<T>(items: &mut [T], kind: impl Fn(&T) -> &str, order: &[&str]) {
    items.sort_by(|a, b| compare_kinds(kind(a), kind(b), order));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_order_is_stable_within_a_kind_and_puts_unknown_kinds_last() {
        let mut items = vec![
            ("Widget", "w"),
            ("Deployment", "b"),
            ("Gadget", "g"),
            ("ConfigMap", "z"),
            ("Namespace", "n"),
            ("Deployment", "a"),
            ("ConfigMap", "y"),
            ("CustomResourceDefinition", "crd"),
        ];
        sort_by_kind(&mut items, |i| i.0, INSTALL_ORDER);
        assert_eq!(
            items,
            [
                ("Namespace", "n"),
                ("ConfigMap", "z"),
                ("ConfigMap", "y"),
                ("CustomResourceDefinition", "crd"),
                ("Deployment", "b"),
                ("Deployment", "a"),
                ("Gadget", "g"),
                ("Widget", "w"),
            ]
        );
    }

    #[test]
    fn uninstall_order() {
        let mut kinds = vec![
            "Namespace",
            "Widget",
            "ConfigMap",
            "Deployment",
            "Service",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ];
        sort_by_kind(&mut kinds, |k| k, UNINSTALL_ORDER);
        assert_eq!(
            kinds,
            [
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration",
                "Service",
                "Deployment",
                "ConfigMap",
                "Namespace",
                "Widget",
            ]
        );
    }

    #[test]
    fn both_orders_know_the_same_kinds() {
        let mut install: Vec<_> = INSTALL_ORDER.to_vec();
        let mut uninstall: Vec<_> = UNINSTALL_ORDER.to_vec();
        install.sort_unstable();
        uninstall.sort_unstable();
        assert_eq!(install, uninstall);
    }
}
