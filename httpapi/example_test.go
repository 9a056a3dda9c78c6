package httpapi_test

import (
	"fmt"
	"time"

	"github.com/batonhq/baton/httpapi"
)

// An operator checks the drain and release timeouts against Kubernetes'
// terminationGracePeriodSeconds.
func ExampleCheckGracePeriod() {
	cfg := httpapi.ShutdownConfig{ShutdownTimeout: 14 * time.Second}
	fmt.Println(httpapi.ShutdownBudget(cfg))
	fmt.Println(httpapi.CheckGracePeriod(cfg, 30*time.Second))
	fmt.Println(httpapi.CheckGracePeriod(httpapi.ShutdownConfig{}, 30*time.Second))
	// Output:
	// 30s
	// <nil>
	// httpapi: grace period too short: the shutdown budget 41s (shutdown_timeout 25s + kill_grace 5s + kill_grace_margin 1s + release_timeout 5s + http_shutdown_timeout 5s) exceeds the grace period 30s by 11s
}
