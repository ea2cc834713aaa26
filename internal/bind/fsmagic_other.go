//go:build !linux

package bind

import "errors"

// fsMagic: only Linux has sysfs, so no root is a live one elsewhere.
func fsMagic(string) (int64, error) {
	return 0, errors.New("drivers can be moved only on Linux")
}
