package hourglass_test

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass"
)

// An event loop arms a timeout for each request of a poll with one Batch,
// and in the next one cancels those whose replies came.
func ExampleTimer_Batch() {
	timer := hourglass.New()
	defer timer.Stop()

	done := make(chan struct{})
	var handles []hourglass.Handle
	timer.Batch(func(b *hourglass.Batch) {
		for i := range 3 {
			h, err := b.AfterFunc(10*time.Millisecond, func() {
				fmt.Println("request", i, "timed out")
				close(done)
			})
			if err != nil {
				fmt.Println(err)
				return
			}
			handles = append(handles, h)
		}
	})
	timer.Batch(func(b *hourglass.Batch) {
		for _, h := range handles[1:] { // requests 1 and 2 were answered
			b.Cancel(h)
		}
	})
	<-done
	fmt.Println("again:", timer.Cancel(handles[0]))
	// Output:
	// request 0 timed out
	// again: false
}
