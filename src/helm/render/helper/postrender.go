package main

// Post-renderers: a HelmRelease's spec.postRenderers, applied to what Helm renders the
// way Flux's helm-controller (v1.6.4, internal/postrender) applies them, so that a release
// moved from Flux renders the same manifest.
//
// What helm-controller does, and so what is done here:
//   - each spec.postRenderers entry with a `kustomize` block is one Helm post-renderer,
//     and they run one after the other in the spec's order (an entry without `kustomize`
//     does nothing);
//   - one entry is one kustomize build (sigs.k8s.io/kustomize/api's krusty, the version
//     helm-controller pins) of an in-memory kustomization whose only resource is Helm's
//     rendered stream, with the entry's `patches` (inline strategic-merge or JSON6902,
//     each with its optional target) and `images`; the build has no load restrictions,
//     no plugins but the builtin ones and no reordering (krusty.Options with only those
//     two set, as helm-controller's), and its output is the build's YAML;
//   - Helm's action runs the chain with its Helm 4 default strategy, `combined`: hooks
//     and templates go through the post-renderers in one stream (Helm annotates each
//     document with its template file and splits the result back by that annotation).
//
// What helm-controller also chains after these is not done here: spec.commonMetadata is
// put on by the engine after the render (src/engine/actions/common_metadata.rs), which
// is where helm-controller chains it too, and its origin labels
// (helm.toolkit.fluxcd.io/name and /namespace on every object) are Flux's own, not the
// chart's or the HelmRelease's. Its spec.postRenderStrategy (nohooks, separate) is not
// offered: wheelhouse renders with the default, combined.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	helmpostrender "helm.sh/helm/v4/pkg/postrenderer"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// postRenderer is one spec.postRenderers entry, with Flux's field names.
type postRenderer struct {
	Kustomize *kustomizePostRenderer `json:"kustomize,omitempty"`
}

// kustomizePostRenderer is a `kustomize` block: patches and images.
type kustomizePostRenderer struct {
	Patches []kustomizePatch `json:"patches,omitempty"`
	Images  []kustomizeImage `json:"images,omitempty"`
}

type kustomizePatch struct {
	Patch  string             `json:"patch"`
	Target *kustomizeSelector `json:"target,omitempty"`
}

type kustomizeSelector struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	Name               string `json:"name,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// chain is Helm's post-renderer for a request's post-renderers: nil when none has a
// kustomize block (Helm then renders as it does without one).
func chain(specs []postRenderer) helmpostrender.PostRenderer {
	var steps []helmpostrender.PostRenderer
	for _, s := range specs {
		if s.Kustomize != nil {
			steps = append(steps, s.Kustomize)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	return chained(steps)
}

// chained runs its post-renderers in order, each on the previous one's output.
type chained []helmpostrender.PostRenderer

func (c chained) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := in
	for _, step := range c {
		var err error
		if out, err = step.Run(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// The resource file and kustomization of the in-memory build, as helm-controller names
// them (a file name can show up in kustomize's errors).
const (
	helmOutputFile    = "helm-output.yaml"
	kustomizationFile = "kustomization.yaml"
)

// kustomizeBuilds serialises builds: kustomize's builtin transformers share maps that
// concurrent builds race on (kubernetes-sigs/kustomize#3659; helm-controller holds a
// lock for the same reason), and the helper renders concurrently.
var kustomizeBuilds sync.Mutex

// Run builds the kustomization of Helm's rendered stream with these patches and images.
func (k *kustomizePostRenderer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile(helmOutputFile, rendered.Bytes()); err != nil {
		return nil, err
	}
	kustomization, err := json.Marshal(k.kustomization())
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile(kustomizationFile, kustomization); err != nil {
		return nil, err
	}

	kustomizeBuilds.Lock()
	defer kustomizeBuilds.Unlock()
	// Only these two options, as helm-controller sets them: Reorder stays "", which is
	// neither legacy nor unspecified, so the build keeps the input's order.
	opts := &krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	}
	resources, err := krusty.MakeKustomizer(opts).Run(fs, ".")
	if err != nil {
		return nil, err
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("writing the kustomize build: %w", err)
	}
	return bytes.NewBuffer(out), nil
}

// kustomization is the build's kustomization.yaml: Helm's output as its one resource,
// the patches in order with their targets, and the images.
func (k *kustomizePostRenderer) kustomization() kustypes.Kustomization {
	kz := kustypes.Kustomization{}
	kz.APIVersion = kustypes.KustomizationVersion
	kz.Kind = kustypes.KustomizationKind
	kz.Resources = []string{helmOutputFile}
	for _, img := range k.Images {
		kz.Images = append(kz.Images, kustypes.Image{
			Name:    img.Name,
			NewName: img.NewName,
			NewTag:  img.NewTag,
			Digest:  img.Digest,
		})
	}
	for _, p := range k.Patches {
		patch := kustypes.Patch{Patch: p.Patch}
		if t := p.Target; t != nil {
			sel := &kustypes.Selector{
				AnnotationSelector: t.AnnotationSelector,
				LabelSelector:      t.LabelSelector,
			}
			sel.Gvk.Group = t.Group
			sel.Gvk.Version = t.Version
			sel.Gvk.Kind = t.Kind
			sel.Name = t.Name
			sel.Namespace = t.Namespace
			patch.Target = sel
		}
		kz.Patches = append(kz.Patches, patch)
	}
	return kz
}
