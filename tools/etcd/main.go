// Command etcd is etcd's server, built at the version pinned in go.mod for the testbed's
// Kubernetes API server (make deps). etcd publishes no main package as a module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
