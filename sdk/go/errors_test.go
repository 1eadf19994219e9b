package cumulo

import (
	"errors"
	"fmt"
	"testing"
)

func TestStatusNames(t *testing.T) {
	cases := map[Status]string{
		StatusOK:           "OK",
		StatusTimeout:      "TIMEOUT",
		StatusServiceError: "SERVICE_ERROR",
		StatusProtocol:     "PROTOCOL",
		StatusUnavailable:  "UNAVAILABLE",
		Status(14):         "STATUS_14",
		Status(42):         "STATUS_42",
	}
	for status, want := range cases {
		if got := status.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", uint16(status), got, want)
		}
	}
	if StatusUnavailable != 13 || !errors.Is(&Error{Status: 13, Message: "given up"}, ErrUnavailable) {
		t.Errorf("StatusUnavailable = %d, want 13 and to match ErrUnavailable", StatusUnavailable)
	}
}

func TestErrorMatchesSentinelByStatus(t *testing.T) {
	err := fmt.Errorf("calling /a: %w", &Error{Status: StatusTimeout, Message: "after 5000 ms"})
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("errors.Is(%v, ErrTimeout) = false", err)
	}
	if errors.Is(err, ErrNoService) {
		t.Errorf("errors.Is(%v, ErrNoService) = true", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Message != "after 5000 ms" {
		t.Errorf("errors.As gave %#v", e)
	}
	if got, want := e.Error(), "cumulo: TIMEOUT: after 5000 ms"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// A target with a message is a specific error, not a class.
	if errors.Is(ErrTimeout, &Error{Status: StatusTimeout, Message: "x"}) {
		t.Error("a sentinel matched a target with a message")
	}
}
