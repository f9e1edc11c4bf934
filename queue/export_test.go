package queue

import "fmt"

// Verify runs the invariant checker of q, which must be one of the package's
// structures (of any element type), and returns the first violation found.
// It lets the tests in package queue_test call verify after every step.
func Verify(q any) error {
	v, ok := q.(interface{ verify() error })
	if !ok {
		panic(fmt.Sprintf("queue: Verify of %T, which has no invariant checker", q))
	}
	return v.verify()
}
