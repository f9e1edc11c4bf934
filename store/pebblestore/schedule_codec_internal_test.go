package pebblestore

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// TestScheduleCodec: a schedule with its options encodes and decodes back,
// and a body of format 2 (no options, Created's top bit clear) reads with
// the defaults.
func TestScheduleCodec(t *testing.T) {
	s := store.Schedule{
		Cron: "* * * * *", Queue: "q", Timezone: "Europe/Paris", Payload: []byte{0, 1, 0xff},
		Created: 1_700_000_000_000_000_000, Last: 1_700_000_060_000_000_000,
		Misfire: "all", Overlap: "skip", CatchUp: 3600e9, Priority: 7, TTR: 30e9, MaxAttempts: 3,
		Paused: true, LastRun: 1_700_000_061_000_000_000, LastID: "x@run-1700000061000",
	}
	var got store.Schedule
	if err := decodeSchedule(appendSchedule(nil, &s), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}

	// Format 2: Created, Last, Cron, Queue, Timezone, payload.
	var old []byte
	old = binary.LittleEndian.AppendUint64(old, uint64(s.Created))
	old = binary.LittleEndian.AppendUint64(old, uint64(s.Last))
	old = appendString(old, s.Cron)
	old = appendString(old, s.Queue)
	old = appendString(old, s.Timezone)
	old = append(old, s.Payload...)
	got = store.Schedule{}
	if err := decodeSchedule(old, &got); err != nil {
		t.Fatal(err)
	}
	want := store.Schedule{Cron: s.Cron, Queue: s.Queue, Timezone: s.Timezone, Payload: s.Payload,
		Created: s.Created, Last: s.Last, Priority: task.DefaultPriority}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("format 2:\n got %+v\nwant %+v", got, want)
	}
	// A cut body is an error, not a panic.
	full := appendSchedule(nil, &s)
	for n := range len(full) - len(s.Payload) {
		if err := decodeSchedule(full[:n], &got); err == nil {
			t.Errorf("body cut at %d of %d decoded", n, len(full))
		}
	}
}
