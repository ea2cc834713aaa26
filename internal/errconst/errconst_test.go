package errconst

import (
	"errors"
	"fmt"
	"testing"
)

var (
	errA error = &Error{Text: "a"}
	errB error = &Error{Text: "a"}
)

func TestError(t *testing.T) {
	if errA.Error() != "a" {
		t.Errorf("text %q", errA.Error())
	}
	if errors.Is(errA, errB) {
		t.Error("two values of the same text are one error")
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", errA), errA) {
		t.Error("a wrapped value is not found")
	}
}
