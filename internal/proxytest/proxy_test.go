package proxytest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/envtest"
	"github.com/batonhq/baton/internal/proxytest"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	return lineServer(t, func(line string) string { return line })
}

// lineServer answers each line it reads with answer(line).
func lineServer(t *testing.T, answer func(line string) string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	envtest.Serve(ln, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(answer(line)))
		}
	})
	return ln.Addr().String()
}

// dial connects to addr; the caller closes the connection.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func roundTrip(c net.Conn, within time.Duration) error {
	c.SetDeadline(time.Now().Add(within))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxy_BlackholeHealResetDelay(t *testing.T) {
	p, err := proxytest.New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	defer c.Close()
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Blackhole()
	if err := roundTrip(c, 300*time.Millisecond); err == nil {
		t.Fatal("a round trip went through a blackhole")
	}
	p.Heal()
	// The held bytes arrive after the heal; a fresh connection works too.
	c2 := dial(t, p.Addr())
	defer c2.Close()
	if err := roundTrip(c2, time.Second); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	p.SetDelay(200 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c2, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("round trip with 200ms each way took %v", d)
	}
	p.Heal()
	p.Reset()
	if err := roundTrip(c2, time.Second); err == nil {
		t.Error("a reset connection still works")
	}
	if p.Connections() != 2 {
		t.Errorf("Connections() = %d, want 2", p.Connections())
	}
}

// HoldReplies lets requests reach the server and holds its answers until
// Heal: the server counts every request, the client reads no answer.
func TestProxy_HoldReplies(t *testing.T) {
	got := make(chan string, 4)
	addr := lineServer(t, func(line string) string {
		got <- line
		return line
	})
	p, err := proxytest.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	defer c.Close()
	p.HoldReplies()
	if err := roundTrip(c, 300*time.Millisecond); err == nil {
		t.Fatal("an answer went through while replies were held")
	}
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		t.Fatal("the request did not reach the server while replies were held")
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatalf("the held answer after Heal: %v", err)
	}
}

// Retarget moves the traffic to another server: the open connection is
// reset, and a new one reaches the new target.
func TestProxy_Retarget(t *testing.T) {
	named := func(name string) string {
		return lineServer(t, func(string) string { return name + "\n" })
	}
	a, b := named("a"), named("b")
	p, err := proxytest.New(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ask := func(c net.Conn) (string, error) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("who\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	c := dial(t, p.Addr())
	defer c.Close()
	if who, err := ask(c); who != "a\n" || err != nil {
		t.Fatalf("before: %q, %v; want a", who, err)
	}
	p.Retarget(b)
	if p.Target() != b {
		t.Errorf("Target() = %s, want %s", p.Target(), b)
	}
	if who, err := ask(c); err == nil {
		t.Errorf("the connection open before Retarget still answers: %q", who)
	}
	c2 := dial(t, p.Addr())
	defer c2.Close()
	if who, err := ask(c2); who != "b\n" || err != nil {
		t.Errorf("a new connection after Retarget: %q, %v; want b", who, err)
	}
}
