package cumulo

type subscription struct {
	handler HandlerFunc
	count   int // subscriptions of this instance to the pattern
}

// Subscribe subscribes handler to pattern, relative to the prefix (with
// the wildcards * and ?, PROTOCOL.md section 6), and waits for the core's
// REPLY. Subscribing a pattern again adds a subscription (a bigger share of
// its traffic) and makes handler the one that runs.
func (a *API) Subscribe(pattern string, handler HandlerFunc) error {
	if handler == nil {
		return errorf(StatusInvalidArgument, "subscribing %q with a nil handler", pattern)
	}
	full := a.Prefix() + pattern
	// Registered before asking, so a REQUEST that follows the REPLY closely
	// finds its handler.
	a.mu.Lock()
	sub := a.subscriptions[full]
	if sub == nil {
		sub = &subscription{}
		a.subscriptions[full] = sub
	}
	previous := sub.handler
	sub.handler = handler
	sub.count++
	a.mu.Unlock()
	if _, err := a.control(frameSubscribe, pattern); err != nil {
		a.mu.Lock()
		sub.handler = previous
		a.release(full, sub)
		a.mu.Unlock()
		return err
	}
	return nil
}

// Unsubscribe removes one subscription of pattern. Unsubscribing a pattern
// not subscribed is INVALID_ARGUMENT.
func (a *API) Unsubscribe(pattern string) error {
	if _, err := a.control(frameUnsubscribe, pattern); err != nil {
		return err
	}
	full := a.Prefix() + pattern
	a.mu.Lock()
	if sub := a.subscriptions[full]; sub != nil {
		a.release(full, sub)
	}
	a.mu.Unlock()
	return nil
}

// release drops one subscription of full; a.mu is held.
func (a *API) release(full string, sub *subscription) {
	sub.count--
	if sub.count <= 0 {
		delete(a.subscriptions, full)
	}
}

// SubscribeCount returns how many times this instance subscribed pattern.
func (a *API) SubscribeCount(pattern string) (int, error) {
	n, err := a.control(frameSubscribeCount, pattern)
	return int(n), err
}

func (a *API) handlerFor(pattern string) HandlerFunc {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sub := a.subscriptions[pattern]; sub != nil {
		return sub.handler
	}
	return nil
}

// control sends a SUBSCRIBE, UNSUBSCRIBE or SUBSCRIBE_COUNT and waits for
// its REPLY.
func (a *API) control(kind frameType, pattern string) (uint32, error) {
	ch := make(chan *replyFrame, 1)
	a.mu.Lock()
	a.nextReqID++
	id := a.nextReqID
	a.replies[id] = ch
	a.mu.Unlock()
	if err := a.send(&controlFrame{kind: kind, ReqID: id, Pattern: pattern}); err != nil {
		a.mu.Lock()
		delete(a.replies, id)
		a.mu.Unlock()
		return 0, err
	}
	select {
	case r := <-ch:
		if r.Status != StatusOK {
			return 0, &Error{Status: r.Status, Message: r.Message}
		}
		return r.Value, nil
	case <-a.ended:
		return 0, a.err
	}
}
