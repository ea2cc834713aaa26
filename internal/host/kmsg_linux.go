package host

// kmsgDevice decodes a Linux device number and reports whether it is /dev/kmsg's: the
// memory devices' major 1, minor 11.
func kmsgDevice(rdev uint64) (major, minor uint64, ok bool) {
	major = (rdev>>8)&0xfff | (rdev>>32)&^0xfff
	minor = rdev&0xff | (rdev>>12)&^0xff
	return major, minor, major == 1 && minor == 11
}
