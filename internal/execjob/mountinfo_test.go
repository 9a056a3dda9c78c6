//go:build linux

package execjob

import (
	"strings"
	"testing"
)

// The cgroup v2 mount is found beside v1 (a hybrid layout), alone, with
// an escaped path, and refused when read-only (a pod's) or absent.
func TestParseMountinfo(t *testing.T) {
	v1 := "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	for _, c := range []struct{ name, info, mount, root, err string }{
		{"hybrid", "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" + v1 +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", "/", ""},
		{"unified", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", "/", ""},
		{"bind of a subtree", "30 23 0:26 /system.slice/x.service /mnt/cg\\040x rw shared:4 - cgroup2 cgroup2 rw\n", "/mnt/cg x", "/system.slice/x.service", ""},
		{"read-only", "1205 1199 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n", "", "", "read-only"},
		{"none", v1, "", "", "no cgroup2 mount"},
	} {
		mount, root, err := parseMountinfo(strings.NewReader(c.info))
		if mount != c.mount || root != c.root || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: got %q, %q, %v; want %q, %q, error %q", c.name, mount, root, err, c.mount, c.root, c.err)
		}
	}
}
