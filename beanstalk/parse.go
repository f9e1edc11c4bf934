package beanstalk

import (
	"bytes"
	"errors"
	"math"
)

// op is one command of the protocol. Its value indexes the command table
// (commands.go) and the per-command counters of the stats command.
type op uint8

const (
	opUnknown op = iota
	opPut
	opPeek
	opPeekReady
	opPeekDelayed
	opPeekBuried
	opReserve
	opReserveWithTimeout
	opReserveJob
	opDelete
	opRelease
	opBury
	opKick
	opKickJob
	opTouch
	opStats
	opStatsJob
	opStatsTube
	opUse
	opWatch
	opIgnore
	opListTubes
	opListTubeUsed
	opListTubesWatched
	opQuit
	opPauseTube
	numOps
)

// String returns the command's name, as the stats command counts it
// ("cmd-NAME").
func (o op) String() string {
	if o >= numOps {
		return "unknown"
	}
	return opNames[o]
}

var opNames = [numOps]string{
	opUnknown:            "unknown",
	opPut:                "put",
	opPeek:               "peek",
	opPeekReady:          "peek-ready",
	opPeekDelayed:        "peek-delayed",
	opPeekBuried:         "peek-buried",
	opReserve:            "reserve",
	opReserveWithTimeout: "reserve-with-timeout",
	opReserveJob:         "reserve-job",
	opDelete:             "delete",
	opRelease:            "release",
	opBury:               "bury",
	opKick:               "kick",
	opKickJob:            "kick-job",
	opTouch:              "touch",
	opStats:              "stats",
	opStatsJob:           "stats-job",
	opStatsTube:          "stats-tube",
	opUse:                "use",
	opWatch:              "watch",
	opIgnore:             "ignore",
	opListTubes:          "list-tubes",
	opListTubeUsed:       "list-tube-used",
	opListTubesWatched:   "list-tubes-watched",
	opQuit:               "quit",
	opPauseTube:          "pause-tube",
}

// command is one parsed command line. Which fields are set depends on op:
// id for the commands that name a job, tube for those that name a tube,
// and the put, release, bury, kick, pause-tube and reserve-with-timeout
// arguments in the fields of those names.
type command struct {
	op      op
	id      uint64
	pri     uint32
	delay   uint32 // seconds: put, release, pause-tube
	ttr     uint32 // seconds, as sent (0 is raised to 1 by put)
	bytes   uint32 // put: the body's length without its CR-LF
	timeout int32  // reserve-with-timeout, seconds; negative: none
	bound   uint32 // kick
	tube    string
}

// Parse errors. The connection answers each with the reply of that name.
var (
	errBadFormat      = errors.New("hourglass: beanstalk: BAD_FORMAT")
	errUnknownCommand = errors.New("hourglass: beanstalk: UNKNOWN_COMMAND")
	// errJobTooBig: a put whose body is over the limit; command.bytes is
	// set so that the caller can discard the body and its CR-LF.
	errJobTooBig = errors.New("hourglass: beanstalk: JOB_TOO_BIG")
)

// Limits of the protocol (beanstalkd's dat.h).
const (
	// maxTubeName is the longest tube name, in bytes.
	maxTubeName = 200
	// maxLine is the longest command line, CR-LF included: the longest
	// command, "pause-tube " with a longest name and a 10-digit delay
	// after a space, is 11 + 200 + 11 bytes, plus CR-LF = 224.
	maxLine = 11 + maxTubeName + 11 + 2
)

// syntax is how a command's arguments are read.
type syntax uint8

const (
	noArgs      syntax = iota // the line is exactly the name
	jobArg                    // one job id, nothing after it
	tubeArg                   // the rest of the line is a tube name
	putArgs                   // <pri> <delay> <ttr> <bytes>
	releaseArgs               // <id> <pri> <delay>
	buryArgs                  // <id> <pri>
	kickArgs                  // <bound>, read as C's strtoul reads
	timeoutArg                // <seconds>, trailing bytes ignored
	pauseArgs                 // <tube> <delay>
	anyArgs                   // quit: whatever follows is ignored
)

// grammar lists the commands in the order the reference server tries
// them (prot.c, which_cmd): a line is the first command whose prefix it
// starts with, so "reserve-job 1" is reserve-job but "reservex" is a
// malformed reserve, and "peek" alone is unknown. Prefixes that take
// arguments end in a space, except pause-tube's, which the reference
// also matches without one.
var grammar = [...]struct {
	prefix string
	op     op
	syntax syntax
}{
	{"put ", opPut, putArgs},
	{"peek ", opPeek, jobArg},
	{"peek-ready", opPeekReady, noArgs},
	{"peek-delayed", opPeekDelayed, noArgs},
	{"peek-buried", opPeekBuried, noArgs},
	{"reserve-with-timeout ", opReserveWithTimeout, timeoutArg},
	{"reserve-job ", opReserveJob, jobArg},
	{"reserve", opReserve, noArgs},
	{"delete ", opDelete, jobArg},
	{"release ", opRelease, releaseArgs},
	{"bury ", opBury, buryArgs},
	{"kick ", opKick, kickArgs},
	{"kick-job ", opKickJob, jobArg},
	{"touch ", opTouch, jobArg},
	{"stats-job ", opStatsJob, jobArg},
	{"stats-tube ", opStatsTube, tubeArg},
	{"stats", opStats, noArgs},
	{"use ", opUse, tubeArg},
	{"watch ", opWatch, tubeArg},
	{"ignore ", opIgnore, tubeArg},
	{"list-tubes-watched", opListTubesWatched, noArgs},
	{"list-tube-used", opListTubeUsed, noArgs},
	{"list-tubes", opListTubes, noArgs},
	{"quit", opQuit, anyArgs},
	{"pause-tube", opPauseTube, pauseArgs},
}

// parse reads one command line (without its CR-LF). maxJob is the largest
// body a put may declare.
//
// On an error, c.op is still set when the reference server counts the
// command in its cmd-* statistics anyway: a put that is too big or has
// trailing bytes, and a pause-tube whose name is not valid.
func parse(line []byte, maxJob int) (c command, err error) {
	if bytes.IndexByte(line, 0) >= 0 {
		return command{}, errBadFormat // the reference reads lines as C strings
	}
	for _, g := range grammar {
		if !bytes.HasPrefix(line, []byte(g.prefix)) {
			continue
		}
		rest := line[len(g.prefix):]
		c.op = g.op
		switch g.syntax {
		case noArgs:
			if len(rest) != 0 {
				return command{}, errBadFormat
			}
		case anyArgs:
		case jobArg:
			if c.id, rest, err = readU64(rest); err != nil || len(rest) != 0 {
				return command{}, errBadFormat
			}
		case tubeArg:
			if !validTube(rest) {
				return command{}, errBadFormat
			}
			c.tube = string(rest)
		case putArgs:
			return parsePut(rest, maxJob)
		case releaseArgs:
			c.id, rest, err = readU64(rest)
			if err == nil {
				c.pri, rest, err = readU32(rest)
			}
			if err == nil {
				c.delay, rest, err = readU32(rest)
			}
			if err != nil || len(rest) != 0 {
				return command{}, errBadFormat
			}
		case buryArgs:
			c.id, rest, err = readU64(rest)
			if err == nil {
				c.pri, rest, err = readU32(rest)
			}
			if err != nil || len(rest) != 0 {
				return command{}, errBadFormat
			}
		case kickArgs:
			if c.bound, err = readStrtoul(rest); err != nil {
				return command{}, errBadFormat
			}
		case timeoutArg:
			// beanstalkd 1.12 reads the timeout with strtol into an int:
			// no digits is 0, a negative timeout waits for ever, and a
			// number is cut to 32 bits. (Later versions take only 0 to
			// INT_MAX; protocol.txt is 1.12's.)
			v, err := readStrtol(rest)
			if err != nil {
				return command{}, errBadFormat
			}
			c.timeout = int32(v)
		case pauseArgs:
			return parsePause(rest)
		}
		return c, nil
	}
	return command{}, errUnknownCommand
}

// parsePut reads put's arguments: four numbers, a body no longer than
// maxJob, nothing after them. The size is checked before the trailing
// bytes, as the reference does: a put too big is answered JOB_TOO_BIG
// whatever follows its size.
func parsePut(rest []byte, maxJob int) (command, error) {
	c := command{op: opPut}
	var err error
	c.pri, rest, err = readU32(rest)
	if err == nil {
		c.delay, rest, err = readU32(rest)
	}
	if err == nil {
		c.ttr, rest, err = readU32(rest)
	}
	if err == nil {
		c.bytes, rest, err = readU32(rest)
	}
	if err != nil {
		return command{}, errBadFormat
	}
	if int64(c.bytes) > int64(maxJob) {
		return c, errJobTooBig
	}
	if len(rest) != 0 {
		return command{op: opPut}, errBadFormat
	}
	return c, nil
}

// parsePause reads pause-tube's arguments: a run of name characters after
// any spaces, then the delay. The command counts once both are read, even
// if the name then proves invalid (too long, or starting with '-').
func parsePause(rest []byte) (command, error) {
	i := 0
	for i < len(rest) && rest[i] == ' ' {
		i++
	}
	j := i
	for j < len(rest) && nameChar(rest[j]) {
		j++
	}
	if j == i {
		return command{}, errBadFormat
	}
	delay, after, err := readU32(rest[j:])
	if err != nil || len(after) != 0 {
		return command{}, errBadFormat
	}
	if !validTube(rest[i:j]) {
		return command{op: opPauseTube}, errBadFormat
	}
	return command{op: opPauseTube, tube: string(rest[i:j]), delay: delay}, nil
}

// readU64 reads a decimal number below 2^64 after any spaces, as the
// reference's read_u64 does: a digit must come first (no sign), and it
// returns what follows the digits.
func readU64(b []byte) (uint64, []byte, error) {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, nil, errBadFormat
	}
	var v uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, nil, errBadFormat
		}
		v = v*10 + d
	}
	return v, b[i:], nil
}

// readU32 is readU64 for numbers below 2^32.
func readU32(b []byte) (uint32, []byte, error) {
	v, rest, err := readU64(b)
	if err != nil || v > math.MaxUint32 {
		return 0, nil, errBadFormat
	}
	return uint32(v), rest, nil
}

// readStrtol reads a number as C's strtol does in base 10: white space,
// an optional sign, digits, anything after. No digits at all read as 0; a
// number out of the range of a 64-bit long is an error (ERANGE).
func readStrtol(b []byte) (int64, error) {
	for len(b) > 0 && (b[0] == ' ' || b[0] >= '\t' && b[0] <= '\r') {
		b = b[1:]
	}
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	for i := 0; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (limit-d)/10 {
			return 0, errBadFormat
		}
		v = v*10 + d
	}
	if neg {
		return int64(-v), nil
	}
	return int64(v), nil
}

// readStrtoul reads kick's bound as the reference does, with C's strtoul
// and a cast to unsigned int: white space, an optional sign, at least one
// digit, anything after; a negative number wraps around, a number of 2^64
// or more is an error, and the result is cut to 32 bits.
func readStrtoul(b []byte) (uint32, error) {
	for len(b) > 0 && (b[0] == ' ' || b[0] >= '\t' && b[0] <= '\r') {
		b = b[1:]
	}
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, errBadFormat
	}
	var v uint64
	for i := 0; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, errBadFormat
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return uint32(v), nil
}

// nameChar reports whether c may appear in a tube name: letters, digits
// and "-+/;.$_()".
func nameChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '-', '+', '/', ';', '.', '$', '_', '(', ')':
		return true
	}
	return false
}

// validTube reports whether name is a tube name: 1 to 200 name
// characters, not starting with '-'.
func validTube(name []byte) bool {
	if len(name) == 0 || len(name) > maxTubeName || name[0] == '-' {
		return false
	}
	for _, c := range name {
		if !nameChar(c) {
			return false
		}
	}
	return true
}
