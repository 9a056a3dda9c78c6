package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonhq/baton/driver"
	"github.com/batonhq/baton/election"
)

// WatchAttempt reports each period the attempt waits, with the probe's
// error or "no answer", and nothing once stopped.
func TestWatchAttempt_ReportsEachPeriodUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		ctx := election.WithAttemptReporter(context.Background(), func(err error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprint(err))
		})
		probes := 0
		stop := driver.WatchAttempt(ctx, time.Second, "store: acquire", func(ctx context.Context) error {
			probes++
			if probes == 1 {
				return errors.New("connection refused")
			}
			return nil
		})
		time.Sleep(2500 * time.Millisecond)
		stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []string{"connection refused", "store: acquire: no answer within 1s"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("reported %q, want %q", got, want)
		}
	})
}

// Without a reporter in the context, reporting does nothing.
func TestReportAttempt_WithoutReporter(t *testing.T) {
	driver.ReportAttempt(context.Background(), errors.New("x"))
	stop := driver.WatchAttempt(context.Background(), time.Millisecond, "x", nil)
	time.Sleep(5 * time.Millisecond)
	stop()
}
