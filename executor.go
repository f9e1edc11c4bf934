package hourglass

// Executor runs the callbacks a [Timer] hands it. The Timer calls Execute
// from its driver goroutine, with callbacks already wrapped so that a panic
// goes to the Timer's panic handler. An Executor should not block for long:
// while Execute blocks, no other timeout of that driver fires.
type Executor interface {
	Execute(f func())
}

var (
	// Inline runs each callback on the Timer's driver goroutine, as Netty's
	// HashedWheelTimer does. It is the fastest executor and allocates
	// nothing, but a slow callback delays every timeout behind it: keep
	// callbacks short, or hand long work to a [Pool].
	Inline Executor = inline{}

	// Goroutines runs each callback on a goroutine of its own, as
	// time.AfterFunc does. It is the default. When many callbacks come
	// due together, the driver starts them in groups of up to 64, each
	// group from a goroutine of its own, so that starting them spreads
	// over the Ps and keeps their order (see handOff in driver.go). [Timer.Stop]
	// and [Keyed.Stop] count a group as handed over once the driver has
	// begun it: up to 64 of its callbacks, not one, may start after Stop
	// returns.
	Goroutines Executor = goroutines{}
)

type inline struct{}

func (inline) Execute(f func()) { f() }

type goroutines struct{}

func (goroutines) Execute(f func()) { go f() }
