package cumulo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// Run runs a process the core started: it opens CUMULO_THREAD_COUNT
// instances, each in its own goroutine on its own connection, calls setup
// on each (to subscribe) and polls until TERMINATE. It returns nil when
// every instance has terminated; on the first failure it closes the others
// and returns that failure.
func Run(setup func(*API) error) error {
	return RunWith(Options{}, setup)
}

// RunWith is Run with options (such as Window) for every instance; the
// thread index is set for each.
func RunWith(opts Options, setup func(*API) error) error {
	count := 1
	if s := os.Getenv("CUMULO_THREAD_COUNT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return errorf(StatusInvalidArgument, "CUMULO_THREAD_COUNT=%q is not a positive integer", s)
		}
		count = n
	}
	var group instanceGroup
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func(index int) {
			defer wg.Done()
			o := opts
			o.ThreadIndex = index
			if err := group.serve(o, setup); err != nil {
				group.stop(fmt.Errorf("instance %d: %w", index, err))
			}
		}(i)
	}
	wg.Wait()
	return group.failure
}

// instanceGroup tracks the instances of a Run so one failure stops all.
type instanceGroup struct {
	mu      sync.Mutex
	apis    []*API
	failure error
}

func (g *instanceGroup) serve(opts Options, setup func(*API) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	api, err := Connect(ctx, opts)
	cancel()
	if err != nil {
		return err
	}
	defer api.Close()
	g.mu.Lock()
	stopped := g.failure != nil
	g.apis = append(g.apis, api)
	g.mu.Unlock()
	if stopped {
		return nil
	}
	if err := setup(api); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	err = api.Poll(context.Background())
	g.mu.Lock()
	defer g.mu.Unlock()
	if errors.Is(err, ErrClosed) && g.failure != nil {
		return nil // closed by stop: not a failure of its own
	}
	return err
}

func (g *instanceGroup) stop(err error) {
	g.mu.Lock()
	if g.failure == nil {
		g.failure = err
	}
	apis := g.apis
	g.mu.Unlock()
	for _, api := range apis {
		api.Close()
	}
}
