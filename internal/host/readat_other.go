//go:build !linux

package host

import "errors"

// Elsewhere no directory is kept open (listDir), so these are never called.

func readShortAt(int, string, fileCap) ([]byte, error) { return nil, errors.ErrUnsupported }

func readlinkAt(int, string) (string, error) { return "", errors.ErrUnsupported }

func closeFD(int) {}
