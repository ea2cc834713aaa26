package bind

import "syscall"

// fsMagic is the type of the filesystem p lies on, as statfs(2) reports it.
func fsMagic(p string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}
