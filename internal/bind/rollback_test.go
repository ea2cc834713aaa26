package bind

import (
	"context"
	"errors"
	"testing"
	"time"
)

// RollbackShown changes nothing when what the user was shown has changed under the lock
// (the journal replaced, a device's driver moved), and otherwise puts back the devices
// shown.
func TestRollbackShown(t *testing.T) {
	f, p := fourGPUs()
	h, _ := gpuHost(t, f)
	l := lockOf(t, h)
	if _, err := Apply(context.Background(), l, f, p, fast); err != nil {
		t.Fatal(err)
	}
	shown, err := ReadJournal(h)
	if err != nil {
		t.Fatal(err)
	}
	todo := NotBack(f, shown.Devices)
	if len(todo) != 8 {
		t.Fatalf("%d devices to put back, want 8", len(todo))
	}
	unchanged := func(what string) {
		t.Helper()
		if n := len(NotBack(f, shown.Devices)); n != len(todo) {
			t.Errorf("%s: %d devices are not back, want %d: something was changed", what, n, len(todo))
		}
	}

	// Another apply replaced the journal while the user read it.
	later := *shown
	later.Time = shown.Time.Add(time.Minute)
	if err := WriteJournal(h, JournalPath, &later); err != nil {
		t.Fatal(err)
	}
	_, err = RollbackShown(context.Background(), l, h, f, shown, todo, nil, scopeOf(p), fast)
	var stale *StaleError
	if !errors.As(err, &stale) || !stale.Replaced.Equal(later.Time) {
		t.Errorf("a replaced journal: %v, want a *StaleError of %s", err, later.Time)
	}
	unchanged("a replaced journal")
	if err := WriteJournal(h, JournalPath, shown); err != nil {
		t.Fatal(err)
	}

	// A guest's hook put one device back meanwhile: the list shown is not the list now.
	one := todo[0]
	f.devs[one.Device].driver, f.devs[one.Device].override = one.Driver, one.Override
	_, err = RollbackShown(context.Background(), l, h, f, shown, todo, nil, scopeOf(p), fast)
	if !errors.As(err, &stale) || !stale.Replaced.IsZero() {
		t.Errorf("a driver moved: %v, want a *StaleError of the drivers", err)
	}
	if n := len(NotBack(f, shown.Devices)); n != len(todo)-1 {
		t.Errorf("a driver moved: %d devices are not back, want %d", n, len(todo)-1)
	}

	todo = NotBack(f, shown.Devices)
	res, err := RollbackShown(context.Background(), l, h, f, shown, todo, nil, scopeOf(p), fast)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restored) != len(todo) || len(NotBack(f, shown.Devices)) != 0 {
		t.Errorf("restored %v; %d not back", res.Restored, len(NotBack(f, shown.Devices)))
	}
}
