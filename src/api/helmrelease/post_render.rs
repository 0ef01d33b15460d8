//! `spec.postRenderers`: Flux's post-renderers (`helm.toolkit.fluxcd.io/v2`, as
//! helm-controller v1.6.4 defines them), applied by the render helper to what Helm renders,
//! hooks included, with kustomize's own Go API as helm-controller applies them
//! (`src/helm/render/helper/postrender.go`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Helm post-renderer. Post-renderers are applied in the order of `spec.postRenderers`,
/// each to the previous one's output.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PostRenderer {
    /// Kustomization to apply as PostRenderer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<Kustomize>,
}

/// Kustomize Helm PostRenderer specification.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Kustomize {
    /// Strategic merge and JSON patches, defined as inline YAML objects, capable of
    /// targeting objects based on kind, label and annotation selectors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,

    /// Images is a list of (image name, new name, new tag or digest) for changing image
    /// names, tags or digests. This can also be achieved with a patch, but this operator
    /// is simpler to specify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// Patch contains an inline StrategicMerge or JSON6902 patch, and the target the patch
/// should be applied to.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// Patch contains an inline StrategicMerge patch or an inline JSON6902 patch with an
    /// array of operation objects.
    pub patch: String,

    /// Target points to the resources that the patch document should be applied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// Selector specifies a set of resources. Any resource that matches intersection of all
/// conditions is included in this set.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Group is the API group to select resources from. Together with Version and Kind it
    /// is capable of unambiguously identifying and/or selecting resources.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,

    /// Version of the API Group to select resources from. Together with Group and Kind it
    /// is capable of unambiguously identifying and/or selecting resources.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,

    /// Kind of the API Group to select resources from. Together with Group and Version it
    /// is capable of unambiguously identifying and/or selecting resources.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,

    /// Namespace to select resources from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,

    /// Name to match resources with.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,

    /// AnnotationSelector is a string that follows the label selection expression
    /// (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#api).
    /// It matches with the resource annotations.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub annotation_selector: String,

    /// LabelSelector is a string that follows the label selection expression
    /// (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#api).
    /// It matches with the resource labels.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// Image contains an image name, a new name, a new tag or digest, which will replace the
/// original name and tag.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// Name is a tag-less image name.
    pub name: String,

    /// NewName is the value used to replace the original name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub new_name: String,

    /// NewTag is the value used to replace the original tag.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub new_tag: String,

    /// Digest is the value used to replace the original image tag. If digest is present
    /// NewTag value is ignored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

/// The digest of a release's post-renderers, as the stored revision records it
/// (`wheelhouse.dev/post-renderers`): `None` when none would change a render (none, or
/// none with a `kustomize` block), so a revision made without post-renderers needs no
/// record. 40 hex digits of a sha256 of their JSON (a label value holds at most 63).
/// A strategy other than the default is part of it (the digests of `combined` ones are
/// what they were before strategies were read).
pub fn digest(post_renderers: &[PostRenderer], strategy: PostRenderStrategy) -> Option<String> {
    use sha2::{Digest, Sha256};
    if post_renderers.iter().all(|p| p.kustomize.is_none()) {
        return None;
    }
    let mut json = serde_json::to_vec(post_renderers).expect("plain structs serialise");
    if !strategy.is_default() {
        json.push(0);
        json.extend_from_slice(strategy.as_str().as_bytes());
    }
    Some(hex::encode(Sha256::digest(&json))[..40].to_owned())
}

/// Which of Helm's output the post-renderers see (Helm 4's `PostRenderStrategy`, the same
/// names in Flux's `spec.postRenderStrategy`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PostRenderStrategy {
    /// Hooks and templates in one stream (Helm 4's default, and helm-controller's).
    #[default]
    Combined,
    /// Hooks and templates each in a stream of its own.
    Separate,
    /// Templates only; hooks as the chart renders them (Helm 3's behaviour).
    NoHooks,
}

impl PostRenderStrategy {
    pub fn is_default(&self) -> bool {
        *self == Self::Combined
    }

    /// Helm's (and Flux's) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Combined => "combined",
            Self::Separate => "separate",
            Self::NoHooks => "nohooks",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flux_post_renderers_read_and_round_trip() {
        let yaml = r#"
- kustomize:
    patches:
      - target: {kind: Deployment, labelSelector: "app=web", annotationSelector: "a=b", group: apps, version: v1, name: web, namespace: prod}
        patch: |
          - op: add
            path: /metadata/labels/x
            value: y
    images:
      - {name: nginx, newName: registry.example/nginx, newTag: "2.0", digest: "sha256:abc"}
- {}
"#;
        let prs: Vec<PostRenderer> = crate::text::yaml::from_str(yaml).unwrap();
        let k = prs[0].kustomize.as_ref().unwrap();
        let t = k.patches[0].target.as_ref().unwrap();
        assert_eq!(
            (t.kind.as_str(), t.label_selector.as_str(), t.group.as_str()),
            ("Deployment", "app=web", "apps")
        );
        assert!(k.patches[0].patch.starts_with("- op: add\n"));
        assert_eq!(k.images[0].new_tag, "2.0");
        assert_eq!(prs[1], PostRenderer::default());
        let again: Vec<PostRenderer> =
            serde_json::from_value(serde_json::to_value(&prs).unwrap()).unwrap();
        assert_eq!(again, prs);
    }

    /// The CRD has Flux's schema: required `patch` and image `name`, the selector's keys.
    #[test]
    fn the_crd_has_fluxs_schema() {
        let crd = serde_json::to_value(crate::api::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let kustomize = &spec["properties"]["postRenderers"]["items"]["properties"]["kustomize"];
        let patch = &kustomize["properties"]["patches"]["items"];
        assert_eq!(patch["required"], serde_json::json!(["patch"]));
        let mut target: Vec<&String> = patch["properties"]["target"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        target.sort();
        assert_eq!(
            target,
            [
                "annotationSelector",
                "group",
                "kind",
                "labelSelector",
                "name",
                "namespace",
                "version"
            ]
        );
        let image = &kustomize["properties"]["images"]["items"];
        assert_eq!(image["required"], serde_json::json!(["name"]));
        assert_eq!(image["properties"]["newTag"]["type"], "string");
    }

    #[test]
    fn only_post_renderers_that_change_a_render_have_a_digest() {
        let combined = PostRenderStrategy::Combined;
        assert_eq!(digest(&[], combined), None);
        assert_eq!(digest(&[PostRenderer::default()], combined), None);
        let one = vec![PostRenderer {
            kustomize: Some(Kustomize::default()),
        }];
        let d = digest(&one, combined).unwrap();
        assert_eq!(d.len(), 40);
        let mut other = one.clone();
        other[0].kustomize.as_mut().unwrap().images.push(Image {
            name: "nginx".into(),
            new_tag: "2".into(),
            ..Image::default()
        });
        assert_ne!(digest(&other, combined).unwrap(), d);
        // Another strategy renders differently; with nothing to post-render, it does not.
        assert_ne!(digest(&one, PostRenderStrategy::NoHooks).unwrap(), d);
        assert_eq!(digest(&[], PostRenderStrategy::NoHooks), None);
    }
}
