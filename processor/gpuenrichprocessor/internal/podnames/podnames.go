// Package podnames maps pod UIDs to pod names using the kubelet's log directory
// (/var/log/pods/<namespace>_<pod>_<uid>/<container>/). The kubelet pod-resources API
// names pods but gives no UIDs, and a process's cgroup gives the UID but no name; the log
// directory has both, needs only a read-only mount, and no API credentials. Namespaces and
// pod names are DNS labels, which cannot contain '_', so the split is unambiguous.
package podnames // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Pod is a pod's identity and its containers' names.
type Pod struct {
	Namespace  string
	Name       string
	Containers []string
	// ContainerIDs maps container IDs to names, where the source knows them (the
	// Kubernetes API does; the log directory does not).
	ContainerIDs map[string]string
	// APIUID is the pod object's UID in the Kubernetes API, where the source knows it. It
	// differs from the UID the pod was looked up by only for a static pod: the kubelet
	// (cgroups, log directory) uses its config hash, the API its mirror pod's own UID,
	// which is what k8s_attributes and kube-state-metrics key on.
	APIUID string
}

// ContainerName names the container with that ID: by its ID when known, else the pod's
// only container. "" when it cannot be told — a name is never guessed among several — and
// for a process in the pod but in no container (CRI-O's conmon, pod-level cgroups).
func (p Pod) ContainerName(id string) string {
	if id == "" {
		return ""
	}
	if name, ok := p.ContainerIDs[id]; ok {
		return name
	}
	if len(p.Containers) == 1 {
		return p.Containers[0]
	}
	return ""
}

// Index reads the directory at most once per refresh interval (and on a miss).
type Index struct {
	dir     string
	refresh time.Duration
	now     func() time.Time

	mu       sync.Mutex
	byUID    map[string]Pod
	readAt   time.Time
	lastMiss time.Time
}

// New indexes dir (e.g. /var/log/pods).
func New(dir string, refresh time.Duration, now func() time.Time) *Index {
	return &Index{dir: dir, refresh: refresh, now: now, byUID: map[string]Pod{}}
}

// Lookup returns the pod with that UID. An unknown UID triggers a re-read, at most once per
// second, since a pod may have started after the last read.
func (x *Index) Lookup(uid string) (Pod, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	if now.Sub(x.readAt) >= x.refresh {
		x.read(now)
	}
	if p, ok := x.byUID[uid]; ok {
		return p, true
	}
	if now.Sub(x.lastMiss) >= time.Second {
		x.lastMiss = now
		x.read(now)
	}
	p, ok := x.byUID[uid]
	return p, ok
}

// UID returns the UID of the pod with that namespace and name, when the directory holds
// exactly one such pod (a pod recreated under its name leaves its predecessor's directory
// until the kubelet cleans it up: then it is not known which is which).
func (x *Index) UID(namespace, name string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if now := x.now(); now.Sub(x.readAt) >= x.refresh {
		x.read(now)
	}
	uid, n := "", 0
	for u, p := range x.byUID {
		if p.Namespace == namespace && p.Name == name {
			uid, n = u, n+1
		}
	}
	return uid, n == 1
}

func (x *Index) read(now time.Time) {
	x.readAt = now
	entries, err := os.ReadDir(x.dir)
	if err != nil {
		return // keep what we had; the directory may not be mounted
	}
	byUID := make(map[string]Pod, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		parts := strings.Split(e.Name(), "_")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			continue
		}
		p := Pod{Namespace: parts[0], Name: parts[1]}
		if cs, err := os.ReadDir(filepath.Join(x.dir, e.Name())); err == nil {
			for _, c := range cs {
				if c.IsDir() {
					p.Containers = append(p.Containers, c.Name())
				}
			}
		}
		byUID[parts[2]] = p
	}
	x.byUID = byUID
}
