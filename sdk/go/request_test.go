package cumulo

import (
	"testing"
	"time"
)

func TestRequestQueueConvertsFramesInOrder(t *testing.T) {
	var q requestQueue
	q.init()
	now := time.Unix(1000, 0)
	q.push(&requestFrame{TransID: TransID{1}, Timeout: 250, Flags: flagMcast, Request: []byte("a")}, now)
	q.push(&requestFrame{TransID: TransID{2}, Timeout: 0, Flags: flagSync}, now)
	first := q.pop()
	if first.TransID != (TransID{1}) || first.Sync || !first.Multicast || first.Timeout != 250*time.Millisecond ||
		!first.Deadline().Equal(now.Add(250*time.Millisecond)) || string(first.Data) != "a" {
		t.Errorf("first = %+v", first)
	}
	if second := q.pop(); second.TransID != (TransID{2}) || !second.Sync {
		t.Errorf("second = %+v", second)
	}
	if q.pop() != nil {
		t.Error("queue not empty")
	}
}

func TestRequestQueueOverdue(t *testing.T) {
	var q requestQueue
	q.init()
	now := time.Unix(1000, 0)
	q.push(&requestFrame{TransID: TransID{1}, Timeout: 100}, now)
	if q.overdue(now.Add(100 * time.Millisecond)) {
		t.Error("overdue at its deadline")
	}
	if !q.overdue(now.Add(101 * time.Millisecond)) {
		t.Error("not overdue past its deadline")
	}
	q.finish(TransID{1})
	if q.overdue(now.Add(time.Hour)) {
		t.Error("overdue after it was answered")
	}
}
