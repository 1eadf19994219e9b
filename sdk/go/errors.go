package cumulo

import (
	"errors"
	"fmt"
)

// Status is a status code of the wire protocol (PROTOCOL.md section 2.3).
type Status uint16

// The status codes of protocol version 1.
const (
	StatusOK Status = iota
	StatusTimeout
	StatusNoService
	StatusQueueFull
	StatusCrashed
	StatusMalformed
	StatusShuttingDown
	StatusServiceError
	StatusTooLarge
	StatusInvalidArgument
	StatusUnsupportedVersion
	StatusUnauthorized
	StatusProtocol
	StatusUnavailable
)

var statusNames = [...]string{
	StatusOK:                 "OK",
	StatusTimeout:            "TIMEOUT",
	StatusNoService:          "NO_SERVICE",
	StatusQueueFull:          "QUEUE_FULL",
	StatusCrashed:            "CRASHED",
	StatusMalformed:          "MALFORMED",
	StatusShuttingDown:       "SHUTTING_DOWN",
	StatusServiceError:       "SERVICE_ERROR",
	StatusTooLarge:           "TOO_LARGE",
	StatusInvalidArgument:    "INVALID_ARGUMENT",
	StatusUnsupportedVersion: "UNSUPPORTED_VERSION",
	StatusUnauthorized:       "UNAUTHORIZED",
	StatusProtocol:           "PROTOCOL",
	StatusUnavailable:        "UNAVAILABLE",
}

// String returns the protocol name of the status, such as "TIMEOUT".
// Codes this SDK does not know (a newer core may send them) print as
// "STATUS_<n>".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("STATUS_%d", uint16(s))
}

// Error is a failure that carries a protocol status: a RESPONSE, REPLY or
// ERROR from the core with a non-zero status, or a check the SDK made
// before sending (an oversized frame, a string too long for its field).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "cumulo: " + e.Status.String()
	}
	return "cumulo: " + e.Status.String() + ": " + e.Message
}

// Is makes errors.Is(err, ErrTimeout) true for every *Error of status
// TIMEOUT, whatever its message: a target without a message matches by
// status alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels to test errors against with errors.Is.
var (
	ErrTimeout            = &Error{Status: StatusTimeout}
	ErrNoService          = &Error{Status: StatusNoService}
	ErrQueueFull          = &Error{Status: StatusQueueFull}
	ErrCrashed            = &Error{Status: StatusCrashed}
	ErrMalformed          = &Error{Status: StatusMalformed}
	ErrShuttingDown       = &Error{Status: StatusShuttingDown}
	ErrServiceError       = &Error{Status: StatusServiceError}
	ErrTooLarge           = &Error{Status: StatusTooLarge}
	ErrInvalidArgument    = &Error{Status: StatusInvalidArgument}
	ErrUnsupportedVersion = &Error{Status: StatusUnsupportedVersion}
	ErrUnauthorized       = &Error{Status: StatusUnauthorized}
	ErrProtocol           = &Error{Status: StatusProtocol}
	ErrUnavailable        = &Error{Status: StatusUnavailable}
)

// ErrClosed is returned (possibly wrapped together with the *Error the core
// sent) by every call made after the connection ended.
var ErrClosed = errors.New("cumulo: connection closed")

func errorf(status Status, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}
