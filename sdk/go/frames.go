package cumulo

import "fmt"

// frameType is the type byte of a frame (PROTOCOL.md section 4).
type frameType uint8

const (
	frameHello          frameType = 0x01
	frameSubscribe      frameType = 0x02
	frameUnsubscribe    frameType = 0x03
	frameSubscribeCount frameType = 0x04
	frameSendAsync      frameType = 0x10
	frameSendSync       frameType = 0x11
	frameMcastAsync     frameType = 0x12
	frameReturn         frameType = 0x20
	frameForward        frameType = 0x21
	framePing           frameType = 0x30
	framePong           frameType = 0x31
	frameGoodbye        frameType = 0x32
	frameWelcome        frameType = 0x81
	frameRequest        frameType = 0x82
	frameResponse       frameType = 0x83
	frameReply          frameType = 0x84
	frameMcastSent      frameType = 0x85
	frameTerminate      frameType = 0x86
	frameError          frameType = 0x87
)

var frameTypeNames = map[frameType]string{
	frameHello: "HELLO", frameSubscribe: "SUBSCRIBE", frameUnsubscribe: "UNSUBSCRIBE",
	frameSubscribeCount: "SUBSCRIBE_COUNT", frameSendAsync: "SEND_ASYNC", frameSendSync: "SEND_SYNC",
	frameMcastAsync: "MCAST_ASYNC", frameReturn: "RETURN", frameForward: "FORWARD",
	framePing: "PING", framePong: "PONG", frameGoodbye: "GOODBYE", frameWelcome: "WELCOME",
	frameRequest: "REQUEST", frameResponse: "RESPONSE", frameReply: "REPLY",
	frameMcastSent: "MCAST_SENT", frameTerminate: "TERMINATE", frameError: "ERROR",
}

func (t frameType) String() string {
	if name, ok := frameTypeNames[t]; ok {
		return name
	}
	return fmt.Sprintf("frame type 0x%02x", uint8(t))
}

// frame is one message of the protocol. The proto tags name each field as
// PROTOCOL.md section 4 does; the vector tests rely on them.
type frame interface {
	frameType() frameType
	encodeBody(e *encoder)
	decodeBody(d *decoder)
}

// newFrame returns an empty frame of type t, or nil for an unknown type.
func newFrame(t frameType) frame {
	switch t {
	case frameHello:
		return &helloFrame{}
	case frameSubscribe, frameUnsubscribe, frameSubscribeCount:
		return &controlFrame{kind: t}
	case frameSendAsync, frameSendSync, frameMcastAsync, frameForward:
		return &sendFrame{kind: t}
	case frameReturn:
		return &returnFrame{}
	case framePing, framePong:
		return &pingFrame{kind: t}
	case frameGoodbye:
		return &goodbyeFrame{}
	case frameWelcome:
		return &welcomeFrame{}
	case frameRequest:
		return &requestFrame{}
	case frameResponse:
		return &responseFrame{}
	case frameReply:
		return &replyFrame{}
	case frameMcastSent:
		return &mcastSentFrame{}
	case frameTerminate:
		return &terminateFrame{}
	case frameError:
		return &errorFrame{}
	}
	return nil
}

type helloFrame struct {
	Version     uint16 `proto:"version"`
	Window      uint32 `proto:"window"`
	ThreadIndex uint32 `proto:"thread_index"`
	Token       string `proto:"token"`
	Prefix      string `proto:"prefix"`
}

func (*helloFrame) frameType() frameType { return frameHello }
func (f *helloFrame) encodeBody(e *encoder) {
	e.u16(f.Version)
	e.u32(f.Window)
	e.u32(f.ThreadIndex)
	e.str(f.Token)
	e.str(f.Prefix)
}
func (f *helloFrame) decodeBody(d *decoder) {
	f.Version, f.Window, f.ThreadIndex = d.u16(), d.u32(), d.u32()
	f.Token, f.Prefix = d.str(), d.str()
}

// controlFrame is SUBSCRIBE, UNSUBSCRIBE or SUBSCRIBE_COUNT.
type controlFrame struct {
	kind    frameType
	ReqID   uint32 `proto:"req_id"`
	Pattern string `proto:"pattern"`
}

func (f *controlFrame) frameType() frameType { return f.kind }
func (f *controlFrame) encodeBody(e *encoder) {
	e.u32(f.ReqID)
	e.str(f.Pattern)
}
func (f *controlFrame) decodeBody(d *decoder) {
	f.ReqID, f.Pattern = d.u32(), d.str()
}

// sendFrame is SEND_ASYNC, SEND_SYNC, MCAST_ASYNC or FORWARD.
type sendFrame struct {
	kind        frameType
	TransID     TransID `proto:"trans_id"`
	Timeout     uint32  `proto:"timeout"`
	Priority    int8    `proto:"priority"`
	Flags       uint8   `proto:"flags"`
	Name        string  `proto:"name"`
	RequestInfo []byte  `proto:"request_info"`
	Request     []byte  `proto:"request"`
}

const flagWaitForService = 1 << 0

func (f *sendFrame) frameType() frameType { return f.kind }
func (f *sendFrame) encodeBody(e *encoder) {
	e.tid(f.TransID)
	e.u32(f.Timeout)
	e.i8(f.Priority)
	e.u8(f.Flags)
	e.str(f.Name)
	e.bytes(f.RequestInfo)
	e.bytes(f.Request)
}
func (f *sendFrame) decodeBody(d *decoder) {
	f.TransID, f.Timeout, f.Priority, f.Flags = d.tid(), d.u32(), d.i8(), d.u8()
	f.Name, f.RequestInfo, f.Request = d.str(), d.bytes(), d.bytes()
}

type returnFrame struct {
	TransID      TransID `proto:"trans_id"`
	Status       Status  `proto:"status"`
	ResponseInfo []byte  `proto:"response_info"`
	Response     []byte  `proto:"response"`
}

func (*returnFrame) frameType() frameType { return frameReturn }
func (f *returnFrame) encodeBody(e *encoder) {
	e.tid(f.TransID)
	e.u16(uint16(f.Status))
	e.bytes(f.ResponseInfo)
	e.bytes(f.Response)
}
func (f *returnFrame) decodeBody(d *decoder) {
	f.TransID, f.Status = d.tid(), Status(d.u16())
	f.ResponseInfo, f.Response = d.bytes(), d.bytes()
}

// pingFrame is PING or PONG.
type pingFrame struct {
	kind  frameType
	Nonce uint64 `proto:"nonce"`
}

func (f *pingFrame) frameType() frameType  { return f.kind }
func (f *pingFrame) encodeBody(e *encoder) { e.u64(f.Nonce) }
func (f *pingFrame) decodeBody(d *decoder) { f.Nonce = d.u64() }

type goodbyeFrame struct{}

func (*goodbyeFrame) frameType() frameType { return frameGoodbye }
func (*goodbyeFrame) encodeBody(*encoder)  {}
func (*goodbyeFrame) decodeBody(*decoder)  {}

type welcomeFrame struct {
	Version          uint16 `proto:"version"`
	NodeID           uint32 `proto:"node_id"`
	InstanceID       uint32 `proto:"instance_id"`
	ProcessIndex     uint32 `proto:"process_index"`
	ProcessCount     uint32 `proto:"process_count"`
	ThreadCount      uint32 `proto:"thread_count"`
	Window           uint32 `proto:"window"`
	MaxFrame         uint32 `proto:"max_frame"`
	TimeoutAsync     uint32 `proto:"timeout_async"`
	TimeoutSync      uint32 `proto:"timeout_sync"`
	TimeoutTerminate uint32 `proto:"timeout_terminate"`
	PriorityDefault  int8   `proto:"priority_default"`
	Keepalive        uint32 `proto:"keepalive"`
	Prefix           string `proto:"prefix"`
}

func (*welcomeFrame) frameType() frameType { return frameWelcome }
func (f *welcomeFrame) encodeBody(e *encoder) {
	e.u16(f.Version)
	for _, v := range []uint32{f.NodeID, f.InstanceID, f.ProcessIndex, f.ProcessCount, f.ThreadCount,
		f.Window, f.MaxFrame, f.TimeoutAsync, f.TimeoutSync, f.TimeoutTerminate} {
		e.u32(v)
	}
	e.i8(f.PriorityDefault)
	e.u32(f.Keepalive)
	e.str(f.Prefix)
}
func (f *welcomeFrame) decodeBody(d *decoder) {
	f.Version = d.u16()
	for _, p := range []*uint32{&f.NodeID, &f.InstanceID, &f.ProcessIndex, &f.ProcessCount, &f.ThreadCount,
		&f.Window, &f.MaxFrame, &f.TimeoutAsync, &f.TimeoutSync, &f.TimeoutTerminate} {
		*p = d.u32()
	}
	f.PriorityDefault, f.Keepalive, f.Prefix = d.i8(), d.u32(), d.str()
}

type requestFrame struct {
	TransID     TransID `proto:"trans_id"`
	Timeout     uint32  `proto:"timeout"`
	Priority    int8    `proto:"priority"`
	Flags       uint8   `proto:"flags"`
	Source      uint64  `proto:"source"`
	Name        string  `proto:"name"`
	Pattern     string  `proto:"pattern"`
	RequestInfo []byte  `proto:"request_info"`
	Request     []byte  `proto:"request"`
}

const (
	flagSync  = 1 << 0
	flagMcast = 1 << 1
)

func (*requestFrame) frameType() frameType { return frameRequest }
func (f *requestFrame) encodeBody(e *encoder) {
	e.tid(f.TransID)
	e.u32(f.Timeout)
	e.i8(f.Priority)
	e.u8(f.Flags)
	e.u64(f.Source)
	e.str(f.Name)
	e.str(f.Pattern)
	e.bytes(f.RequestInfo)
	e.bytes(f.Request)
}
func (f *requestFrame) decodeBody(d *decoder) {
	f.TransID, f.Timeout, f.Priority, f.Flags, f.Source = d.tid(), d.u32(), d.i8(), d.u8(), d.u64()
	f.Name, f.Pattern = d.str(), d.str()
	f.RequestInfo, f.Request = d.bytes(), d.bytes()
}

type responseFrame struct {
	TransID      TransID `proto:"trans_id"`
	Status       Status  `proto:"status"`
	ResponseInfo []byte  `proto:"response_info"`
	Response     []byte  `proto:"response"`
}

func (*responseFrame) frameType() frameType { return frameResponse }
func (f *responseFrame) encodeBody(e *encoder) {
	(*returnFrame)(f).encodeBody(e) // same layout as RETURN
}
func (f *responseFrame) decodeBody(d *decoder) {
	(*returnFrame)(f).decodeBody(d)
}

type replyFrame struct {
	ReqID   uint32 `proto:"req_id"`
	Status  Status `proto:"status"`
	Value   uint32 `proto:"value"`
	Message string `proto:"message"`
}

func (*replyFrame) frameType() frameType { return frameReply }
func (f *replyFrame) encodeBody(e *encoder) {
	e.u32(f.ReqID)
	e.u16(uint16(f.Status))
	e.u32(f.Value)
	e.str(f.Message)
}
func (f *replyFrame) decodeBody(d *decoder) {
	f.ReqID, f.Status, f.Value, f.Message = d.u32(), Status(d.u16()), d.u32(), d.str()
}

type mcastSentFrame struct {
	TransID  TransID   `proto:"trans_id"`
	TransIDs []TransID `proto:"trans_ids"` // preceded by its u32 count on the wire
}

func (*mcastSentFrame) frameType() frameType { return frameMcastSent }
func (f *mcastSentFrame) encodeBody(e *encoder) {
	e.tid(f.TransID)
	e.u32(uint32(len(f.TransIDs)))
	for _, id := range f.TransIDs {
		e.tid(id)
	}
}
func (f *mcastSentFrame) decodeBody(d *decoder) {
	f.TransID = d.tid()
	count := d.u32()
	// Check the count against what is left before allocating for it.
	raw := d.take(uint64(count)*uint64(len(TransID{})), "trans_ids")
	if d.err != nil {
		return
	}
	f.TransIDs = make([]TransID, count)
	for i := range f.TransIDs {
		copy(f.TransIDs[i][:], raw[i*len(TransID{}):])
	}
}

type terminateFrame struct {
	Timeout uint32 `proto:"timeout"`
}

func (*terminateFrame) frameType() frameType    { return frameTerminate }
func (f *terminateFrame) encodeBody(e *encoder) { e.u32(f.Timeout) }
func (f *terminateFrame) decodeBody(d *decoder) { f.Timeout = d.u32() }

type errorFrame struct {
	Status  Status `proto:"status"`
	Message string `proto:"message"`
}

func (*errorFrame) frameType() frameType { return frameError }
func (f *errorFrame) encodeBody(e *encoder) {
	e.u16(uint16(f.Status))
	e.str(f.Message)
}
func (f *errorFrame) decodeBody(d *decoder) {
	f.Status, f.Message = Status(d.u16()), d.str()
}
