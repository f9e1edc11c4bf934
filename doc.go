// Package hourglass runs callbacks after a delay, at a time, or on a
// schedule, for programs that keep very many timers: connection and request
// timeouts, heartbeats, delayed acknowledgements, delay queues.
//
// A [Timer] keeps its pending timeouts in one of four structures from
// package [github.com/hourglass-go/hourglass/queue]:
//
//	structure            schedule   cancel     fire (k due)  driver wakes
//	hierarchical wheel   O(1)       O(1)       O(k·L)         at the next slot with work
//	hashed wheel         O(1)       O(1)       O(n/slots)/tick at each occupied slot, every turn
//	4-ary heap           O(log n)   O(log n)   O(k log n)     at the next deadline
//	sorted list          O(n)       O(1)       O(k)           at the next deadline
//
// (L is the number of wheel levels, 7 for a 1 ms tick.) The hierarchical
// wheel, the default, suits almost every program: constant-time operations
// at any size, deadlines of any length, and a driver that sleeps until
// there is work. The hashed wheel is Netty's HashedWheelTimer, for
// comparison: each slot visit walks timeouts that are whole turns away. The heap is what
// time.AfterFunc uses, with exact deadlines; the sorted list is the
// textbook baseline. The wheels round a deadline up to their tick, so a
// callback runs at most one tick late and never early.
//
// Callbacks run where the [Executor] puts them: on a goroutine each
// ([Goroutines], the default, like time.AfterFunc), on the Timer's own
// goroutine ([Inline], fastest, for short callbacks), or on a bounded
// [Pool]. A panic in a callback goes to the panic handler and the Timer
// carries on. [WithMaxPending] bounds the number of pending timeouts, and
// [Timer.Stop] hands back every timeout that never ran.
//
// To schedule and cancel many timeouts at once, [Timer.Batch] reads the
// clock once and takes one lock for all of them, and names each by a
// [Handle] value instead of an allocated [Timeout]: a schedule and a
// cancel then cost about what the structure's add and remove do.
//
// For a one-off timeout there is the shared [Default] Timer behind the
// package-level [AfterFunc]; one Timer per process is the intended use.
package hourglass
