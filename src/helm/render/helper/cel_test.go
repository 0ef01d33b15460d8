package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// ask sends one request line through handle, as serve does, and returns the answer.
func ask(t *testing.T, r *renderer, line string) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.handle([]byte(line)))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

const widgetChecks = `[
 {"apiVersion": "example.com/v1", "kind": "Widget",
  "current": "status.phase == 'Ready'", "failed": "status.phase == 'Broken'",
  "inProgress": "has(status.migrating) && status.migrating"},
 {"apiVersion": "example.com/v1", "current": "true"}]`

// An object is judged by the check of its kind, else its group's; kstatus' order:
// observedGeneration first, then inProgress, failed, current, and none true is
// InProgress. A missing field is an evaluation error (not current yet).
func TestHealthCheckExpressionsJudgeAsFluxDoes(t *testing.T) {
	r := &renderer{}
	cases := []struct{ object, status, err string }{
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"generation": 2}, "status": {"phase": "Ready", "observedGeneration": 2}}`, "Current", ""},
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"generation": 3}, "status": {"phase": "Ready", "observedGeneration": 2}}`, "InProgress", ""},
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "status": {"phase": "Broken"}}`, "Failed", ""},
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "status": {"phase": "Broken", "migrating": true}}`, "InProgress", ""},
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "status": {"phase": "Pending"}}`, "InProgress", ""},
		{`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "status": {}}`, "", "no such key"},
		{`{"apiVersion": "example.com/v2", "kind": "Gadget", "metadata": {}}`, "Current", ""},
		{`{"apiVersion": "other.com/v1", "kind": "Widget", "metadata": {}}`, "", "no health check expression is for Widget.other.com"},
	}
	for _, c := range cases {
		got := ask(t, r, `{"id": 1, "cel": {"healthCheckExprs": `+widgetChecks+`, "object": `+c.object+`}}`)
		if c.err != "" {
			if e, _ := got["error"].(string); !strings.Contains(e, c.err) || strings.HasPrefix(e, celInvalid) {
				t.Errorf("%s: got %v, want an evaluation error with %q", c.object, got, c.err)
			}
			continue
		}
		if got["status"] != c.status {
			t.Errorf("%s: got %v, want %s", c.object, got, c.status)
		}
	}
}

// Expressions that do not compile, or checks Flux refuses, are invalid; valid ones
// answer an empty status when there is no object.
func TestInvalidExpressionsAreSaidToBe(t *testing.T) {
	r := &renderer{}
	if got := ask(t, r, `{"id": 2, "cel": {"healthCheckExprs": `+widgetChecks+`}}`); got["error"] != nil {
		t.Errorf("valid checks: %v", got)
	}
	for _, checks := range []string{
		`[{"apiVersion": "example.com/v1", "kind": "Widget", "current": "status.phase =="}]`,
		`[{"apiVersion": "example.com/v1", "kind": "Widget", "current": ""}]`,
		`[{"apiVersion": "example.com/v1", "kind": "Widget", "current": "true"}, {"apiVersion": "example.com/v2", "kind": "Widget", "current": "true"}]`,
	} {
		got := ask(t, r, `{"id": 3, "cel": {"healthCheckExprs": `+checks+`}}`)
		if e, _ := got["error"].(string); !strings.HasPrefix(e, celInvalid) {
			t.Errorf("%s: got %v, want an invalid-expression error", checks, got)
		}
	}
}

// A readyExpr sees `self` and `dep`, must be a bool, and is compiled strictly.
func TestReadyExprSeesSelfAndDep(t *testing.T) {
	r := &renderer{}
	expr := `"dep.status.phase == self.metadata.labels.want"`
	self := `{"metadata": {"labels": {"want": "up"}}}`
	for dep, want := range map[string]bool{`{"status": {"phase": "up"}}`: true, `{"status": {"phase": "down"}}`: false} {
		got := ask(t, r, `{"id": 4, "cel": {"readyExpr": `+expr+`, "self": `+self+`, "dep": `+dep+`}}`)
		if got["ready"] != want {
			t.Errorf("%s: got %v, want ready %v", dep, got, want)
		}
	}
	for _, bad := range []string{`"dep.status.phase"`, `"dep.status.phase =="`, `"other == 1"`} {
		got := ask(t, r, `{"id": 5, "cel": {"readyExpr": `+bad+`}}`)
		if e, _ := got["error"].(string); !strings.HasPrefix(e, celInvalid) {
			t.Errorf("%s: got %v, want an invalid-expression error", bad, got)
		}
	}
}

// An expression whose evaluation would cost more than the API server lets one CEL
// expression cost (a comprehension over a large list) is refused with the limit, for
// health checks and readyExprs alike; a cheap one over the same object is answered.
func TestExpressionsAreBoundedByTheAPIServersCostLimit(t *testing.T) {
	r := &renderer{}
	items := make([]string, 2000)
	for i := range items {
		items[i] = `"x"`
	}
	object := `{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "status": {"items": [` + strings.Join(items, ",") + `]}}`
	costly := `[{"apiVersion": "example.com/v1", "kind": "Widget", "current": "status.items.all(a, status.items.all(b, a == b))"}]`
	got := ask(t, r, `{"id": 1, "cel": {"healthCheckExprs": `+costly+`, "object": `+object+`}}`)
	if e, _ := got["error"].(string); !strings.Contains(e, "exceeds the cost limit of 1000000") {
		t.Errorf("a costly health check: got %v", got)
	}
	cheap := `[{"apiVersion": "example.com/v1", "kind": "Widget", "current": "size(status.items) > 0"}]`
	got = ask(t, r, `{"id": 2, "cel": {"healthCheckExprs": `+cheap+`, "object": `+object+`}}`)
	if got["status"] != "Current" {
		t.Errorf("a cheap health check: got %v", got)
	}
	ready := `dep.status.items.all(a, dep.status.items.all(b, a == b))`
	got = ask(t, r, `{"id": 3, "cel": {"readyExpr": "`+ready+`", "self": {}, "dep": `+object+`}}`)
	if e, _ := got["error"].(string); !strings.Contains(e, "exceeds the cost limit") {
		t.Errorf("a costly readyExpr: got %v", got)
	}
}
