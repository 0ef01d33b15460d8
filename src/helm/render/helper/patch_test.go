package main

import (
	"encoding/json"
	"testing"
)

// A Deployment (a native kind) gets a three-way strategic merge patch: a container the
// new render drops is removed by its merge key, a field another tool added live is kept,
// a field the render sets is set back to the render's value wherever it was changed, and
// a field the new render changes is set.
func TestNativeKindsGetAThreeWayStrategicMergePatch(t *testing.T) {
	original := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,
		"template":{"spec":{"nodeSelector":{"disk":"ssd"},"containers":[{"name":"web","image":"a:1"},{"name":"side","image":"s:1"}]}}}}`
	modified := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,
		"template":{"spec":{"containers":[{"name":"web","image":"a:2"}]}}}}`
	current := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","annotations":{"by":"other"}},"spec":{"replicas":3,
		"template":{"spec":{"nodeSelector":{"disk":"ssd"},"containers":[{"name":"web","image":"a:1"},{"name":"side","image":"s:1"}]}}}}`
	kind, patch, err := clientSidePatch(&patchRequest{Original: []byte(original), Modified: []byte(modified), Current: []byte(current)})
	if err != nil {
		t.Fatal(err)
	}
	if kind != "strategic" {
		t.Fatalf("patch type %q", kind)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	// replicas: rendered 1 both times but 3 live: set back to 1, as kubectl apply does.
	if spec["replicas"] != float64(1) {
		t.Errorf("replicas not set back to the render's: %s", patch)
	}
	if _, ok := got["metadata"]; ok {
		t.Errorf("metadata patched (the other tool's annotation must stay): %s", patch)
	}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	if pod["nodeSelector"] != nil {
		t.Errorf("the dropped nodeSelector is not removed: %s", patch)
	}
	if _, ok := pod["nodeSelector"]; !ok {
		t.Errorf("the dropped nodeSelector is not deleted (null): %s", patch)
	}
	if _, ok := pod["$setElementOrder/containers"]; !ok {
		t.Errorf("no element order for the containers: %s", patch)
	}
}

// A custom resource gets a two-way JSON merge patch of the old and new renders: a field
// another tool set live is not looked at.
func TestCustomResourcesGetATwoWayMergePatch(t *testing.T) {
	original := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`
	modified := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`
	current := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red","extra":true}}`
	kind, patch, err := clientSidePatch(&patchRequest{Original: []byte(original), Modified: []byte(modified), Current: []byte(current)})
	if err != nil {
		t.Fatal(err)
	}
	if kind != "merge" || string(patch) != `{"spec":{"color":null,"size":2}}` {
		t.Fatalf("%s %s", kind, patch)
	}
	// Unchanged renders: nothing to send.
	_, patch, err = clientSidePatch(&patchRequest{Original: []byte(modified), Modified: []byte(modified), Current: []byte(current)})
	if err != nil || string(patch) != "{}" {
		t.Fatalf("%s %v", patch, err)
	}
}

func TestAPatchRequestNeedsAllThreeDocuments(t *testing.T) {
	if _, _, err := clientSidePatch(&patchRequest{Modified: []byte(`{}`)}); err == nil {
		t.Fatal("accepted")
	}
}
