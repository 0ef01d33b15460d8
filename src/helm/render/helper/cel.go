package main

// CEL for Flux's `spec.healthCheckExprs` and `spec.dependsOn[].readyExpr`, evaluated with
// Flux's own package (github.com/fluxcd/pkg/runtime/cel, at the version helm-controller
// v1.6.4 pins), so an expression means here what it means to helm-controller: the same
// CEL environment and extensions, the same observedGeneration rule and order of
// InProgress, Failed, Current. The engine's health wait asks about one object at a time;
// compiled expressions are kept, keyed by their text.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// celRequest is one question about CEL. With healthCheckExprs: how `object` stands
// (no object: are the expressions valid). With readyExpr: whether `dep` is ready for
// `self` (no dep: is the expression valid).
//
// The objects are decoded as the API machinery decodes them (whole numbers as int64, as
// an object read from the API server holds them): Flux's observedGeneration rule reads
// int64s only, and CEL tells int from double.
type celRequest struct {
	HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs"`
	Object           json.RawMessage               `json:"object"`
	ReadyExpr        string                        `json:"readyExpr"`
	Self             json.RawMessage               `json:"self"`
	Dep              json.RawMessage               `json:"dep"`
}

// object decodes one of the request's objects; nil when absent.
func object(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("malformed object: %w", err)
	}
	return obj, nil
}

type celAnswer struct {
	ID uint64 `json:"id"`
	// Status: Current, InProgress or Failed (kstatus' words); empty for a validity check.
	Status string `json:"status,omitempty"`
	// Message: why the status is what it is, when kstatus says.
	Message string `json:"message,omitempty"`
	Ready   *bool  `json:"ready,omitempty"`
}

// celInvalid marks an expression that does not compile: the release is stalled, as
// helm-controller stalls it (InvalidCELExpression), rather than waited on.
const celInvalid = "invalid CEL expression: "

// An evaluation is bounded: CEL programs are interruptible (Flux's package checks every
// 100 iterations), and an object's expressions should take microseconds.
const celTimeout = 5 * time.Second

// celCostLimit bounds what one evaluation may cost, as the API server bounds each CEL
// expression it runs (k8s.io/apiserver/pkg/apis/cel: PerCallLimit): a tenant's expression
// over a large object cannot hold the evaluator. Flux's package sets no limit, so every
// expression is first run by a guard program (cost tracked, the same environment as
// Flux's, docs/user-guide/health-and-cancellation.md) and answered by Flux's own only
// within the limit.
const celCostLimit = 1000000

// celCache holds compiled expressions by their JSON text, bounded: cleared when full
// (releases' expressions are few; a flood of distinct ones only costs recompiling).
type celCache struct {
	mu     sync.Mutex
	health map[string]*fluxcel.StatusEvaluator
	ready  map[string]*fluxcel.Expression
	guards map[string]cel.Program
}

// guard is the cost-limited program of `expr` (compiled with `self` and `dep` when
// `typed`, as a readyExpr; parsed over the object's fields otherwise, as a health check
// expression), built in the environment Flux's cel.NewExpression builds.
func (c *celCache) guard(expr string, typed bool) (cel.Program, error) {
	key := fmt.Sprintf("%t\x00%s", typed, expr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.guards[key]; ok {
		return p, nil
	}
	opts := []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	}
	if typed {
		opts = append(opts,
			cel.Variable("self", cel.ObjectType("google.protobuf.Struct")),
			cel.Variable("dep", cel.ObjectType("google.protobuf.Struct")))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	parse := env.Parse
	if typed {
		parse = env.Compile
	}
	ast, issues := parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, issues.Err()
	}
	p, err := env.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	if c.guards == nil || len(c.guards) >= celCacheMax {
		c.guards = map[string]cel.Program{}
	}
	c.guards[key] = p
	return p, nil
}

// withinCost runs `expr`'s guard over `data`: an error only when the evaluation would
// pass the cost limit (any other error is Flux's to report, with its words).
func (c *celCache) withinCost(ctx context.Context, expr string, typed bool, data map[string]any) error {
	if expr == "" {
		return nil
	}
	p, err := c.guard(expr, typed)
	if err != nil {
		// Flux's compile says what is wrong with it.
		return nil
	}
	if _, _, err := p.ContextEval(ctx, data); err != nil && strings.Contains(err.Error(), "cost limit exceeded") {
		return fmt.Errorf("the CEL expression '%s' exceeds the cost limit of %d (the API server's per-expression limit) on this object", expr, celCostLimit)
	}
	return nil
}

const celCacheMax = 1024

func (c *celCache) evaluator(check kustomize.CustomHealthCheck) (*fluxcel.StatusEvaluator, error) {
	key, _ := json.Marshal(check.HealthCheckExpressions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.health[string(key)]; ok {
		return e, nil
	}
	e, err := fluxcel.NewStatusEvaluator(&check.HealthCheckExpressions)
	if err != nil {
		return nil, err
	}
	if c.health == nil || len(c.health) >= celCacheMax {
		c.health = map[string]*fluxcel.StatusEvaluator{}
	}
	c.health[string(key)] = e
	return e, nil
}

func (c *celCache) readyExpr(expr string) (*fluxcel.Expression, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.ready[expr]; ok {
		return e, nil
	}
	// As helm-controller compiles a dependency's readyExpr: `self` and `dep` are
	// objects, the result a bool.
	e, err := fluxcel.NewExpression(expr,
		fluxcel.WithCompile(),
		fluxcel.WithOutputType(celtypes.BoolType),
		fluxcel.WithStructVariables("self", "dep"))
	if err != nil {
		return nil, err
	}
	if c.ready == nil || len(c.ready) >= celCacheMax {
		c.ready = map[string]*fluxcel.Expression{}
	}
	c.ready[expr] = e
	return e, nil
}

// cel answers one CEL request.
func (r *renderer) cel(id uint64, req *celRequest) any {
	ctx, cancel := context.WithTimeout(context.Background(), celTimeout)
	defer cancel()
	if req.ReadyExpr != "" {
		expr, err := r.celCache.readyExpr(req.ReadyExpr)
		if err != nil {
			return failure{ID: id, Error: celInvalid + err.Error()}
		}
		self, err := object(req.Self)
		if err != nil {
			return failure{ID: id, Error: err.Error()}
		}
		dep, err := object(req.Dep)
		if err != nil {
			return failure{ID: id, Error: err.Error()}
		}
		if dep == nil {
			return celAnswer{ID: id}
		}
		data := map[string]any{"self": self, "dep": dep}
		if err := r.celCache.withinCost(ctx, req.ReadyExpr, true, data); err != nil {
			return failure{ID: id, Error: err.Error()}
		}
		ready, err := expr.EvaluateBoolean(ctx, data)
		if err != nil {
			return failure{ID: id, Error: err.Error()}
		}
		return celAnswer{ID: id, Ready: &ready}
	}
	// All the checks are compiled (and validated) first, as helm-controller builds its
	// status reader before anything else; then the one for the object's kind judges it.
	if _, err := fluxcel.NewStatusReader(req.HealthCheckExprs); err != nil {
		return failure{ID: id, Error: celInvalid + err.Error()}
	}
	content, err := object(req.Object)
	if err != nil {
		return failure{ID: id, Error: err.Error()}
	}
	if content == nil {
		return celAnswer{ID: id}
	}
	obj := &unstructured.Unstructured{Object: content}
	check, ok := matching(req.HealthCheckExprs, obj)
	if !ok {
		return failure{ID: id, Error: fmt.Sprintf("no health check expression is for %s", obj.GroupVersionKind().GroupKind())}
	}
	evaluator, err := r.celCache.evaluator(check)
	if err != nil {
		return failure{ID: id, Error: celInvalid + err.Error()}
	}
	exprs := check.HealthCheckExpressions
	for _, e := range []string{exprs.InProgress, exprs.Failed, exprs.Current} {
		if err := r.celCache.withinCost(ctx, e, false, obj.UnstructuredContent()); err != nil {
			return failure{ID: id, Error: err.Error()}
		}
	}
	result, err := evaluator.Evaluate(ctx, obj)
	if err != nil {
		return failure{ID: id, Error: err.Error()}
	}
	return celAnswer{ID: id, Status: result.Status.String(), Message: result.Message}
}

// matching is the check for the object's group and kind, else the one for its whole
// group (a check without a kind), as Flux's status reader picks it.
func matching(checks []kustomize.CustomHealthCheck, obj *unstructured.Unstructured) (kustomize.CustomHealthCheck, bool) {
	want := obj.GroupVersionKind().GroupKind()
	byGroup := -1
	for i, c := range checks {
		gk := schema.FromAPIVersionAndKind(c.APIVersion, c.Kind).GroupKind()
		switch {
		case gk.Group != want.Group:
		case c.Kind == want.Kind:
			return c, true
		case c.Kind == "" && byGroup < 0:
			byGroup = i
		}
	}
	if byGroup >= 0 {
		return checks[byGroup], true
	}
	return kustomize.CustomHealthCheck{}, false
}
