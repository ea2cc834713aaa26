package bind

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpusplit/gpusplit/internal/health"
	"github.com/gpusplit/gpusplit/internal/holders"
	"github.com/gpusplit/gpusplit/internal/pci"
	"github.com/gpusplit/gpusplit/internal/plan"
)

// Options tune a run.
type Options struct {
	// UnbindTimeout bounds one unbind: the nvidia driver waits for ever in its remove
	// routine while the GPU is in use, and the write never returns.
	UnbindTimeout time.Duration
	// BindTimeout bounds the wait for a device to show up on its new driver.
	BindTimeout time.Duration
	// Parallel is how many IOMMU groups move at once.
	Parallel int
	// Progress receives an event per step of each device. Several groups move at once,
	// but Progress is called one event at a time, under a lock of the run's own: it may
	// append to a slice or write to a stream without a lock of its own. It must not call
	// back into the run.
	Progress func(Event)
	// Now stamps the journal; tests fix it.
	Now func() time.Time
	// Journal is where Apply writes its journal: JournalPath when empty, the one
	// rollback reads; a hook writes its own, so that a guest's start never overwrites
	// apply's.
	Journal string
}

func (o *Options) defaults() {
	if o.UnbindTimeout == 0 {
		o.UnbindTimeout = 15 * time.Second
	}
	if o.BindTimeout == 0 {
		o.BindTimeout = 5 * time.Second
	}
	if o.Parallel == 0 {
		o.Parallel = 4
	}
	if o.Progress == nil {
		o.Progress = func(Event) {}
	}
	// The groups' goroutines report through one lock: the caller's function need not
	// be safe for concurrent use.
	progress, mu := o.Progress, new(sync.Mutex)
	o.Progress = func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		progress(e)
	}
	if o.Journal == "" {
		o.Journal = JournalPath
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Event is one step of one device.
type Event struct {
	Device  pci.Address
	Step    Step
	From    string
	To      string
	Err     error
	Elapsed time.Duration
}

// Step names what happened to a device.
type Step string

// The steps.
const (
	StepStart    Step = "moving"
	StepDone     Step = "done"
	StepFailed   Step = "failed"
	StepRestored Step = "restored"
)

// HeldError refuses a run because something uses devices it would move: processes,
// mounts, interfaces, guests (package holders).
type HeldError struct {
	Held map[pci.Address][]holders.Holder
}

func (e *HeldError) Error() string {
	var parts []string
	for _, a := range slices.SortedFunc(maps.Keys(e.Held), pci.Address.Compare) {
		var who []string
		for _, h := range e.Held[a] {
			who = append(who, h.String())
		}
		parts = append(parts, fmt.Sprintf("%s is held by %s", a, strings.Join(who, ", ")))
	}
	return "nothing was changed: " + strings.Join(parts, "; ")
}

// Held refuses a plan that would move a device in use, with a HeldError naming each.
func Held(p *plan.Plan) error {
	held := map[pci.Address][]holders.Holder{}
	for _, m := range p.Moves {
		if len(m.Holders) > 0 {
			held[m.Device] = m.Holders
		}
	}
	if len(held) > 0 {
		return &HeldError{Held: held}
	}
	return nil
}

// HungError reports an unbind that did not return: something still uses the device.
type HungError struct {
	Device  pci.Address
	Driver  string
	Timeout time.Duration
}

func (e *HungError) Error() string {
	return fmt.Sprintf("unbinding %s from %s did not finish within %s: something still uses the device "+
		"(a process, nvidia-persistenced, or the persistence mode: nvidia-smi -pm 0); the write stays pending in the kernel until it is released",
		e.Device, e.Driver, e.Timeout)
}

// Result says what a run did.
type Result struct {
	Elapsed  time.Duration // from the journal to the end
	Moved    []plan.Move
	Restored []pci.Address // on failure: the devices put back as they were
	// Unrestored are devices a failed run could not put back, with why.
	Unrestored map[pci.Address]error
	// Journal is the journal Apply wrote (nil when it wrote none): a caller that must
	// undo the run later, still holding the lock, undoes it from this copy, never from
	// the file, which another run may have replaced once the lock was let go.
	Journal *Journal
}

// Check refuses a plan that cannot be carried out, changing nothing: a device that is
// held, or a target driver that is neither loaded nor loadable.
func Check(k Kernel, p *plan.Plan) error {
	if err := Held(p); err != nil {
		return err
	}
	for _, to := range targets(p) {
		if k.Loaded(to) {
			continue
		}
		if mod, ok := k.Loadable(to); !ok {
			return fmt.Errorf("nothing was changed: driver %s is not loaded and no module %s exists for the running kernel; install it first", to, mod)
		}
	}
	for _, m := range p.Moves {
		if !k.Present(m.Device) {
			return fmt.Errorf("nothing was changed: device %s is not on this host any more; plan again", m.Device)
		}
	}
	return nil
}

// targets are the named drivers a plan moves devices to.
func targets(p *plan.Plan) []string {
	var out []string
	for _, m := range p.Moves {
		if m.To != plan.Default && m.To != plan.None && !slices.Contains(out, m.To) {
			out = append(out, m.To)
		}
	}
	return out
}

// Apply carries out p under the lock l, which the caller took before it read the host
// it planned from: check, journal, load modules, move every IOMMU group (several at
// once), each device only from the driver the plan found it on, verify; on any failure,
// put back every device it touched.
func Apply(ctx context.Context, l *Lock, k Kernel, p *plan.Plan, opts Options) (*Result, error) {
	opts.defaults()
	res := &Result{Unrestored: map[pci.Address]error{}}
	if p.Empty() {
		return res, nil
	}
	if err := l.held(); err != nil {
		return res, err
	}
	h := l.h
	if err := Check(k, p); err != nil {
		return res, err
	}

	id, err := ReadIdentity(h)
	if err != nil {
		return res, fmt.Errorf("nothing was changed: %w; the journal must say which host and which boot it is of", err)
	}
	j := &Journal{Format: JournalFormat, Time: opts.Now().UTC(), Identity: id}
	for _, m := range p.Moves {
		devID, class, err := deviceIDs(h, m.Device)
		if err != nil {
			return res, fmt.Errorf("nothing was changed: %w; the journal must say which card each device is", err)
		}
		prior := Prior{Device: m.Device, ID: devID, Class: class, Driver: m.From, Override: m.Override, IOMMUGroup: m.IOMMUGroup, GPU: m.GPU, To: m.To}
		if link, err := health.ReadBaseline(h, m.Device); err == nil && !link.Empty() {
			prior.Link = &link
		}
		j.Devices = append(j.Devices, prior)
	}
	if err := WriteJournal(h, opts.Journal, j); err != nil {
		return res, fmt.Errorf("nothing was changed: %w", err)
	}
	res.Journal = j
	for _, to := range targets(p) {
		if !k.Loaded(to) {
			if err := k.Load(ctx, to); err != nil {
				return res, fmt.Errorf("nothing was changed: %w", err)
			}
		}
	}

	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	r := runner{k: k, opts: opts}
	failure := r.run(ctx, p.Groups(), func(m plan.Move) error { return r.move(m) })
	res.Moved = r.done
	if failure == nil {
		return res, nil
	}
	// Put back every device touched, the last first.
	prior := map[pci.Address]Prior{}
	for _, d := range j.Devices {
		prior[d.Device] = d
	}
	for i := len(r.touched) - 1; i >= 0; i-- {
		a := r.touched[i]
		if err := r.restore(prior[a]); err != nil {
			res.Unrestored[a] = err
		} else {
			res.Restored = append(res.Restored, a)
		}
	}
	res.Moved = nil
	return res, failure
}

// runner moves devices, group by group, several groups at once.
type runner struct {
	k       Kernel
	opts    Options
	mu      sync.Mutex
	touched []pci.Address // devices written to, in order
	done    []plan.Move
	hung    map[pci.Address]bool // unbinds still pending in the kernel
}

func (r *runner) touch(a pci.Address) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.touched, a) {
		r.touched = append(r.touched, a)
	}
}

// run calls step for each move, the moves of a group in order, groups concurrently; it
// stops starting new moves at the first failure and returns it.
func (r *runner) run(ctx context.Context, groups [][]plan.Move, step func(plan.Move) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, r.opts.Parallel)
	var wg sync.WaitGroup
	var once sync.Once
	var failure error
	for _, g := range groups {
		wg.Add(1)
		// Taking the slot before starting keeps groups in order when one runs at a time.
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, m := range g {
				if ctx.Err() != nil {
					return
				}
				if err := step(m); err != nil {
					once.Do(func() { failure = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if failure == nil && ctx.Err() != nil {
		failure = ctx.Err()
	}
	return failure
}

// move takes one device to its target: driver_override, unbind, drivers_probe, verify.
func (r *runner) move(m plan.Move) error {
	start := time.Now()
	r.opts.Progress(Event{Device: m.Device, Step: StepStart, From: m.From, To: m.To})
	fail := func(err error) error {
		if !r.k.Present(m.Device) {
			err = fmt.Errorf("device %s is gone (%v)", m.Device, err)
		}
		r.opts.Progress(Event{Device: m.Device, Step: StepFailed, From: m.From, To: m.To, Err: err, Elapsed: time.Since(start)})
		return err
	}
	if !r.k.Present(m.Device) {
		return fail(fmt.Errorf("device %s is gone", m.Device))
	}
	// Only from where the plan found it: a device another run or a guest's start moved
	// since is not this plan's to move.
	if cur, err := r.k.Driver(m.Device); err != nil {
		return fail(err)
	} else if cur != m.From {
		return fail(fmt.Errorf("%s is on %s now, not on %s as planned: something else moved it since; nothing was written to it: plan again", m.Device, driverName(cur), driverName(m.From)))
	}
	override := m.To
	r.touch(m.Device)
	if err := r.k.SetOverride(m.Device, override); err != nil {
		return fail(err)
	}
	cur, err := r.k.Driver(m.Device)
	if err != nil {
		return fail(err)
	}
	if cur != "" && !reached(cur, m.To) {
		if err := r.unbind(m.Device, cur); err != nil {
			return fail(err)
		}
	}
	if m.To != plan.None {
		if err := r.k.Probe(m.Device); err != nil && !r.settled(m) {
			return fail(fmt.Errorf("binding %s to %s: %w", m.Device, plan.DriverText(m.To), err))
		}
	}
	if err := r.verify(m); err != nil {
		return fail(err)
	}
	r.mu.Lock()
	r.done = append(r.done, m)
	r.mu.Unlock()
	r.opts.Progress(Event{Device: m.Device, Step: StepDone, From: m.From, To: m.To, Elapsed: time.Since(start)})
	return nil
}

// reached reports whether a device on driver cur is where target wants it.
func reached(cur, target string) bool {
	switch target {
	case plan.Default:
		return cur != plan.VFIO
	case plan.None:
		return cur == ""
	}
	return cur == target
}

// settled reports whether the device already sits on its target: drivers_probe fails
// with an error for a device that is bound already.
func (r *runner) settled(m plan.Move) bool {
	cur, err := r.k.Driver(m.Device)
	return err == nil && cur != "" && reached(cur, m.To)
}

func (r *runner) unbind(a pci.Address, driver string) error {
	done := make(chan error, 1)
	go func() { done <- r.k.Unbind(a, driver) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("unbinding %s from %s: %w", a, driver, err)
		}
		return nil
	case <-time.After(r.opts.UnbindTimeout):
		r.mu.Lock()
		if r.hung == nil {
			r.hung = map[pci.Address]bool{}
		}
		r.hung[a] = true
		r.mu.Unlock()
		return &HungError{Device: a, Driver: driver, Timeout: r.opts.UnbindTimeout}
	}
}

// verify waits until the device shows on its target (and, for vfio-pci, its group's
// /dev/vfio node exists).
func (r *runner) verify(m plan.Move) error {
	deadline := time.Now().Add(r.opts.BindTimeout)
	for {
		cur, err := r.k.Driver(m.Device)
		ok := err == nil && reached(cur, m.To)
		if ok && m.To == plan.VFIO && m.IOMMUGroup >= 0 {
			ok = r.k.VFIOReady(m.IOMMUGroup)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			switch {
			case err != nil:
				return fmt.Errorf("checking %s: %w", m.Device, err)
			case !reached(cur, m.To):
				return fmt.Errorf("%s did not bind to %s: its driver is %s", m.Device, plan.DriverText(m.To), driverName(cur))
			}
			return fmt.Errorf("%s is on vfio-pci but /dev/vfio/%d did not appear", m.Device, m.IOMMUGroup)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restore puts a device back on its prior driver with its prior driver_override.
func (r *runner) restore(p Prior) error {
	if !r.k.Present(p.Device) {
		return fmt.Errorf("device %s is gone", p.Device)
	}
	r.mu.Lock()
	pending := r.hung[p.Device]
	r.mu.Unlock()
	if pending {
		return fmt.Errorf("the unbind of %s is still pending in the kernel: once whatever holds the device lets go, it will be left without a driver; then run gpusplit rollback", p.Device)
	}
	pin := p.Driver
	if pin == "" {
		pin = plan.None
	}
	if err := r.k.SetOverride(p.Device, pin); err != nil {
		return err
	}
	cur, err := r.k.Driver(p.Device)
	if err != nil {
		return err
	}
	if cur != p.Driver {
		if cur != "" {
			if err := r.unbind(p.Device, cur); err != nil {
				return err
			}
		}
		if p.Driver != "" {
			r.k.Probe(p.Device)
		}
	}
	if err := r.k.SetOverride(p.Device, p.Override); err != nil {
		return err
	}
	deadline := time.Now().Add(r.opts.BindTimeout)
	for {
		cur, err = r.k.Driver(p.Device)
		if err == nil && cur == p.Driver {
			r.opts.Progress(Event{Device: p.Device, Step: StepRestored, To: p.Driver})
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is on %s, not back on %s", p.Device, driverName(cur), driverName(p.Driver))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Rollback puts every device of the journal back as it was before the apply that wrote
// it, under the lock l, which the caller took before it read the journal. It refuses,
// changing nothing, a journal that CheckJournal does not trust.
func Rollback(ctx context.Context, l *Lock, k Kernel, j *Journal, s Scope, held map[pci.Address][]holders.Holder, opts Options) (*Result, error) {
	opts.defaults()
	res := &Result{Unrestored: map[pci.Address]error{}}
	if len(held) > 0 {
		return res, &HeldError{Held: held}
	}
	if err := l.held(); err != nil {
		return res, err
	}
	h := l.h
	if _, err := CheckJournal(h, k, j, s); err != nil {
		return res, err
	}
	r := runner{k: k, opts: opts}
	var groups [][]plan.Move
	index := map[string]int{}
	for _, d := range j.Devices {
		key := fmt.Sprint(d.IOMMUGroup)
		if d.IOMMUGroup < 0 {
			key = d.GPU.String()
		}
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], plan.Move{Device: d.Device, IOMMUGroup: d.IOMMUGroup, To: d.Driver, Override: d.Override})
	}
	prior := map[pci.Address]Prior{}
	for _, d := range j.Devices {
		prior[d.Device] = d
	}
	var mu sync.Mutex
	err := r.run(ctx, groups, func(m plan.Move) error {
		err := r.restore(prior[m.Device])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.Unrestored[m.Device] = err
			return nil // go on with the others: a rollback restores what it can
		}
		res.Restored = append(res.Restored, m.Device)
		return nil
	})
	if err == nil && len(res.Unrestored) > 0 {
		var parts []string
		for _, a := range slices.SortedFunc(maps.Keys(res.Unrestored), pci.Address.Compare) {
			parts = append(parts, res.Unrestored[a].Error())
		}
		err = errors.New("could not restore every device: " + strings.Join(parts, "; "))
	}
	return res, err
}

func driverName(d string) string {
	if d == "" {
		return "none"
	}
	return d
}
