package envtest

import "net"

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago: all n are held open together while they are picked, so none
// repeats. Another process can still take one before the caller binds it;
// callers that start servers on them retry on new ports then.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
