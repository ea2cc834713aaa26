package plural

import "testing"

func TestN(t *testing.T) {
	for _, tc := range []struct {
		n         int
		one, many string
		want      string
	}{
		{0, "GPU", "GPUs", "0 GPUs"},
		{1, "GPU", "GPUs", "1 GPU"},
		{2, "GPU", "GPUs", "2 GPUs"},
		{1, "NUMA node", "NUMA nodes", "1 NUMA node"},
		{-1, "x", "xs", "-1 xs"},
	} {
		if got := N(tc.n, tc.one, tc.many); got != tc.want {
			t.Errorf("N(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if S(1, "error") != "1 error" || S(3, "error") != "3 errors" {
		t.Error("S")
	}
}
