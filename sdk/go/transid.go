package cumulo

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"
)

// TransID identifies one request (PROTOCOL.md section 2.2): 8 bytes of
// big-endian nanoseconds, then the node id and instance id of its origin,
// so that byte order is time order.
type TransID [16]byte

// String returns the 32 lower-case hex digits of the id.
func (id TransID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero value, which no request has.
func (id TransID) IsZero() bool { return id == TransID{} }

// Time returns when the id was made.
func (id TransID) Time() time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(id[0:8])))
}

// NodeID returns the node of the instance (or core) that made the id.
func (id TransID) NodeID() uint32 { return binary.BigEndian.Uint32(id[8:12]) }

// InstanceID returns the instance that made the id; 0 is the core.
func (id TransID) InstanceID() uint32 { return binary.BigEndian.Uint32(id[12:16]) }

// ParseTransID parses the 32 hex digits String returns.
func ParseTransID(s string) (TransID, error) {
	var id TransID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("cumulo: trans_id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("cumulo: trans_id %q: %w", s, err)
	}
	return id, nil
}

// transIDSource makes the ids of one instance. Several goroutines may send
// at once, hence the compare-and-swap on the last timestamp.
type transIDSource struct {
	last       atomic.Uint64
	nodeID     uint32
	instanceID uint32
	now        func() time.Time // replaced in tests by a clock that stands still
}

func (s *transIDSource) next() TransID {
	now := s.now
	if now == nil {
		now = time.Now
	}
	var stamp uint64
	for {
		last := s.last.Load()
		stamp = uint64(now().UnixNano())
		if stamp <= last {
			stamp = last + 1 // the clock has not moved (or went back): stay strictly increasing
		}
		if s.last.CompareAndSwap(last, stamp) {
			break
		}
	}
	var id TransID
	binary.BigEndian.PutUint64(id[0:8], stamp)
	binary.BigEndian.PutUint32(id[8:12], s.nodeID)
	binary.BigEndian.PutUint32(id[12:16], s.instanceID)
	return id
}
