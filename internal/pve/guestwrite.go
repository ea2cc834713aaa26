package pve

import (
	"errors"

	"github.com/gpusplit/gpusplit/internal/host"
)

// ErrWouldStop ends a check of a change that found reasons the write would stop: the
// report that comes with it holds them, and nothing was written.
var ErrWouldStop = errors.New("the write would stop, for the reasons in the report; nothing was written")

// WriteGuest writes one guest config edit with apply, under Proxmox's lock and with a
// backup kept for command, or checks what would stop it: the files written, the problems
// found, whether it was applied, and the error (ErrWouldStop for a check that found
// problems).
func WriteGuest(h *host.Host, command string, apply bool, edit Edit) ([]FileResult, []string, bool, error) {
	w := &Writer{H: h, Command: command}
	problems := []string{}
	if !apply {
		for _, p := range w.Check([]Edit{edit}) {
			problems = append(problems, p.String())
		}
		if len(problems) > 0 {
			return []FileResult{}, problems, false, ErrWouldStop
		}
		return []FileResult{}, problems, false, nil
	}
	files, err := w.Commit([]Edit{edit})
	var tx *TxError
	if errors.As(err, &tx) {
		for _, p := range tx.Problems {
			problems = append(problems, p.String())
		}
	}
	if files == nil {
		files = []FileResult{}
	}
	return files, problems, err == nil, err
}
