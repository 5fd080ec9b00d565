// Package podresources reads GPU → container assignments from the kubelet
// PodResources v1 API and keeps them as a snapshot refreshed in the
// background, so the metrics path never waits on the kubelet.
package podresources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ContainerRef names a container that holds a device.
type ContainerRef struct {
	Namespace, Pod, Container, ResourceName string
}

// Snapshot is one reading of the kubelet. It is shared between callers and
// must not be modified.
type Snapshot struct {
	ByUUID           map[string][]ContainerRef // GPU or MIG UUID → containers holding it, deduplicated and sorted
	Allocatable      map[string]int            // resource name → devices the node can hand out (replicas counted)
	Allocated        map[string]int            // resource name → distinct devices handed out to containers
	SkippedDeviceIDs int                       // device ids of matching resources that did not parse
	Taken            time.Time                 // when this snapshot was read
}

// Status describes the refresh loop's health.
type Status struct {
	LastSuccess         time.Time // zero until the first success
	LastError           error     // error of the latest refresh; nil after a success
	ConsecutiveFailures int
	TotalFailures       int // failed refreshes since Start, for a cumulative error counter
}

// Client keeps one gRPC connection to the kubelet and a cached Snapshot.
type Client struct {
	cfg    Config
	logger *zap.Logger
	now    func() time.Time

	lifecycle sync.Mutex // guards conn, cancel, done
	conn      *grpc.ClientConn
	cancel    context.CancelFunc
	done      chan struct{}

	mu     sync.Mutex // guards the fields below
	snap   *Snapshot
	status Status
	// Remembered only to log state changes, not every refresh.
	failing              bool
	allocatableDisabled  bool
	loggedSkippedDevices bool
}

// New returns a Client; nothing happens until Start. A nil logger discards
// logs, a nil now uses time.Now.
func New(cfg Config, logger *zap.Logger, now func() time.Time) *Client {
	if logger == nil {
		logger = zap.NewNop()
	}
	if now == nil {
		now = time.Now
	}
	return &Client{cfg: cfg.withDefaults(), logger: logger, now: now}
}

// Start creates the connection (without dialling: that happens on the first
// call and again whenever it breaks) and the refresh goroutine. It fails only
// for an invalid config, never because the kubelet is unreachable.
func (c *Client) Start(context.Context) error {
	if err := c.cfg.validate(); err != nil {
		return fmt.Errorf("podresources: invalid config: %w", err)
	}
	target, _ := grpcTarget(c.cfg.Endpoint)

	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.conn != nil {
		return errors.New("podresources: already started")
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.cfg.MaxMessageBytes)),
		// gRPC's default reconnect backoff grows to 2 minutes; cap it at the
		// refresh interval so a restarted kubelet is seen on the next refresh.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  min(time.Second, c.cfg.RefreshInterval),
				Multiplier: backoff.DefaultConfig.Multiplier,
				Jitter:     backoff.DefaultConfig.Jitter,
				MaxDelay:   c.cfg.RefreshInterval,
			},
			MinConnectTimeout: c.cfg.Timeout,
		}),
	)
	if err != nil {
		return fmt.Errorf("podresources: %w", err)
	}
	// Not derived from the caller's ctx: the collector cancels Start's ctx
	// once Start returns, while the loop must run until Shutdown.
	ctx, cancel := context.WithCancel(context.Background())
	c.conn, c.cancel, c.done = conn, cancel, make(chan struct{})
	go c.run(ctx, podresourcesv1.NewPodResourcesListerClient(conn), c.done)
	return nil
}

// Snapshot returns the latest good snapshot (nil before the first success)
// and the refresh status. It never waits on the kubelet.
func (c *Client) Snapshot() (*Snapshot, Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.status
}

// Shutdown stops the refresh goroutine and closes the connection. It is safe
// to call without Start and more than once.
func (c *Client) Shutdown() error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.conn == nil {
		return nil
	}
	c.cancel() // also aborts an in-flight call
	<-c.done
	err := c.conn.Close()
	c.conn, c.cancel, c.done = nil, nil, nil
	return err
}

func (c *Client) run(ctx context.Context, api podresourcesv1.PodResourcesListerClient, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(c.cfg.RefreshInterval)
	defer ticker.Stop()
	for {
		snap, badID, err := c.read(ctx, api)
		if ctx.Err() != nil {
			return // shutting down: the aborted call is not a kubelet failure
		}
		c.record(snap, badID, err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// read asks the kubelet for a new snapshot. badID is one device id that did
// not parse, for the log.
func (c *Client) read(ctx context.Context, api podresourcesv1.PodResourcesListerClient) (*Snapshot, string, error) {
	// A missing socket (no kubelet here, or the directory not mounted) is answered without
	// dialling: grpc would log every reconnect attempt itself.
	if path := endpointPath(c.cfg.Endpoint); path != "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("kubelet PodResources socket %s does not exist: is the pod-resources directory mounted?", path)
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	list, err := api.List(callCtx, &podresourcesv1.ListPodResourcesRequest{})
	cancel()
	if err != nil {
		return nil, "", fmt.Errorf("kubelet PodResources List: %w", err)
	}

	callCtx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
	alloc, err := api.GetAllocatableResources(callCtx, &podresourcesv1.AllocatableResourcesRequest{})
	cancel()
	disabled := err != nil && allocatableDisabled(err)
	if err != nil && !disabled {
		return nil, "", fmt.Errorf("kubelet PodResources GetAllocatableResources: %w", err)
	}
	c.noteAllocatableDisabled(disabled, err)

	snap, badID := c.build(list.GetPodResources(), alloc.GetDevices())
	return snap, badID, nil
}

// allocatableDisabled reports whether the kubelet does not offer
// GetAllocatableResources. Kubelets 1.21–1.22 with the feature gate off
// answered with a plain error (codes.Unknown) saying "disabled".
func allocatableDisabled(err error) bool {
	s := status.Convert(err)
	return s.Code() == codes.Unimplemented ||
		(s.Code() == codes.Unknown && strings.Contains(s.Message(), "disabled"))
}

func (c *Client) noteAllocatableDisabled(disabled bool, err error) {
	c.mu.Lock()
	changed := disabled != c.allocatableDisabled
	c.allocatableDisabled = disabled
	c.mu.Unlock()
	if changed && disabled {
		c.logger.Info("kubelet does not offer GetAllocatableResources; allocatable GPU counts unavailable", zap.Error(err))
	}
}

func (c *Client) build(pods []*podresourcesv1.PodResources, allocatable []*podresourcesv1.ContainerDevices) (*Snapshot, string) {
	snap := &Snapshot{
		ByUUID:      make(map[string][]ContainerRef),
		Allocatable: make(map[string]int),
		Allocated:   make(map[string]int),
		Taken:       c.now(),
	}
	var badID string

	// Sets, because replicas of one GPU or an init container's reused
	// device would otherwise be counted twice.
	refs := make(map[string]map[ContainerRef]struct{})
	allocated := make(map[string]map[string]struct{})
	for _, pod := range pods {
		for _, ctr := range pod.GetContainers() {
			for _, dev := range ctr.GetDevices() {
				res := dev.GetResourceName()
				if !matchResource(c.cfg.ResourceNames, res) {
					continue
				}
				ref := ContainerRef{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: ctr.GetName(), ResourceName: res}
				for _, id := range dev.GetDeviceIds() {
					addToSet(allocated, res, id)
					d, err := ParseDeviceID(id)
					if err != nil {
						snap.SkippedDeviceIDs++
						badID = id
						continue
					}
					addToSet(refs, d.UUID, ref)
				}
			}
		}
	}
	for uuid, set := range refs {
		list := make([]ContainerRef, 0, len(set))
		for ref := range set {
			list = append(list, ref)
		}
		slices.SortFunc(list, compareRefs)
		snap.ByUUID[uuid] = list
	}
	for res, ids := range allocated {
		snap.Allocated[res] = len(ids)
	}

	allocatableIDs := make(map[string]map[string]struct{})
	for _, dev := range allocatable {
		if !matchResource(c.cfg.ResourceNames, dev.GetResourceName()) {
			continue
		}
		for _, id := range dev.GetDeviceIds() {
			addToSet(allocatableIDs, dev.GetResourceName(), id)
		}
	}
	for res, ids := range allocatableIDs {
		snap.Allocatable[res] = len(ids)
		// An explicit 0 lets consumers tell "none handed out" from "unknown".
		if _, ok := snap.Allocated[res]; !ok {
			snap.Allocated[res] = 0
		}
	}
	return snap, badID
}

// record publishes a refresh's outcome and logs only state changes.
func (c *Client) record(snap *Snapshot, badID string, err error) {
	c.mu.Lock()
	if err != nil {
		c.status.LastError = err
		c.status.ConsecutiveFailures++
		c.status.TotalFailures++
		started := !c.failing
		c.failing = true
		haveSnap := c.snap != nil
		c.mu.Unlock()
		if started {
			c.logger.Warn("cannot read GPU assignments from the kubelet; keeping the last snapshot, pod attribution goes stale",
				zap.Error(err), zap.Bool("have_snapshot", haveSnap))
		}
		return
	}
	recovered, failures := c.failing, c.status.ConsecutiveFailures
	c.failing = false
	c.snap = snap
	c.status = Status{LastSuccess: snap.Taken, TotalFailures: c.status.TotalFailures}
	logSkipped := snap.SkippedDeviceIDs > 0 && !c.loggedSkippedDevices
	c.loggedSkippedDevices = snap.SkippedDeviceIDs > 0
	c.mu.Unlock()

	if recovered {
		c.logger.Info("reading GPU assignments from the kubelet again", zap.Int("failed_refreshes", failures))
	}
	if logSkipped {
		c.logger.Warn("skipping kubelet device ids that are not GPU or MIG UUIDs (is the device plugin using index ids?)",
			zap.Int("count", snap.SkippedDeviceIDs), zap.String("example", badID))
	}
}

func addToSet[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	set, ok := m[k]
	if !ok {
		set = make(map[V]struct{})
		m[k] = set
	}
	set[v] = struct{}{}
}

func compareRefs(a, b ContainerRef) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Pod, b.Pod),
		cmp.Compare(a.Container, b.Container),
		cmp.Compare(a.ResourceName, b.ResourceName),
	)
}
