// The etcd server binary for the Kubernetes test environment: build.sh compiles this
// against go.etcd.io/etcd/server/v3 at the version the script pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
