package main

// The clusters the helper renders against, one entry per distinct (kubeconfig, context,
// impersonated user, impersonated groups), each kept for the life of the process so that
// discovery stays warm between renders.

import (
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"

	"helm.sh/helm/v4/pkg/cli"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterSpec is the request's `cluster`: what `--kubeconfig`, `--kube-context`,
// `--kube-as-user` and `--kube-as-group` would say on helm's command line.
type clusterSpec struct {
	Kubeconfig string   `json:"kubeconfig"`
	Context    string   `json:"context"`
	AsUser     string   `json:"asUser"`
	AsGroups   []string `json:"asGroups"`
}

// key identifies the spec in the cluster table (nil and empty groups are the same).
func (s clusterSpec) key() string {
	if s.AsGroups == nil {
		s.AsGroups = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// cluster is the long-lived client state for one spec.
//
// Connection settings come from Helm's own EnvSettings (so the REST config carries the
// CLI's user agent, retrying round tripper and burst limit), with every cluster setting
// the helm CLI would take from HELM_KUBE* replaced by the spec: the helper is told the
// cluster, it never inherits one.
type cluster struct {
	settings *cli.EnvSettings
	flags    *genericclioptions.ConfigFlags

	mu sync.Mutex
	// Set once the kubeconfig has loaded; a failure is not kept, so the next request
	// reads the kubeconfig again, as a fresh helm process would.
	config *rest.Config
	disco  discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// The discovery token the cached discovery belongs to.
	token string
	// Held (shared) for each discovery walk, and (exclusive) to invalidate: a render's
	// walk reads one state of the cache, never groups of the old and resources of the new.
	walk sync.RWMutex
}

func newCluster(spec clusterSpec) *cluster {
	s := cli.New()
	if spec.Kubeconfig != "" {
		s.KubeConfig = spec.Kubeconfig
	} else {
		// helm's default: $KUBECONFIG as an explicit path when set, else the standard
		// loading rules (~/.kube/config, then in-cluster).
		s.KubeConfig = os.Getenv("KUBECONFIG")
	}
	s.KubeContext = spec.Context
	s.KubeAsUser = spec.AsUser
	s.KubeAsGroups = append([]string(nil), spec.AsGroups...)
	s.KubeToken = ""
	s.KubeAPIServer = ""
	s.KubeCaFile = ""
	s.KubeTLSServerName = ""
	s.KubeInsecureSkipTLSVerify = false
	s.SetNamespace("")
	flags, _ := s.RESTClientGetter().(*genericclioptions.ConfigFlags)
	return &cluster{settings: s, flags: flags}
}

// namespace is what `--namespace ""` resolves to with this kubeconfig: the context's
// namespace, else "default" (EnvSettings.Namespace with no flag and no HELM_NAMESPACE).
func (c *cluster) namespace() string {
	return c.settings.Namespace()
}

// load reads the kubeconfig once and builds the cached discovery client and mapper on it.
func (c *cluster) load() (*rest.Config, discovery.CachedDiscoveryInterface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config != nil {
		return c.config, c.disco, c.mapper, nil
	}
	config, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	// No client-side rate limit for discovery. Each helm process starts with a full token
	// bucket (client-go's discovery default: a burst of 300, then 5 requests a second),
	// so no single render ever waits on it; one long-lived client would, after a few
	// hundred renders, wait 200 ms for every request (each render asks /version).
	dc := rest.CopyConfig(config)
	dc.QPS = -1
	client, err := discovery.NewDiscoveryClientForConfig(dc)
	if err != nil {
		return nil, nil, nil, err
	}
	c.config = config
	c.disco = memory.NewMemCacheClient(client)
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(c.disco)
	return c.config, c.disco, c.mapper, nil
}

// serve is called once per request before it renders: a token other than the one the
// cached discovery belongs to (and an empty token, always) drops the cache, so the
// render reads discovery afresh, as the helm CLI does every time.
func (c *cluster) serve(token string) *requestGetter {
	c.mu.Lock()
	stale := token == "" || token != c.token
	c.token = token
	mapper := c.mapper
	c.mu.Unlock()
	if stale && mapper != nil {
		// Reset drops the mapper's cache and invalidates the discovery client under it.
		c.walk.Lock()
		mapper.Reset()
		c.walk.Unlock()
	}
	return &requestGetter{cluster: c}
}

// requestGetter is the RESTClientGetter one render's action.Configuration uses: the
// cluster's shared config and discovery, and a record of whether this render's discovery
// came back partial.
type requestGetter struct {
	cluster *cluster
	partial atomic.Bool
}

var _ genericclioptions.RESTClientGetter = (*requestGetter)(nil)

func (g *requestGetter) ToRESTConfig() (*rest.Config, error) {
	config, _, _, err := g.cluster.load()
	if err != nil {
		return nil, err
	}
	// Each caller gets its own copy; the engine's lookup builds live clients from it.
	return rest.CopyConfig(config), nil
}

func (g *requestGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	_, disco, _, err := g.cluster.load()
	if err != nil {
		return nil, err
	}
	return &requestDiscovery{CachedDiscoveryInterface: disco, partial: &g.partial, walk: &g.cluster.walk}, nil
}

func (g *requestGetter) ToRESTMapper() (meta.RESTMapper, error) {
	_, _, mapper, err := g.cluster.load()
	if err != nil {
		return nil, err
	}
	return mapper, nil
}

func (g *requestGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return g.cluster.flags.ToRawKubeConfigLoader()
}

// requestDiscovery is the shared cached discovery client as one render sees it, in the
// place of the disk cache the helm CLI's discovery client is (client-go's disk cache over
// the same memory cache over the same discovery client):
//
//   - Invalidate does nothing. Helm invalidates the discovery client before it reads
//     capabilities, so every helm process reads discovery afresh; here the discovery
//     token decides that instead.
//   - Like the disk cache, it does not offer aggregated discovery itself, so client-go's
//     ServerGroupsAndResources takes the same walk as under the CLI: the memory cache's
//     group list (a stale group version of aggregated discovery left out), then each
//     listed group version's resources from the memory cache. The same walk over the
//     same cache gives the same .Capabilities.
//   - It records whether that walk failed for some group (IsGroupDiscoveryFailedError),
//     the condition of helm's "the kubernetes server has an orphaned API service"
//     warning, for this render's response only. (In helm v4.3.1 the warning itself is
//     never printed: GetVersionSet drops exactly that error before getCapabilities
//     looks for it.)
type requestDiscovery struct {
	discovery.CachedDiscoveryInterface
	partial *atomic.Bool
	walk    *sync.RWMutex
}

func (d *requestDiscovery) Invalidate() {}

func (d *requestDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.walk.RLock()
	groups, resources, err := discovery.ServerGroupsAndResources(d)
	d.walk.RUnlock()
	if err != nil && discovery.IsGroupDiscoveryFailedError(err) {
		d.partial.Store(true)
	}
	return groups, resources, err
}
