// Package fakekubelet is a kubelet PodResources v1 gRPC server on a unix
// socket, speaking the real k8s.io/kubelet API, for tests and demos.
package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Pod is a pod as List reports it.
type Pod struct {
	Namespace  string      `yaml:"namespace" json:"namespace"`
	Name       string      `yaml:"name" json:"name"`
	Containers []Container `yaml:"containers" json:"containers"`
}

// Container is a container and the devices assigned to it: by device plugins
// (Devices) and by Dynamic Resource Allocation (DynamicResources).
type Container struct {
	Name             string            `yaml:"name" json:"name"`
	Devices          []Devices         `yaml:"devices" json:"devices"`
	DynamicResources []DynamicResource `yaml:"dynamicResources,omitempty" json:"dynamicResources,omitempty"`
}

// DynamicResource is a ResourceClaim the container uses and the devices allocated
// to it, as pod-resources v1 reports them (ContainerResources.dynamic_resources).
type DynamicResource struct {
	ClaimName      string          `yaml:"claimName" json:"claimName"`
	ClaimNamespace string          `yaml:"claimNamespace" json:"claimNamespace"`
	ClaimResources []ClaimResource `yaml:"claimResources" json:"claimResources"`
}

// ClaimResource is one allocated device: the DRA driver, its pool (the node name
// for node-local drivers) and the device's name in that pool's ResourceSlices.
type ClaimResource struct {
	DriverName string   `yaml:"driverName" json:"driverName"`
	PoolName   string   `yaml:"poolName" json:"poolName"`
	DeviceName string   `yaml:"deviceName" json:"deviceName"`
	CDIDevices []string `yaml:"cdiDevices,omitempty" json:"cdiDevices,omitempty"`
}

// Devices is a set of device ids of one resource.
type Devices struct {
	ResourceName string   `yaml:"resourceName" json:"resourceName"`
	DeviceIDs    []string `yaml:"deviceIDs" json:"deviceIDs"`
}

// Mode selects how the server answers.
type Mode int

const (
	ModeOK                       Mode = iota // answer normally
	ModeError                                // every call fails with codes.Unavailable
	ModeHang                                 // every call blocks until the caller gives up
	ModeUnimplementedAllocatable             // GetAllocatableResources is codes.Unimplemented, as on old kubelets
)

// Server is a running fake kubelet.
type Server struct {
	grpc *grpc.Server
	svc  *service
	done chan struct{} // closed when Serve returns
}

// Start listens on socketPath (replacing a stale socket left there) and
// serves pods and allocatable until Stop.
func Start(socketPath string, pods []Pod, allocatable []Devices) (*Server, error) {
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, err
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: %w", err)
	}
	svc := &service{stopped: make(chan struct{})}
	svc.setPods(pods)
	svc.setAllocatable(allocatable)
	s := &Server{grpc: grpc.NewServer(), svc: svc, done: make(chan struct{})}
	podresourcesv1.RegisterPodResourcesListerServer(s.grpc, svc)
	go func() {
		defer close(s.done)
		_ = s.grpc.Serve(lis) // returns when Stop closes the listener
	}()
	return s, nil
}

// SetPods replaces the pods List reports.
func (s *Server) SetPods(pods []Pod) { s.svc.setPods(pods) }

// SetAllocatable replaces what GetAllocatableResources reports.
func (s *Server) SetAllocatable(devs []Devices) { s.svc.setAllocatable(devs) }

// SetMode changes how the server answers from the next call on.
func (s *Server) SetMode(m Mode) {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	s.svc.mode = m
}

// Hanging is the number of calls blocked in ModeHang right now, so tests can
// wait for a call to be in flight instead of sleeping.
func (s *Server) Hanging() int {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	return s.svc.hanging
}

// Stop closes the listener (which removes the socket file) and every
// connection, releasing hanging calls. Safe to call more than once.
func (s *Server) Stop() {
	s.svc.stopOnce.Do(func() { close(s.svc.stopped) })
	s.grpc.Stop()
	<-s.done
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("fakekubelet: %s exists and is not a socket", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	return nil
}

type service struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	stopped  chan struct{}
	stopOnce sync.Once

	mu          sync.Mutex
	pods        []Pod
	allocatable []Devices
	mode        Mode
	hanging     int
}

func (s *service) setPods(pods []Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = clonePods(pods)
}

func (s *service) setAllocatable(devs []Devices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocatable = cloneDevices(devs)
}

// answer applies the mode; it returns the state to answer from, or an error.
func (s *service) answer(ctx context.Context, allocatable bool) ([]Pod, []Devices, error) {
	s.mu.Lock()
	mode, pods, devs := s.mode, s.pods, s.allocatable
	if mode == ModeHang {
		s.hanging++
	}
	s.mu.Unlock()

	switch mode {
	case ModeError:
		return nil, nil, status.Error(codes.Unavailable, "fake kubelet: unavailable")
	case ModeHang:
		select {
		case <-ctx.Done():
		case <-s.stopped:
		}
		s.mu.Lock()
		s.hanging--
		s.mu.Unlock()
		if ctx.Err() == nil {
			return nil, nil, status.Error(codes.Unavailable, "fake kubelet: stopping")
		}
		return nil, nil, status.FromContextError(ctx.Err()).Err()
	case ModeUnimplementedAllocatable:
		if allocatable {
			return nil, nil, status.Error(codes.Unimplemented, "method GetAllocatableResources not implemented")
		}
	}
	return pods, devs, nil
}

func (s *service) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	pods, _, err := s.answer(ctx, false)
	if err != nil {
		return nil, err
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range pods {
		resp.PodResources = append(resp.PodResources, podToProto(p))
	}
	return resp, nil
}

func (s *service) GetAllocatableResources(ctx context.Context, _ *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	_, devs, err := s.answer(ctx, true)
	if err != nil {
		return nil, err
	}
	return &podresourcesv1.AllocatableResourcesResponse{Devices: devicesToProto(devs)}, nil
}

func (s *service) Get(ctx context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	pods, _, err := s.answer(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Namespace == req.GetPodNamespace() && p.Name == req.GetPodName() {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: podToProto(p)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.GetPodNamespace(), req.GetPodName())
}

func podToProto(p Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Namespace: p.Namespace, Name: p.Name}
	for _, c := range p.Containers {
		out.Containers = append(out.Containers, &podresourcesv1.ContainerResources{
			Name:             c.Name,
			Devices:          devicesToProto(c.Devices),
			DynamicResources: dynamicToProto(c.DynamicResources),
		})
	}
	return out
}

func devicesToProto(devs []Devices) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for _, d := range devs {
		out = append(out, &podresourcesv1.ContainerDevices{
			ResourceName: d.ResourceName,
			DeviceIds:    append([]string(nil), d.DeviceIDs...),
		})
	}
	return out
}

func dynamicToProto(drs []DynamicResource) []*podresourcesv1.DynamicResource {
	var out []*podresourcesv1.DynamicResource
	for _, d := range drs {
		dr := &podresourcesv1.DynamicResource{ClaimName: d.ClaimName, ClaimNamespace: d.ClaimNamespace}
		for _, r := range d.ClaimResources {
			cr := &podresourcesv1.ClaimResource{DriverName: r.DriverName, PoolName: r.PoolName, DeviceName: r.DeviceName}
			for _, name := range r.CDIDevices {
				cr.CdiDevices = append(cr.CdiDevices, &podresourcesv1.CDIDevice{Name: name})
			}
			dr.ClaimResources = append(dr.ClaimResources, cr)
		}
		out = append(out, dr)
	}
	return out
}

// Copies keep the served state independent of the caller's slices.
func clonePods(pods []Pod) []Pod {
	out := make([]Pod, len(pods))
	for i, p := range pods {
		out[i] = Pod{Namespace: p.Namespace, Name: p.Name, Containers: make([]Container, len(p.Containers))}
		for j, c := range p.Containers {
			out[i].Containers[j] = Container{Name: c.Name, Devices: cloneDevices(c.Devices), DynamicResources: cloneDynamic(c.DynamicResources)}
		}
	}
	return out
}

func cloneDevices(devs []Devices) []Devices {
	out := make([]Devices, len(devs))
	for i, d := range devs {
		out[i] = Devices{ResourceName: d.ResourceName, DeviceIDs: append([]string(nil), d.DeviceIDs...)}
	}
	return out
}

func cloneDynamic(drs []DynamicResource) []DynamicResource {
	if drs == nil {
		return nil
	}
	out := make([]DynamicResource, len(drs))
	for i, d := range drs {
		out[i] = DynamicResource{ClaimName: d.ClaimName, ClaimNamespace: d.ClaimNamespace, ClaimResources: make([]ClaimResource, len(d.ClaimResources))}
		for j, r := range d.ClaimResources {
			r.CDIDevices = append([]string(nil), r.CDIDevices...)
			out[i].ClaimResources[j] = r
		}
	}
	return out
}
