package cumulo

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

func TestTransIDLayout(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	src := transIDSource{nodeID: 1, instanceID: 7, now: func() time.Time { return at }}
	id := src.next()
	if got, want := id.String(), "17979cfe3d85cd150000000100000007"; got != want {
		t.Fatalf("id = %s, want %s", got, want)
	}
	if !id.Time().Equal(at) || id.NodeID() != 1 || id.InstanceID() != 7 {
		t.Errorf("accessors gave %v %d %d", id.Time(), id.NodeID(), id.InstanceID())
	}
	parsed, err := ParseTransID(id.String())
	if err != nil || parsed != id {
		t.Errorf("ParseTransID(%s) = %s, %v", id, parsed, err)
	}
}

func TestTransIDStrictlyIncreasingWhenClockStandsStill(t *testing.T) {
	at := time.Unix(1700000000, 0)
	src := transIDSource{nodeID: 2, instanceID: 3, now: func() time.Time { return at }}
	prev := src.next()
	for i := 0; i < 100; i++ {
		id := src.next()
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("id %s not after %s", id, prev)
		}
		prev = id
	}
}

func TestTransIDUniqueAcrossGoroutines(t *testing.T) {
	var src transIDSource
	const workers, each = 4, 500
	ids := make(chan TransID, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ids <- src.next()
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := make(map[TransID]bool)
	for id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func TestParseTransIDRejectsBadInput(t *testing.T) {
	for _, s := range []string{"", "00", "zz7a2b1b40fdcd150000000100000007", "187a2b1b40fdcd15000000010000000700"} {
		if _, err := ParseTransID(s); err == nil {
			t.Errorf("ParseTransID(%q) gave no error", s)
		}
	}
}
