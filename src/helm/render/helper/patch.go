package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
)

// patchRequest asks for the patch Helm 4 sends when it updates an existing object
// without server-side apply (`--server-side=false`, Flux's `serverSideApply: disabled`,
// or "auto" after a client-side revision): helm's kube client computes it from three
// JSON documents.
type patchRequest struct {
	// Original: the object as the release's current revision rendered it, or, for an
	// object that revision did not render, as it is live.
	Original json.RawMessage `json:"original"`
	// Modified: the object as this revision renders it (ownership metadata set).
	Modified json.RawMessage `json:"modified"`
	// Current: the object as it is live.
	Current json.RawMessage `json:"current"`
	// ThreeWayUnstructured: a three-way JSON merge patch for kinds outside the native
	// scheme, as `helm install --take-ownership --server-side=false` does; otherwise
	// Helm sends those a two-way merge patch of original and modified.
	ThreeWayUnstructured bool `json:"threeWayUnstructured"`
}

type patchAnswer struct {
	ID uint64 `json:"id"`
	// PatchType: "strategic" (application/strategic-merge-patch+json) or "merge"
	// (application/merge-patch+json).
	PatchType string          `json:"patchType"`
	Patch     json.RawMessage `json:"patch"`
}

// nativeScheme holds only Kubernetes' own kinds and the apiextensions ones, as helm's
// kube client's scheme does: a custom resource always gets a JSON merge patch.
var nativeScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = scheme.AddToScheme(s)
	_ = apiextv1beta1.AddToScheme(s)
	_ = apiextv1.AddToScheme(s)
	return s
})

func (r *renderer) patch(id uint64, req *patchRequest) any {
	patchType, patch, err := clientSidePatch(req)
	if err != nil {
		return failure{ID: id, Error: err.Error()}
	}
	return patchAnswer{ID: id, PatchType: patchType, Patch: patch}
}

func clientSidePatch(req *patchRequest) (string, json.RawMessage, error) {
	if len(req.Original) == 0 || len(req.Modified) == 0 || len(req.Current) == 0 {
		return "", nil, errors.New("a patch request needs original, modified and current")
	}
	var typed struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(req.Modified, &typed); err != nil {
		return "", nil, fmt.Errorf("reading the object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(typed.APIVersion)
	if err != nil {
		return "", nil, fmt.Errorf("reading the object's apiVersion: %w", err)
	}
	versioned, err := nativeScheme().New(gv.WithKind(typed.Kind))
	_, v1beta1CRD := versioned.(*apiextv1beta1.CustomResourceDefinition)
	if err != nil || v1beta1CRD {
		if req.ThreeWayUnstructured {
			patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(req.Original, req.Modified, req.Current,
				mergepatch.RequireKeyUnchanged("apiVersion"),
				mergepatch.RequireKeyUnchanged("kind"),
				mergepatch.RequireMetadataKeyUnchanged("name"))
			if err != nil && mergepatch.IsPreconditionFailed(err) {
				err = fmt.Errorf("%w: at least one field was changed: apiVersion, kind or name", err)
			}
			return "merge", patch, err
		}
		patch, err := jsonpatch.CreateMergePatch(req.Original, req.Modified)
		return "merge", patch, err
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(versioned)
	if err != nil {
		return "", nil, fmt.Errorf("unable to create patch metadata from object: %w", err)
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch(req.Original, req.Modified, req.Current, meta, true)
	return "strategic", patch, err
}
