package envtest

import "net"

// Serve accepts connections on ln on a goroutine of its own and returns
// at once. Each connection is handled by handle on a goroutine of its
// own and closed when handle returns. The accepting goroutine ends when
// ln is closed; close ln (t.Cleanup or defer) to stop it.
func Serve(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}
