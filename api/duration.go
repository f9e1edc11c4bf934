package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Duration is a time.Duration that travels as a Go duration string
// ("1.5s", "100ms", "87600h"). Unmarshaling accepts only such a string:
// a JSON number is an error, since a bare 5 could mean seconds or
// nanoseconds and the API refuses to guess.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d as time.Duration formats it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// errDurationNumber is the error for a JSON number where a duration
// belongs.
var errDurationNumber = errors.New(`a duration is a string like "1.5s" or "250ms", not a number`)

// UnmarshalJSON decodes a duration string. It fails for anything else,
// numbers included; null leaves d as it is, as for the standard types.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if len(b) == 0 || b[0] != '"' {
		if len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
			return errDurationNumber
		}
		return fmt.Errorf("a duration is a string like \"1.5s\", not %.20s", b)
	}
	if n := len(b); n >= 2 && b[n-1] == '"' && !bytes.ContainsAny(b[1:n-1], `"\\`) {
		s = string(b[1 : n-1]) // no escapes: the common case, without a decoder
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q: want a Go duration like \"1.5s\" or \"250ms\"", s)
	}
	*d = Duration(v)
	return nil
}
