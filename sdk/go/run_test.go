package cumulo

import (
	"errors"
	"sort"
	"testing"
)

func TestRunOpensThreadCountInstances(t *testing.T) {
	core := newFakeCore(t)
	t.Setenv("CUMULO_SOCKET", core.socket)
	t.Setenv("CUMULO_TOKEN", "tok")
	t.Setenv("CUMULO_THREAD_COUNT", "3")
	setupIndexes := make(chan int, 3)
	running := background(func() (struct{}, error) {
		return struct{}{}, Run(func(api *API) error {
			setupIndexes <- api.ThreadIndex()
			return api.Subscribe("x", okHandler("from thread"))
		})
	})
	var conns []*coreConn
	var indexes []int
	for i := 0; i < 3; i++ {
		cc := core.accept()
		hello := expectType[*helloFrame](cc)
		if hello.Token != "tok" || hello.Prefix != "" {
			t.Errorf("HELLO = %+v", hello)
		}
		indexes = append(indexes, int(hello.ThreadIndex))
		welcome := testWelcome()
		welcome.InstanceID = uint32(10 + i)
		cc.write(welcome)
		sub := expectType[*controlFrame](cc)
		cc.write(&replyFrame{ReqID: sub.ReqID})
		conns = append(conns, cc)
	}
	sort.Ints(indexes)
	if indexes[0] != 0 || indexes[1] != 1 || indexes[2] != 2 {
		t.Errorf("thread indexes %v", indexes)
	}
	for _, cc := range conns {
		cc.write(testRequest(1, "/t/x", ""))
		expectReturn(t, cc, TransID{0x18, 15: 1}, StatusOK, "from thread")
		cc.write(&terminateFrame{Timeout: 1000})
	}
	if _, err := await(t, running); err != nil {
		t.Errorf("Run gave %v, want nil after TERMINATE", err)
	}
	for _, cc := range conns {
		expectType[*goodbyeFrame](cc)
	}
	if len(setupIndexes) != 3 {
		t.Errorf("setup ran %d times", len(setupIndexes))
	}
}

func TestRunStopsAllOnFirstFailure(t *testing.T) {
	core := newFakeCore(t)
	t.Setenv("CUMULO_SOCKET", core.socket)
	t.Setenv("CUMULO_THREAD_COUNT", "2")
	setupFailed := errors.New("setup failed")
	running := background(func() (struct{}, error) {
		return struct{}{}, RunWith(Options{Prefix: "/t/"}, func(api *API) error {
			if api.ThreadIndex() == 1 {
				return setupFailed
			}
			return nil
		})
	})
	for i := 0; i < 2; i++ {
		cc := core.accept()
		expectType[*helloFrame](cc)
		cc.write(testWelcome())
	}
	if _, err := await(t, running); !errors.Is(err, setupFailed) {
		t.Errorf("Run gave %v, want the setup failure", err)
	}
}

func TestRunRejectsBadThreadCount(t *testing.T) {
	t.Setenv("CUMULO_THREAD_COUNT", "zero")
	if err := Run(func(*API) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Run gave %v", err)
	}
}
