//go:build unix && !linux

package host

// kmsgDevice: only Linux has /dev/kmsg.
func kmsgDevice(rdev uint64) (major, minor uint64, ok bool) {
	return rdev >> 24, rdev & 0xffffff, false
}
