// Command wheelhouse-render renders Helm charts as
//
//	helm upgrade --install --dry-run=server ...
//
// does (with Helm's in-memory storage seeded with the release's newest revision), built
// on the same Helm SDK version as the helm CLI wheelhouse pins, and stays running so that
// a render costs no process start and, while the cluster's discovery is unchanged, no
// discovery requests.
//
// Usage:
//
//	wheelhouse-render version   # prints "wheelhouse-render helm <version>"
//	wheelhouse-render           # serves newline-delimited JSON on stdin/stdout
//
// See README.md for the protocol.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	// The client auth plugins the helm CLI links in (exec and OIDC providers).
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

const helmModule = "helm.sh/helm/v4"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	quiet()
	version, err := helmVersion()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wheelhouse-render: %v\n", err)
		return 1
	}
	switch {
	case len(args) == 1 && args[0] == "version":
		fmt.Printf("wheelhouse-render helm %s\n", version)
		return 0
	case len(args) == 0:
		if err := serve(os.Stdin, os.Stdout, version); err != nil {
			fmt.Fprintf(os.Stderr, "wheelhouse-render: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintln(os.Stderr, "usage: wheelhouse-render [version]")
		return 2
	}
}

// quiet discards every log Helm and client-go write (Helm's slog warnings, klog,
// the API server's warning headers): they may quote values or rendered output, and the
// one condition wheelhouse needs from them, partial discovery, is reported per request.
func quiet() {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	log.SetOutput(io.Discard)
	klog.SetLogger(logr.Discard())
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	// As helm's main does: the field manager name of the (unused) real kube client.
	kube.ManagedFieldsManager = "helm"
	// The cluster comes only from the requests: nothing of the helm CLI's environment
	// may point `lookup` or `.Capabilities` at another cluster or identity.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "HELM_KUBE") || name == "HELM_NAMESPACE" {
			os.Unsetenv(name)
		}
	}
}

// helmVersion is the version of the Helm module this binary was built with. It also
// checks that the build set Helm's version variable as a helm release build does
// (build.sh passes -X helm.sh/helm/v4/internal/version.version=...): without it
// .Capabilities.HelmVersion would read "v4.3" where the helm CLI says "v4.3.1".
func helmVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information in this binary")
	}
	version := ""
	for _, dep := range info.Deps {
		if dep.Path == helmModule {
			version = dep.Version
			if dep.Replace != nil && dep.Replace.Version != "" {
				version = dep.Replace.Version
			}
		}
	}
	if version == "" {
		return "", fmt.Errorf("%s is not among this binary's modules", helmModule)
	}
	if got := common.DefaultCapabilities.HelmVersion.Version; got != version {
		return "", fmt.Errorf("built with helm %s but its version variable says %q, so .Capabilities.HelmVersion "+
			"would differ from the helm CLI's; build with src/helm/render/helper/build.sh "+
			"(-ldflags \"-X helm.sh/helm/v4/internal/version.version=%s\")", version, got, version)
	}
	return version, nil
}

// output writes whole lines to stdout, one writer at a time.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *output) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(failure{Error: "cannot encode the response: " + err.Error()})
	}
	b = append(b, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	// A failed write means the reader is gone; the read loop ends on EOF then.
	_, _ = o.w.Write(b)
}

type ready struct {
	Ready bool   `json:"ready"`
	Helm  string `json:"helm"`
}

type success struct {
	ID       uint64          `json:"id"`
	Manifest string          `json:"manifest"`
	Hooks    []*release.Hook `json:"hooks"`
	Version  int             `json:"version"`
	Partial  bool            `json:"partial"`
	// With `--reuse-values`: the values Helm stores (the spec's merged over the kept
	// revision's) and its chart's values (the kept revision's, coalesced).
	Config      map[string]any `json:"config,omitempty"`
	ChartValues map[string]any `json:"chartValues,omitempty"`
}

type failure struct {
	ID    uint64 `json:"id"`
	Error string `json:"error"`
}

// serve answers requests until stdin ends, then waits for the renders under way to
// answer and returns.
func serve(in io.Reader, out io.Writer, version string) error {
	o := &output{w: out}
	r := &renderer{settings: cli.New()}
	o.line(ready{Ready: true, Helm: version})

	reader := bufio.NewReaderSize(in, 1<<20)
	var inflight sync.WaitGroup
	for {
		// ReadBytes grows its buffer as needed: a request of any size is one line.
		line, err := reader.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			inflight.Add(1)
			go func(line []byte) {
				defer inflight.Done()
				o.line(r.handle(line))
			}(line)
		}
		if err != nil {
			inflight.Wait()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
}

// handle answers one request line.
func (r *renderer) handle(line []byte) (resp any) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		// Answer with the request's id if that much can be read.
		var idOnly struct {
			ID uint64 `json:"id"`
		}
		_ = json.Unmarshal(line, &idOnly)
		return failure{ID: idOnly.ID, Error: "malformed request: " + err.Error()}
	}
	defer func() {
		if p := recover(); p != nil {
			resp = failure{ID: req.ID, Error: fmt.Sprintf("render helper: internal error: %v", p)}
		}
	}()
	if req.CEL != nil {
		return r.cel(req.ID, req.CEL)
	}
	if req.Patch != nil {
		return r.patch(req.ID, req.Patch)
	}
	rel, partial, err := r.render(context.Background(), &req)
	if err != nil {
		return failure{ID: req.ID, Error: err.Error()}
	}
	if rel == nil {
		return failure{ID: req.ID, Error: "render helper: helm returned no release"}
	}
	hooks := rel.Hooks
	if hooks == nil {
		hooks = []*release.Hook{}
	}
	answer := success{ID: req.ID, Manifest: rel.Manifest, Hooks: hooks, Version: rel.Version, Partial: partial}
	if req.Kept != nil {
		answer.Config = rel.Config
		if rel.Chart != nil {
			answer.ChartValues = rel.Chart.Values
		}
	}
	return answer
}

// clusterTable holds one cluster per distinct spec, for the life of the process.
type clusterTable struct {
	mu sync.Mutex
	m  map[string]*cluster
}

func (t *clusterTable) get(spec clusterSpec) *cluster {
	key := spec.key()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*cluster{}
	}
	c, ok := t.m[key]
	if !ok {
		c = newCluster(spec)
		t.m[key] = c
	}
	return c
}
