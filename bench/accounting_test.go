package main

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/batonhq/baton/audit"
)

// TestTypicalDay checks the Account the section stores is the day it
// says: 1,440 ticks in ten ranges, three that did not run ok among those
// that ran, two missed, one lost.
func TestTypicalDay(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	a := typicalDay("job-7", now)
	if len(a.Ranges) != 10 {
		t.Fatalf("%d ranges, want 10: %+v", len(a.Ranges), a.Ranges)
	}
	next := minuteNext()
	rep, err := audit.Compute(audit.Input{Account: a, From: now.Add(-24 * time.Hour), To: now, Now: now,
		Schedules: func(audit.Spec) (audit.Next, error) { return next, nil }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[audit.Class]int64{audit.Ran: 1437, audit.Missed: 2, audit.Lost: 1}
	if rep.Due != 1440 || len(rep.Classes) != len(want) {
		t.Fatalf("due %d, classes %v; want 1440, %v", rep.Due, rep.Classes, want)
	}
	for c, n := range want {
		if rep.Classes[c] != n {
			t.Errorf("%s: %d, want %d", c, rep.Classes[c], n)
		}
	}
	if len(rep.NotOK) != 5 {
		t.Errorf("%d ranges not ok, want 5 (2 failed, a timeout, lost, missed): %+v", len(rep.NotOK), rep.NotOK)
	}
}

// TestWorstAccountIsFull checks the largest Account fills audit.MaxBytes
// but for less than one range of it.
func TestWorstAccountIsFull(t *testing.T) {
	n, err := fittedSize(worstAccount("job-7", time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if n > audit.MaxBytes || n < audit.MaxBytes-400 {
		t.Errorf("stored size %d, want within 400 bytes below %d", n, audit.MaxBytes)
	}
}

// TestBytesDown sends bytes from a server through the proxy and checks
// they are counted, and the client's are not.
func TestBytesDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 10)
		io.ReadFull(c, buf)
		c.Write(make([]byte, 1000))
	}()
	p, err := newCountProxy(ln.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(make([]byte, 10))
	if _, err := io.ReadFull(c, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if got := p.BytesDown(); got != 1000 {
		t.Errorf("BytesDown %d, want 1000", got)
	}
}
