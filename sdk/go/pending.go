package cumulo

import "sync"

// responses routes RESPONSE frames to the calls that wait for them, and
// keeps the others, in arrival order, until RecvAsync collects them.
type responses struct {
	mu        sync.Mutex
	waiting   map[TransID]chan *responseFrame // SendSync, or RecvAsync of one id
	next      []chan *responseFrame           // RecvAsync of whichever comes first
	kept      map[TransID]*responseFrame
	keptOrder []TransID            // may hold ids already collected; skipped lazily
	abandoned map[TransID]struct{} // SendSync calls given up by their context
}

func newResponses() *responses {
	return &responses{
		waiting:   map[TransID]chan *responseFrame{},
		kept:      map[TransID]*responseFrame{},
		abandoned: map[TransID]struct{}{},
	}
}

// deliver hands r to its waiter, else to the oldest RecvAsync of any id,
// else keeps it.
func (p *responses) deliver(r *responseFrame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.waiting[r.TransID]; ok {
		delete(p.waiting, r.TransID)
		ch <- r
		return
	}
	if _, ok := p.abandoned[r.TransID]; ok {
		delete(p.abandoned, r.TransID)
		return
	}
	if len(p.next) > 0 {
		ch := p.next[0]
		p.next = p.next[1:]
		ch <- r
		return
	}
	p.keep(r)
}

func (p *responses) keep(r *responseFrame) {
	p.kept[r.TransID] = r
	p.keptOrder = append(p.keptOrder, r.TransID)
}

// expect registers a waiter for id, or takes its response if it is kept
// already. The channel has room for the one response, so deliver never
// blocks.
func (p *responses) expect(id TransID) (chan *responseFrame, *responseFrame, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.kept[id]; ok {
		delete(p.kept, id)
		return nil, r, nil
	}
	if _, busy := p.waiting[id]; busy {
		return nil, nil, errorf(StatusInvalidArgument, "trans_id %s is already awaited", id)
	}
	ch := make(chan *responseFrame, 1)
	p.waiting[id] = ch
	return ch, nil, nil
}

// expectNext takes the oldest kept response, or registers a waiter for the
// next one to arrive.
func (p *responses) expectNext() (chan *responseFrame, *responseFrame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.keptOrder) > 0 {
		id := p.keptOrder[0]
		p.keptOrder = p.keptOrder[1:]
		if r, ok := p.kept[id]; ok {
			delete(p.kept, id)
			return nil, r
		}
	}
	ch := make(chan *responseFrame, 1)
	p.next = append(p.next, ch)
	return ch, nil
}

// giveUp withdraws the waiter ch of id (a zero id for a next-one waiter).
// A response that reached ch in the meantime is kept for RecvAsync, unless
// discard is set: then it, or the one still to come, is dropped.
func (p *responses) giveUp(id TransID, ch chan *responseFrame, discard bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	withdrawn := false
	if id.IsZero() {
		for i, c := range p.next {
			if c == ch {
				p.next = append(p.next[:i], p.next[i+1:]...)
				withdrawn = true
				break
			}
		}
	} else if p.waiting[id] == ch {
		delete(p.waiting, id)
		withdrawn = true
	}
	switch {
	case !withdrawn:
		if r := <-ch; !discard { // deliver already sent it: ch holds it
			p.keep(r)
		}
	case discard:
		p.abandoned[id] = struct{}{}
	}
}
