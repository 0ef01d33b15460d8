package main

// One render: what
//
//	HELM_DRIVER=memory HELM_MEMORY_DRIVER_DATA=<seed> helm upgrade --install \
//	  --namespace NS --values - --reset-values --dry-run=server --skip-crds \
//	  --disable-openapi-validation --output json [cluster flags] -- RELEASE CHART
//
// does, step for step (helm v4's pkg/cmd/upgrade.go and install.go, pkg/cmd/root.go for
// the memory driver), with the same SDK actions doing the work.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/action"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	valuesloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	ri "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"
)

// previous is the release's newest stored revision, the one record of the seed.
type previous struct {
	Version      int    `json:"version"`
	Status       string `json:"status"`
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
}

// kept is the revision whose values an upgrade with `--reuse-values` keeps (Flux's
// upgrade.preserveValues): seeded with its values and its chart's, so Helm's own
// upgrade merges them as the CLI would after that revision.
type kept struct {
	previous
	Config      json.RawMessage `json:"config"`
	ChartValues json.RawMessage `json:"chartValues"`
}

type request struct {
	ID        uint64          `json:"id"`
	Release   string          `json:"release"`
	Namespace string          `json:"namespace"`
	Chart     string          `json:"chart"`
	Values    json.RawMessage `json:"values"`
	Previous  *previous       `json:"previous"`
	// Kept: with `--reuse-values`, the revision whose values are kept (none: the values
	// are the whole desired state, `--reset-values`).
	Kept      *kept       `json:"kept"`
	Cluster   clusterSpec `json:"cluster"`
	Discovery string      `json:"discovery"`
	// PostRenderers: the HelmRelease's spec.postRenderers (postrender.go), applied to
	// what Helm renders, hooks included, as helm-controller applies them.
	PostRenderers []postRenderer `json:"postRenderers"`
	// PostRenderStrategy: Helm 4's strategy for the post-renderers ("" or "combined",
	// "separate", "nohooks"), as Flux's spec.postRenderStrategy names them.
	PostRenderStrategy string `json:"postRenderStrategy"`
	// SkipSchemaValidation: `--skip-schema-validation` (the action's
	// disableSchemaValidation).
	SkipSchemaValidation bool `json:"skipSchemaValidation"`
	// ChartValues: the chart's default values made of chart.valuesFiles, replacing its
	// values.yaml as Flux's source-controller does when it builds the chart artifact
	// (none: the chart's own).
	ChartValues json.RawMessage `json:"chartValues"`
	// CEL: a question about Flux's CEL expressions instead of a render (cel.go).
	CEL *celRequest `json:"cel"`
	// Patch: the patch of a client-side update instead of a render (patch.go).
	Patch *patchRequest `json:"patch"`
}

// The helm CLI's defaults for the upgrade flags wheelhouse does not pass.
const (
	cliTimeout             = 300 * time.Second // --timeout
	cliStatusComputeWorker = 8                 // defaultCLIWaitOptions
)

var discardLog = slog.DiscardHandler

// renderer holds what every render shares: the clusters, and the EnvSettings that
// carry the CLI's non-cluster defaults (HELM_MAX_HISTORY, repository paths).
type renderer struct {
	settings *cli.EnvSettings
	clusters clusterTable
	celCache celCache
}

// render returns the release the CLI would print, whether discovery was partial, or the
// error the CLI would print after "Error: ".
func (r *renderer) render(ctx context.Context, req *request) (*release.Release, bool, error) {
	cl := r.clusters.get(req.Cluster)
	getter := cl.serve(req.Discovery)

	namespace := req.Namespace
	if namespace == "" {
		namespace = cl.namespace()
	}

	// The CLI's action.Configuration with HELM_DRIVER=memory: a fresh memory driver (never
	// shared with another render), Helm's printing client in place of the kube client
	// (root.go does that whenever memory driver data is given), and the seed stored.
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(discardLog))
	if err := cfg.Init(getter, namespace, "memory"); err != nil {
		return nil, false, err
	}
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	if err := seedStorage(cfg, req, namespace); err != nil {
		return nil, false, err
	}

	rel, err := r.upgradeInstall(ctx, cfg, req, namespace)
	return rel, getter.partial.Load(), err
}

// seedStorage stores the seed record exactly as the CLI reads HELM_MEMORY_DRIVER_DATA:
// the same JSON, unmarshalled with the same YAML library into the same type.
func seedStorage(cfg *action.Configuration, req *request, namespace string) error {
	records := []any{}
	record := func(p previous, config, chartValues json.RawMessage) map[string]any {
		chart := map[string]any{"metadata": map[string]any{
			"name": p.Chart, "version": p.ChartVersion,
		}}
		rec := map[string]any{
			"name":      req.Release,
			"namespace": namespace,
			"version":   p.Version,
			"info":      map[string]any{"status": p.Status},
			"chart":     chart,
		}
		if len(config) > 0 {
			rec["config"] = config
		}
		if len(chartValues) > 0 {
			chart["values"] = chartValues
		}
		return rec
	}
	k := req.Kept
	if p := req.Previous; p != nil {
		if k != nil && k.Version == p.Version {
			records = append(records, record(*p, k.Config, k.ChartValues))
			k = nil
		} else {
			records = append(records, record(*p, nil, nil))
		}
	}
	if k != nil {
		records = append(records, record(k.previous, k.Config, k.ChartValues))
	}
	data, err := json.Marshal(records)
	if err != nil {
		return err
	}
	var releases []*release.Release
	if err := yaml.Unmarshal(data, &releases); err != nil {
		return fmt.Errorf("Unable to unmarshal memory driver data: %w", err)
	}
	for _, rel := range releases {
		if err := cfg.Releases.Create(rel); err != nil {
			return err
		}
	}
	// Storing switches the driver to the record's namespace; back to the release's.
	if mem, ok := cfg.Releases.Driver.(*driver.Memory); ok {
		mem.SetNamespace(namespace)
	}
	return nil
}

// upgradeInstall is `helm upgrade --install`'s command: install when there is no history
// (or only an uninstalled release), upgrade otherwise.
func (r *renderer) upgradeInstall(ctx context.Context, cfg *action.Configuration, req *request, namespace string) (*release.Release, error) {
	up := action.NewUpgrade(cfg)
	up.WaitOptions = append(up.WaitOptions, kube.WithStatusComputeWorkers(cliStatusComputeWorker))
	up.Install = true
	up.Namespace = namespace
	up.ResetValues = req.Kept == nil
	up.ReuseValues = req.Kept != nil
	up.DryRunStrategy = action.DryRunServer
	up.SkipCRDs = true
	up.DisableOpenAPIValidation = true
	up.SkipSchemaValidation = req.SkipSchemaValidation
	up.Timeout = cliTimeout
	up.WaitStrategy = kube.HookOnlyStrategy
	up.MaxHistory = r.settings.MaxHistory
	// Not a CLI flag here: the HelmRelease's post-renderers, with Helm 4's default
	// strategy (hooks and templates post-rendered together), as helm-controller runs them.
	up.PostRenderer = chain(req.PostRenderers)
	up.PostRenderStrategy = action.PostRenderStrategyCombined
	if req.PostRenderStrategy != "" {
		up.PostRenderStrategy = action.PostRenderStrategy(req.PostRenderStrategy)
	}

	history := action.NewHistory(cfg)
	history.Max = 1
	versions, err := history.Run(req.Release)
	uninstalled := lastUninstalled(versions)
	if errors.Is(err, driver.ErrReleaseNotFound) || uninstalled {
		in := action.NewInstall(cfg)
		in.CreateNamespace = false
		in.ChartPathOptions = up.ChartPathOptions
		in.ForceReplace = up.ForceReplace
		in.DryRunStrategy = up.DryRunStrategy
		in.DisableHooks = up.DisableHooks
		in.SkipCRDs = up.SkipCRDs
		in.Timeout = up.Timeout
		in.WaitStrategy = up.WaitStrategy
		in.WaitOptions = up.WaitOptions
		in.WaitForJobs = up.WaitForJobs
		in.Devel = up.Devel
		in.Namespace = up.Namespace
		in.RollbackOnFailure = up.RollbackOnFailure
		in.PostRenderer = up.PostRenderer
		in.PostRenderStrategy = up.PostRenderStrategy
		in.DisableOpenAPIValidation = up.DisableOpenAPIValidation
		in.SubNotes = up.SubNotes
		in.HideNotes = up.HideNotes
		in.SkipSchemaValidation = up.SkipSchemaValidation
		in.Description = up.Description
		in.DependencyUpdate = up.DependencyUpdate
		in.Labels = up.Labels
		in.EnableDNS = up.EnableDNS
		in.HideSecret = up.HideSecret
		in.TakeOwnership = up.TakeOwnership
		in.ForceConflicts = up.ForceConflicts
		in.ServerSideApply = up.ServerSideApply != "false"
		if uninstalled {
			in.Replace = true
		}
		// The install path's errors reach the user unwrapped.
		return r.install(ctx, in, req, namespace)
	} else if err != nil {
		return nil, err
	}

	ch, acc, vals, err := r.chartAndValues(&up.ChartPathOptions, req.Chart, req.Values, req.ChartValues)
	if err != nil {
		return nil, err
	}
	if err := dependenciesPresent(ch, acc); err != nil {
		return nil, err
	}
	// (A deprecated chart only logs a warning.)

	res, err := up.RunWithContext(ctx, req.Release, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("UPGRADE FAILED: %w", err)
	}
	return asV1(res)
}

// install is the CLI's runInstall for the upgrade --install path.
func (r *renderer) install(ctx context.Context, in *action.Install, req *request, namespace string) (*release.Release, error) {
	name, chartRef, err := in.NameAndChart([]string{req.Release, req.Chart})
	if err != nil {
		return nil, err
	}
	in.ReleaseName = name

	ch, acc, vals, err := r.chartAndValues(&in.ChartPathOptions, chartRef, req.Values, req.ChartValues)
	if err != nil {
		return nil, err
	}
	switch kind := acc.MetadataAsMap()["Type"]; kind {
	case "", "application":
	default:
		return nil, fmt.Errorf("%s charts are not installable", kind)
	}
	if err := dependenciesPresent(ch, acc); err != nil {
		return nil, err
	}
	in.Namespace = namespace

	res, err := in.RunWithContext(ctx, ch, vals)
	rel, convErr := asV1(res)
	if convErr != nil {
		return nil, convErr
	}
	return rel, err
}

// chartAndValues are the CLI's first steps on either path, in its order: locate the
// chart, parse `--values -`, load the chart; then the chart's default values replaced by
// chartValues when there are some.
func (r *renderer) chartAndValues(opts *action.ChartPathOptions, ref string, raw, chartValues json.RawMessage) (ci.Charter, ci.Accessor, map[string]any, error) {
	chartPath, err := r.locate(opts, ref)
	if err != nil {
		return nil, nil, nil, err
	}
	vals, err := parseValues(raw)
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err := loader.Load(chartPath)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := replaceDefaultValues(ch, chartValues); err != nil {
		return nil, nil, nil, err
	}
	acc, err := ci.NewAccessor(ch)
	if err != nil {
		return nil, nil, nil, err
	}
	return ch, acc, vals, nil
}

// dependenciesPresent is the CLI's check that the dependencies Chart.yaml names are in
// charts/ (with SOURCE_DATE_EPOCH checked first, as the CLI does).
func dependenciesPresent(ch ci.Charter, acc ci.Accessor) error {
	deps := acc.MetaDependencies()
	if len(deps) == 0 {
		return nil
	}
	if err := checkSourceDateEpoch(); err != nil {
		return err
	}
	if err := action.CheckDependencies(ch, deps); err != nil {
		return missingDependencies(err)
	}
	return nil
}

// locate resolves the chart argument. The helper takes local charts only (an absolute
// path to a chart directory or archive), so it never reaches a repository or registry;
// for those, LocateChart is what the CLI runs, with the same "path not found" error.
func (r *renderer) locate(opts *action.ChartPathOptions, chart string) (string, error) {
	if !filepath.IsAbs(chart) {
		return "", fmt.Errorf("chart %q is not an absolute path (the render helper takes local charts only)", chart)
	}
	return opts.LocateChart(chart, r.settings)
}

// parseValues is `--values -`: the bytes helm would have read from stdin, through the
// same loader (a YAML parser; JSON is YAML), merged into an empty map.
func parseValues(raw json.RawMessage) (map[string]any, error) {
	current, err := valuesloader.LoadValues(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", "-", err)
	}
	return valuesloader.MergeMaps(map[string]any{}, current), nil
}

// replaceDefaultValues sets the chart's values to chartValues (read as Helm reads a
// values.yaml, so numbers are what they would be in the chart), as a chart artifact Flux
// built with valuesFiles carries them.
func replaceDefaultValues(ch ci.Charter, chartValues json.RawMessage) error {
	if len(chartValues) == 0 || string(chartValues) == "null" {
		return nil
	}
	values, err := valuesloader.LoadValues(bytes.NewReader(chartValues))
	if err != nil {
		return fmt.Errorf("chart.valuesFiles: %w", err)
	}
	c, ok := ch.(*chartv2.Chart)
	if !ok {
		return fmt.Errorf("chart.valuesFiles: a chart of this apiVersion cannot have its values replaced")
	}
	c.Values = values
	return nil
}

func missingDependencies(err error) error {
	return fmt.Errorf("an error occurred while checking for chart dependencies. You may need to run 'helm dependency build' to fetch missing dependencies: %w", err)
}

// checkSourceDateEpoch fails as the CLI does when a chart has dependencies and
// SOURCE_DATE_EPOCH is set but is not a non-negative integer.
func checkSourceDateEpoch() error {
	v, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok || v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("invalid SOURCE_DATE_EPOCH: %w", err)
	}
	if n < 0 {
		return errors.New("invalid SOURCE_DATE_EPOCH: must not be negative")
	}
	return nil
}

// lastUninstalled: the newest record of the history is an uninstalled release.
func lastUninstalled(versions []ri.Releaser) bool {
	if len(versions) == 0 {
		return false
	}
	rel, err := asV1(versions[len(versions)-1])
	if err != nil || rel == nil || rel.Info == nil {
		return false
	}
	return rel.Info.Status == common.StatusUninstalled
}

// asV1 is the release as the CLI's JSON output has it (a v1 release).
func asV1(r ri.Releaser) (*release.Release, error) {
	switch rel := r.(type) {
	case nil:
		return nil, nil
	case *release.Release:
		return rel, nil
	case release.Release:
		return &rel, nil
	}
	return nil, fmt.Errorf("unsupported release type: %T", r)
}
