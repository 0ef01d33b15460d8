package main

import (
	"bytes"
	"strings"
	"testing"
)

// The post-renderers of one request run in order, each a kustomize build with its
// patches (strategic merge with a target, JSON6902) and images.
func TestPostRenderersPatchAndSetImages(t *testing.T) {
	in := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.0
---
apiVersion: v1
kind: Service
metadata:
  name: web
  labels:
    app: web
spec:
  ports:
  - port: 80
`
	pr := chain([]postRenderer{
		{},
		{Kustomize: &kustomizePostRenderer{
			Patches: []kustomizePatch{
				{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: any\n  annotations:\n    patched: smp\n",
					Target: &kustomizeSelector{Kind: "Deployment", LabelSelector: "app=web"}},
				{Patch: `[{"op": "add", "path": "/metadata/labels/json", "value": "6902"}]`,
					Target: &kustomizeSelector{Kind: "Service", Name: "web"}},
			},
			Images: []kustomizeImage{{Name: "nginx", NewName: "registry.example/nginx", NewTag: "2.0"}},
		}},
		{Kustomize: &kustomizePostRenderer{
			Images: []kustomizeImage{{Name: "registry.example/nginx", NewTag: "3.0"}},
		}},
	})
	out, err := pr.Run(bytes.NewBufferString(in))
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"patched: smp", "json: \"6902\"", "image: registry.example/nginx:3.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if chain(nil) != nil || chain([]postRenderer{{}}) != nil {
		t.Error("no kustomize block must mean no post-renderer")
	}
}

// A patch that is neither YAML nor a JSON6902 list fails the render with kustomize's
// reason.
func TestMalformedPatchFails(t *testing.T) {
	pr := chain([]postRenderer{{Kustomize: &kustomizePostRenderer{
		Patches: []kustomizePatch{{Patch: "{not: [yaml", Target: &kustomizeSelector{Kind: "ConfigMap"}}},
	}}})
	_, err := pr.Run(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"))
	if err == nil {
		t.Fatal("a malformed patch must fail")
	}
	t.Log(err)
}
