package harness

import (
	"net"
	"sync"
)

var (
	portsMu sync.Mutex
	// handedOut remembers ports this process already gave to a cluster, so
	// two clusters started side by side never receive the same one.
	handedOut = map[int]bool{}
)

// freePorts returns n distinct loopback ports that were free a moment ago.
// Another process may still take one before the cluster binds it; Start
// retries on such a failure with fresh ports.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var (
		ports     []int
		listeners []net.Listener
	)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut[port] {
			continue
		}
		handedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}
