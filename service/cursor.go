package service

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/hourglass-go/hourglass/task"
)

// Cursor is a place in a queue's due order, the order of FindTasks: the
// due time and job id of the last task a page looked at. Tasks are in
// ascending (due, job id), so a task put later with the same due time
// comes after, and a page goes on with the tasks strictly after its
// cursor. The zero Cursor is the start of the queue; FindTasks answers
// the zero Cursor as its next when there is no further page.
//
// A task's due time is the one its Task shows as Due, in every state: a
// delayed or ready task's is when it falls (or fell) due; a reserved
// task's is the due time it was reserved at (the lease does not move
// it); a dead task's is the due time of its last attempt. A retry,
// release or nack with a delay moves it; a kick or a retry of a dead or
// delayed task makes it the earlier of its due time and now.
type Cursor struct {
	// Due is the task's due time in Unix ns.
	Due int64
	// Job is the task's job id; 0 only in the zero Cursor.
	Job uint64
}

// IsZero reports whether c is the start of the queue (or, as a next
// cursor, the end).
func (c Cursor) IsZero() bool { return c.Job == 0 }

// Before reports whether c comes before (due, job) in the due order: a
// page after c holds (due, job).
func (c Cursor) Before(due int64, job uint64) bool {
	return c.Due < due || c.Due == due && c.Job < job
}

// cursorVersion is the first byte of an encoded cursor, so that a later
// encoding can be told from this one: 1, then the due time and the job
// id, 8 bytes each, big-endian.
const (
	cursorVersion = 1
	cursorLen     = 1 + 8 + 8
)

// cursorText is the encoding of a cursor on the wire: base64url without
// padding, safe in a query string as it is.
var cursorText = base64.RawURLEncoding

// String returns c as the opaque text of the wire: "" for the zero
// Cursor, otherwise 23 characters of base64url. ParseCursor reads it.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	var b [cursorLen]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:], uint64(c.Due))
	binary.BigEndian.PutUint64(b[9:], c.Job)
	return cursorText.EncodeToString(b[:])
}

// ParseCursor reads a cursor given back as a page's after: "" (and "0",
// what clients of the job id cursor send for the first page) is the
// start; anything else must be a Cursor's String. Otherwise it returns
// an error wrapping task.ErrInvalid that names the parameter after.
func ParseCursor(s string) (Cursor, error) {
	if s == "" || s == "0" {
		return Cursor{}, nil
	}
	bad := fmt.Errorf("%w: after %.40q: not a cursor this server gave (give back the next of the page before, or nothing for the first page)", task.ErrInvalid, s)
	if cursorText.DecodedLen(len(s)) != cursorLen {
		return Cursor{}, bad
	}
	var b [cursorLen]byte
	if n, err := cursorText.Decode(b[:], []byte(s)); err != nil || n != cursorLen || b[0] != cursorVersion {
		return Cursor{}, bad
	}
	c := Cursor{Due: int64(binary.BigEndian.Uint64(b[1:])), Job: binary.BigEndian.Uint64(b[9:])}
	if c.Job == 0 || c.String() != s {
		return Cursor{}, bad
	}
	return c, nil
}
