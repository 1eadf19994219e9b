package cumulo

import "testing"

func response(id byte) *responseFrame { return &responseFrame{TransID: TransID{id}} }

func TestResponsesGoToWaiterElseNextElseKept(t *testing.T) {
	p := newResponses()
	ch, kept, err := p.expect(TransID{1})
	if err != nil || kept != nil {
		t.Fatal(err)
	}
	if _, _, err := p.expect(TransID{1}); err == nil {
		t.Error("a second waiter for one id was accepted")
	}
	next, _ := p.expectNext()
	p.deliver(response(2)) // to the next-one waiter
	p.deliver(response(1)) // to its own waiter
	p.deliver(response(3)) // kept
	p.deliver(response(4)) // kept
	if r := <-ch; r.TransID != (TransID{1}) {
		t.Errorf("waiter of 1 got %v", r.TransID)
	}
	if r := <-next; r.TransID != (TransID{2}) {
		t.Errorf("next waiter got %v", r.TransID)
	}
	if _, r, _ := p.expect(TransID{4}); r == nil {
		t.Error("response 4 was not kept")
	}
	if _, r := p.expectNext(); r == nil || r.TransID != (TransID{3}) {
		t.Errorf("expectNext gave %v, want 3 (4 was collected)", r)
	}
	if ch, r := p.expectNext(); r != nil || ch == nil {
		t.Error("expectNext found a response that was collected")
	}
}

func TestGiveUpKeepsOrDropsResponses(t *testing.T) {
	p := newResponses()
	// Given up before the response: a sync call drops it when it comes.
	ch, _, _ := p.expect(TransID{1})
	p.giveUp(TransID{1}, ch, true)
	p.deliver(response(1))
	if len(p.kept) != 0 || len(p.abandoned) != 0 {
		t.Errorf("kept %d, abandoned %d after a dropped late response", len(p.kept), len(p.abandoned))
	}
	// Given up after the response reached the waiter: RecvAsync keeps it.
	ch, _, _ = p.expect(TransID{2})
	p.deliver(response(2))
	p.giveUp(TransID{2}, ch, false)
	if _, r, _ := p.expect(TransID{2}); r == nil {
		t.Error("the response of a given-up RecvAsync was lost")
	}
	// A next-one waiter withdrawn gets nothing more.
	next, _ := p.expectNext()
	p.giveUp(TransID{}, next, false)
	p.deliver(response(3))
	if len(next) != 0 || p.kept[TransID{3}] == nil {
		t.Error("a withdrawn next-one waiter still received")
	}
}
