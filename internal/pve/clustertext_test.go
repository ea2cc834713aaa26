package pve

import "testing"

// A container's GPUs are its /dev/nvidiaN in ranges of consecutive minors, in order,
// then how many other nvidia nodes it has and whether a cgroup rule lets it in.
func TestClusterGuestGPUs(t *testing.T) {
	for _, tc := range []struct {
		gu   ClusterGuestReport
		want string
	}{
		{ClusterGuestReport{Kind: "ct", Devices: []string{"/dev/nvidia3", "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia1", "/dev/nvidia-uvm"}},
			"/dev/nvidia0-1,3, 2 control nodes"},
		{ClusterGuestReport{Kind: "ct", Devices: []string{"/dev/nvidia5"}, CgroupAllow: []string{"c 195:* rwm"}}, "/dev/nvidia5, cgroup 195"},
		{ClusterGuestReport{Kind: "vm", Mappings: []ClusterUse{{Mapping: "pro6000", Needs: 2}, {Mapping: "a6000", Needs: 1}}}, "pro6000 ×2, a6000 ×1"},
	} {
		if got := guestGPUs(tc.gu); got != tc.want {
			t.Errorf("guestGPUs(%+v) = %q, want %q", tc.gu, got, tc.want)
		}
	}
}
