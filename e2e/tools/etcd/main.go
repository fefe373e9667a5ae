// Command etcd is etcd's own server main, built from the Go module proxy at a
// pinned version for the e2e harness.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
