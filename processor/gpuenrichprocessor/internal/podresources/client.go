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

// Snapshot is one reading of the kubelet: every pod it lists, with the GPU devices
// (device-plugin IDs of the configured resource names, DRA devices of the configured
// drivers) allocated to each container. IDs are kept as the kubelet gives them: mapping
// them to GPUs needs the node's GPUs (indexes, minor numbers) and, for DRA, the
// driver's ResourceSlices. A Snapshot is shared between callers and must not be modified.
type Snapshot struct {
	Pods []Pod // sorted by namespace and name
	// Allocatable is every device ID the node can hand out per resource name (replicas
	// counted), from GetAllocatableResources; nil when the kubelet does not offer it.
	Allocatable map[string][]string
	Taken       time.Time // when this snapshot was read
}

// Pod is a pod the kubelet lists. Older kubelets (before 1.29, or with the feature gate
// KubeletPodResourcesListUseActivePods off) also list pods that finished.
type Pod struct {
	Namespace, Name string
	Containers      []Container // every container, with or without devices
}

// Container is one container of a pod and the GPU devices allocated to it.
type Container struct {
	Name    string
	Devices []Device      // device-plugin allocations
	Claims  []ClaimDevice // DRA allocations
	// Unlisted are devices under a resource name that ResourceNames does not match but
	// whose IDs name NVIDIA GPUs (GPU and MIG UUIDs, GKE's "nvidia<minor>"): a renamed
	// resource (nvidia.com/a100-80gb) the operator has not added. They are not attributed;
	// the processor counts and reports them rather than let them vanish.
	Unlisted []Device
}

// Device is one device ID a device plugin allocated, under its resource name.
type Device struct {
	ResourceName, ID string
}

// ClaimDevice is one device allocated to the container through a DRA ResourceClaim.
type ClaimDevice struct {
	Claim, ClaimNamespace string
	Driver, Pool, Device  string
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
	failing             bool
	allocatableDisabled bool
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
		snap, err := c.read(ctx, api)
		if ctx.Err() != nil {
			return // shutting down: the aborted call is not a kubelet failure
		}
		c.record(snap, err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// read asks the kubelet for a new snapshot.
func (c *Client) read(ctx context.Context, api podresourcesv1.PodResourcesListerClient) (*Snapshot, error) {
	// A missing socket (no kubelet here, or the directory not mounted) is answered without
	// dialling: grpc would log every reconnect attempt itself.
	if path := endpointPath(c.cfg.Endpoint); path != "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kubelet PodResources socket %s does not exist: is the pod-resources directory mounted?", path)
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	list, err := api.List(callCtx, &podresourcesv1.ListPodResourcesRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List: %w", err)
	}

	callCtx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
	alloc, err := api.GetAllocatableResources(callCtx, &podresourcesv1.AllocatableResourcesRequest{})
	cancel()
	disabled := err != nil && allocatableDisabled(err)
	if err != nil && !disabled {
		return nil, fmt.Errorf("kubelet PodResources GetAllocatableResources: %w", err)
	}
	c.noteAllocatableDisabled(disabled, err)

	var allocatable []*podresourcesv1.ContainerDevices
	if !disabled {
		allocatable = alloc.GetDevices()
		if allocatable == nil {
			allocatable = []*podresourcesv1.ContainerDevices{} // answered, with nothing
		}
	}
	return c.build(list.GetPodResources(), allocatable), nil
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

func (c *Client) build(pods []*podresourcesv1.PodResources, allocatable []*podresourcesv1.ContainerDevices) *Snapshot {
	snap := &Snapshot{Taken: c.now()}
	for _, pod := range pods {
		p := Pod{Namespace: pod.GetNamespace(), Name: pod.GetName()}
		for _, ctr := range pod.GetContainers() {
			out := Container{Name: ctr.GetName()}
			for _, dev := range ctr.GetDevices() {
				listed := matchResource(c.cfg.ResourceNames, dev.GetResourceName())
				for _, id := range dev.GetDeviceIds() {
					d := Device{ResourceName: dev.GetResourceName(), ID: id}
					switch {
					case listed:
						out.Devices = append(out.Devices, d)
					case namesGPU(id):
						out.Unlisted = append(out.Unlisted, d)
					}
				}
			}
			for _, dr := range ctr.GetDynamicResources() {
				for _, r := range dr.GetClaimResources() {
					if !slices.Contains(c.cfg.DRADrivers, r.GetDriverName()) {
						continue
					}
					out.Claims = append(out.Claims, ClaimDevice{
						Claim: dr.GetClaimName(), ClaimNamespace: dr.GetClaimNamespace(),
						Driver: r.GetDriverName(), Pool: r.GetPoolName(), Device: r.GetDeviceName(),
					})
				}
			}
			p.Containers = append(p.Containers, out)
		}
		snap.Pods = append(snap.Pods, p)
	}
	slices.SortFunc(snap.Pods, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if allocatable != nil {
		snap.Allocatable = map[string][]string{}
		for _, dev := range allocatable {
			if matchResource(c.cfg.ResourceNames, dev.GetResourceName()) {
				snap.Allocatable[dev.GetResourceName()] = append(snap.Allocatable[dev.GetResourceName()], dev.GetDeviceIds()...)
			}
		}
	}
	return snap
}

// record publishes a refresh's outcome and logs only state changes.
func (c *Client) record(snap *Snapshot, err error) {
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
	c.mu.Unlock()

	if recovered {
		c.logger.Info("reading GPU assignments from the kubelet again", zap.Int("failed_refreshes", failures))
	}
}
