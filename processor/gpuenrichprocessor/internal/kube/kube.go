// Package kube reads, from the Kubernetes API, what the kubelet's pod-resources API and
// the node's files cannot tell: which pods on this node finished, pod names and container
// names by UID and container ID, and the DRA drivers' ResourceSlices that map claimed
// devices to GPU UUIDs. It watches only this node's pods and slices (field selector
// spec.nodeName), keeps a trimmed copy in memory, and never blocks the data path: until
// the first list arrives, or while the API server is away, it answers "unknown".
package kube // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/kube"

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
)

// Authentication types.
const (
	AuthServiceAccount = "serviceAccount" // in-cluster: the pod's service account token and CA
	AuthKubeConfig     = "kubeConfig"     // a kubeconfig file (off-cluster, tests)
)

// Config configures a Client.
type Config struct {
	AuthType   string
	KubeConfig string // path, for AuthKubeConfig ("" = default loading rules)
	NodeName   string // this node: only its pods and slices are watched
	// ResyncPeriod re-lists everything now and then (0: never).
	ResyncPeriod time.Duration
}

// Validate reports a wrong setting. A missing node name is not one: the same config runs
// off-cluster, where Start says why it watches nothing.
func (c Config) Validate() error {
	switch c.AuthType {
	case AuthServiceAccount, AuthKubeConfig:
		return nil
	}
	return fmt.Errorf("auth_type: %q is not one of %s, %s", c.AuthType, AuthServiceAccount, AuthKubeConfig)
}

// RestConfig builds the client configuration for the authentication type.
func (c Config) RestConfig() (*rest.Config, error) {
	switch c.AuthType {
	case AuthServiceAccount:
		return rest.InClusterConfig()
	case AuthKubeConfig:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.KubeConfig != "" {
			rules.ExplicitPath = c.KubeConfig
		}
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	return nil, fmt.Errorf("unknown auth_type %q", c.AuthType)
}

// Client watches this node's pods and ResourceSlices.
type Client struct {
	cfg    Config
	logger *zap.Logger
	// newClient makes the API client; tests pass a fake.
	newClient func() (kubernetes.Interface, error)

	mu      sync.Mutex
	stop    chan struct{}
	pods    cache.SharedIndexInformer
	slices  cache.SharedIndexInformer
	factory informers.SharedInformerFactory
}

// New returns a Client for cfg; nothing is read until Start.
func New(cfg Config, logger *zap.Logger) *Client {
	c := &Client{cfg: cfg, logger: logger}
	c.newClient = func() (kubernetes.Interface, error) {
		rc, err := cfg.RestConfig()
		if err != nil {
			return nil, err
		}
		rc.UserAgent = "otelcol-gpu/gpu_enrich"
		return kubernetes.NewForConfig(rc)
	}
	return c
}

// NewWithClient returns a Client over an existing API client (tests: a fake clientset).
func NewWithClient(cfg Config, logger *zap.Logger, client kubernetes.Interface) *Client {
	c := New(cfg, logger)
	c.newClient = func() (kubernetes.Interface, error) { return client, nil }
	return c
}

// Indexes of the pod informer.
const (
	byUID        = "uid"
	byNameInNode = "namespace/name"
)

// Start begins watching. It never fails the collector: without a node name, or when no
// client can be built (not in a cluster, an unreadable kubeconfig), it logs why and
// answers "unknown" — GPUs are still attributed through the kubelet and cgroups; an API
// server that is down or refuses is retried by the informers.
func (c *Client) Start(context.Context) error {
	if c.cfg.NodeName == "" {
		c.logger.Warn("kube_api: no node name (set node_name, e.g. from K8S_NODE_NAME = spec.nodeName): not watching the Kubernetes API; finished pods, container names by ID and DRA ResourceSlices stay unknown")
		return nil
	}
	client, err := c.newClient()
	if err != nil {
		c.logger.Warn("kube_api: cannot build a Kubernetes API client: not watching the API; finished pods, container names by ID and DRA ResourceSlices stay unknown",
			zap.String("auth_type", c.cfg.AuthType), zap.Error(err))
		return nil
	}
	onNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", c.cfg.NodeName).String()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, c.cfg.ResyncPeriod, informers.WithTweakListOptions(onNode))
	pods := factory.Core().V1().Pods().Informer()
	if err := pods.SetTransform(trimPod); err != nil {
		return err
	}
	if err := pods.AddIndexers(cache.Indexers{byUID: podUIDs}); err != nil {
		return err
	}
	c.watchErrors(pods, "pods")
	var slices cache.SharedIndexInformer
	if c.servesResourceSlices(client) {
		slices = factory.Resource().V1().ResourceSlices().Informer()
		c.watchErrors(slices, "resourceslices")
	}
	stop := make(chan struct{})
	factory.Start(stop)

	c.mu.Lock()
	c.stop, c.pods, c.slices, c.factory = stop, pods, slices, factory
	c.mu.Unlock()
	return nil
}

// servesResourceSlices asks discovery whether resource.k8s.io/v1 exists (Kubernetes
// 1.34+); without it there are no DRA GPUs to map and no informer to start.
func (c *Client) servesResourceSlices(client kubernetes.Interface) bool {
	res, err := client.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	if err != nil {
		c.logger.Info("the API server does not serve resource.k8s.io/v1 ResourceSlices (or it is unreachable at start): DRA devices are mapped by name only",
			zap.Error(err))
		return false
	}
	for _, r := range res.APIResources {
		if r.Name == "resourceslices" {
			return true
		}
	}
	return false
}

// watchErrors logs a failing list or watch once per failure streak, with the cause (a
// missing RBAC rule says so plainly), instead of client-go's log per retry.
func (c *Client) watchErrors(inf cache.SharedIndexInformer, what string) {
	var mu sync.Mutex
	failing := false
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		defer mu.Unlock()
		if !failing {
			failing = true
			c.logger.Warn("cannot watch "+what+" on this node through the Kubernetes API; retrying (finished pods, container names or DRA devices are unknown meanwhile)",
				zap.String("node", c.cfg.NodeName), zap.Error(err))
		}
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		mu.Lock()
		defer mu.Unlock()
		failing = false
	}})
}

// Shutdown stops the watches. Safe without Start and more than once.
func (c *Client) Shutdown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		close(c.stop)
		c.factory.Shutdown()
		c.stop = nil
	}
	return nil
}

func (c *Client) informers() (pods, slices cache.SharedIndexInformer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods, c.slices
}

// mirrorAnnotation holds a static pod's config hash on its mirror pod: the UID the kubelet
// uses for the static pod (in its cgroup and log directory), while the API object has a
// UID of its own.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// podUIDs indexes a pod under its UID and, for a mirror pod, its static pod's UID.
func podUIDs(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	out := []string{string(p.UID)}
	if hash := p.Annotations[mirrorAnnotation]; hash != "" {
		out = append(out, hash)
	}
	return out, nil
}

// trimPod keeps only what this package reads, so a node's pods cost little memory.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}
	if hash := p.Annotations[mirrorAnnotation]; hash != "" {
		out.Annotations = map[string]string{mirrorAnnotation: hash}
	}
	for _, ctr := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: ctr.Name})
	}
	for _, ctr := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: ctr.Name})
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range statuses {
			trimmed := corev1.ContainerStatus{Name: s.Name, ContainerID: s.ContainerID}
			if s.LastTerminationState.Terminated != nil {
				trimmed.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: s.LastTerminationState.Terminated.ContainerID}
			}
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, trimmed)
		}
	}
	return out, nil
}

// Lookup names the pod with that UID (or a static pod's config hash): its namespace,
// name, containers and container IDs (current and previous instances).
func (c *Client) Lookup(uid string) (podnames.Pod, bool) {
	pods, _ := c.informers()
	if pods == nil {
		return podnames.Pod{}, false
	}
	objs, err := pods.GetIndexer().ByIndex(byUID, uid)
	if err != nil || len(objs) == 0 {
		return podnames.Pod{}, false
	}
	p := objs[0].(*corev1.Pod)
	out := podnames.Pod{Namespace: p.Namespace, Name: p.Name, APIUID: string(p.UID), ContainerIDs: map[string]string{}}
	for _, ctr := range p.Spec.Containers {
		out.Containers = append(out.Containers, ctr.Name)
	}
	for _, s := range p.Status.ContainerStatuses {
		if id := runtimeID(s.ContainerID); id != "" {
			out.ContainerIDs[id] = s.Name
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			if id := runtimeID(t.ContainerID); id != "" {
				out.ContainerIDs[id] = s.Name
			}
		}
	}
	return out, true
}

// runtimeID strips the runtime prefix of a status container ID ("containerd://<id>").
func runtimeID(s string) string {
	if _, id, ok := strings.Cut(s, "://"); ok {
		return id
	}
	return s
}

// UID returns the API object's UID of the pod with that namespace and name; for a static
// pod its mirror's (what k8s_attributes and kube-state-metrics know it by), not the config
// hash the kubelet uses in cgroups and log directories.
func (c *Client) UID(namespace, name string) (string, bool) {
	pods, _ := c.informers()
	if pods == nil {
		return "", false
	}
	obj, ok, err := pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return "", false
	}
	return string(obj.(*corev1.Pod).UID), true
}

// Finished reports whether the pod is known to have finished (phase Succeeded or
// Failed). An unknown pod is not: the kubelet may know it before the API watch does.
func (c *Client) Finished(namespace, name string) bool {
	pods, _ := c.informers()
	if pods == nil {
		return false
	}
	obj, ok, err := pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false
	}
	phase := obj.(*corev1.Pod).Status.Phase
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// UUID returns the "uuid" attribute the driver published for a device of a pool in this
// node's ResourceSlices (the newest generation of the pool).
func (c *Client) UUID(driver, pool, device string) (string, bool) {
	_, slices := c.informers()
	if slices == nil {
		return "", false
	}
	var uuid string
	found, gen := false, int64(-1)
	for _, obj := range slices.GetStore().List() {
		s := obj.(*resourcev1.ResourceSlice)
		if s.Spec.Driver != driver || s.Spec.Pool.Name != pool || s.Spec.Pool.Generation < gen {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name != device {
				continue
			}
			if v, ok := stringAttribute(d, driver, "uuid"); ok {
				uuid, found, gen = v, true, s.Spec.Pool.Generation
			}
		}
	}
	return uuid, found
}

// stringAttribute reads a device attribute by its plain name or its name qualified with
// the driver's domain ("gpu.nvidia.com/uuid").
func stringAttribute(d resourcev1.Device, driver, name string) (string, bool) {
	for _, key := range []resourcev1.QualifiedName{resourcev1.QualifiedName(name), resourcev1.QualifiedName(driver + "/" + name)} {
		if a, ok := d.Attributes[key]; ok && a.StringValue != nil {
			return *a.StringValue, true
		}
	}
	return "", false
}

// Devices counts, per driver, the devices its slices publish for this node (nil until
// the slices are known).
func (c *Client) Devices() map[string]int {
	_, slices := c.informers()
	if slices == nil || !slices.HasSynced() {
		return nil
	}
	// Only the newest generation of each pool counts.
	newest := map[[2]string]int64{}
	list := slices.GetStore().List()
	for _, obj := range list {
		s := obj.(*resourcev1.ResourceSlice)
		k := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	out := map[string]int{}
	for _, obj := range list {
		s := obj.(*resourcev1.ResourceSlice)
		if s.Spec.Pool.Generation == newest[[2]string{s.Spec.Driver, s.Spec.Pool.Name}] {
			out[s.Spec.Driver] += len(s.Spec.Devices)
		}
	}
	return out
}
