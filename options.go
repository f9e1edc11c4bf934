package hourglass

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// MinTick is the smallest tick a wheel accepts. Finer ticks buy nothing: a
// driver goroutine cannot sleep and wake much more precisely than this.
const MinTick = time.Microsecond

// maxSlots bounds a hashed wheel's slot count (2^30 slots already take
// 16 GiB of list heads).
const maxSlots = 1 << 30

// An Option configures a [Timer] made by [New] or a [Keyed] made by
// [NewKeyed].
type Option func(*config)

// config is what the options build. A bad option records err, which New
// keeps and every scheduling call returns.
type config struct {
	structure    string          // its name, for Stats
	queue        queue.Structure // what the options chose
	exec         Executor
	maxPending   int
	panicHandler func(v any)
	shards       int
	err          error
	// keyed is set for NewKeyed before the options run, so that an
	// option that does not apply to a Keyed fails where it is given.
	keyed bool
}

func defaultConfig() config {
	c := config{
		exec:         Goroutines,
		panicHandler: logPanic,
		shards:       runtime.GOMAXPROCS(0),
	}
	WithHierarchicalWheel(time.Millisecond)(&c)
	return c
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("hourglass: "+format, args...)
	}
}

// WithHierarchicalWheel makes the Timer keep its timeouts in a hierarchical
// timing wheel with the given tick ([queue.HierarchicalWheel]): O(1) to
// schedule and cancel, and its driver sleeps until the next deadline. A
// timeout fires at most one tick after its deadline. This is the default,
// with a 1 ms tick. The tick must be at least [MinTick].
func WithHierarchicalWheel(tick time.Duration) Option {
	return func(c *config) {
		if tick < MinTick {
			c.fail("WithHierarchicalWheel: tick %v is below the minimum %v", tick, MinTick)
			return
		}
		c.structure = fmt.Sprintf("hierarchical wheel (tick %v)", tick)
		c.queue = queue.HierarchicalWheel(tick)
	}
}

// WithHashedWheel makes the Timer keep its timeouts in Netty's hashed wheel
// with the given tick and number of slots, rounded up to a power of two
// ([queue.HashedWheel]). Netty's defaults are 100 ms and 512 slots. Its
// driver wakes at each occupied slot, once per turn of the wheel, and
// walks the whole slot, including timeouts that are whole turns away, so
// give it enough slots that a slot stays short: about one slot per
// (pending timeouts / 100). A timeout fires at most one tick after its
// deadline. The tick must be at least [MinTick] and slots between 1 and
// 2^30.
func WithHashedWheel(tick time.Duration, slots int) Option {
	return func(c *config) {
		if tick < MinTick {
			c.fail("WithHashedWheel: tick %v is below the minimum %v", tick, MinTick)
			return
		}
		if slots < 1 || slots > maxSlots {
			c.fail("WithHashedWheel: slots %d is outside 1 to %d", slots, maxSlots)
			return
		}
		c.structure = fmt.Sprintf("hashed wheel (tick %v, %d slots)", tick, slots)
		c.queue = queue.HashedWheel(tick, slots)
	}
}

// WithHeap makes the Timer keep its timeouts in a 4-ary min-heap
// ([queue.Heap]), the structure of Go's runtime timers: O(log n) to
// schedule and cancel, exact deadlines, and a driver that sleeps until the
// next one.
func WithHeap() Option {
	return func(c *config) {
		c.structure = "heap"
		c.queue = queue.Heap()
	}
}

// WithSortedList makes the Timer keep its timeouts in a sorted list
// ([queue.SortedList]): O(n) to schedule, O(1) to cancel, exact deadlines.
// It is the baseline for comparison; use it only for a few hundred timeouts
// or for deadlines that arrive in order.
func WithSortedList() Option {
	return func(c *config) {
		c.structure = "sorted list"
		c.queue = queue.SortedList()
	}
}

// WithExecutor sets where callbacks run: [Inline], [Goroutines] (the
// default) or a [Pool], or any other [Executor].
func WithExecutor(e Executor) Option {
	return func(c *config) {
		if e == nil {
			c.fail("WithExecutor: nil executor")
			return
		}
		c.exec = e
	}
}

// WithMaxPending limits the number of pending timeouts: scheduling one more
// returns [ErrTooManyPending], and capacity returns as timeouts fire or are
// cancelled. A periodic timeout holds one place until it ends. 0, the
// default, means no limit. With a limit, every schedule and cancel updates
// one shared counter, which costs some parallel throughput.
func WithMaxPending(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithMaxPending: negative limit %d", n)
			return
		}
		c.maxPending = n
	}
}

// WithPanicHandler sets the function that receives the value of a panic in
// a callback. The default logs it, with the stack, through log/slog's
// default logger. The Timer and its other timeouts carry on either way.
// The handler runs on the goroutine where the callback panicked.
func WithPanicHandler(h func(v any)) Option {
	return func(c *config) {
		if h == nil {
			c.fail("WithPanicHandler: nil handler")
			return
		}
		c.panicHandler = h
	}
}

// WithShards splits the Timer into n independent shards, each with its own
// lock, structure and driver goroutine; a new timeout goes to the shard
// its caller's processor (the runtime's P) was given, round robin, when it
// first scheduled. The default is GOMAXPROCS, so that goroutines on
// different cores rarely meet on one lock, as with the runtime's per-P
// timers. A [Keyed] is not sharded: given to [NewKeyed], WithShards is an
// error, which every Set returns. Sizes given to
// [WithHashedWheel] are per shard. With one shard, timeouts due at
// the same tick of a wheel, or at the same instant in a sorted list, fire
// in the order they were scheduled; a heap keeps no such order, and
// neither do several shards.
func WithShards(n int) Option {
	return func(c *config) {
		if c.keyed {
			c.fail("WithShards: a Keyed is not sharded (one lock, one driver); WithShards applies to New only")
			return
		}
		if n < 1 {
			c.fail("WithShards: %d shards, need at least 1", n)
			return
		}
		c.shards = n
	}
}

func logPanic(v any) {
	slog.Error("hourglass: callback panicked", "panic", v, "stack", string(debug.Stack()))
}
