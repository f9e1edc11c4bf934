// Command peers runs the one-call comparison of hourglass's
// schedule-cancel scenario with other Go timer libraries added: one
// goroutine schedules a timeout and cancels it, one call each, with n
// others pending at delays spread over 0-10 minutes, on each side in
// one process, in turns (bench.CompareOneCall). It prints a Markdown
// table, or with -json the results, which `hourglass-bench --scenario
// schedule-cancel` reads when run from the repository.
//
//	go run . [-n 1000000] [-budget 1s] [-turns 5] [-sides a,b] [-json]
//
// It is a module of its own so that the peers stay out of hourglass's
// go.mod; see README.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/internal/bench"
	"github.com/zeromicro/go-zero/core/collection"
)

func main() {
	n := flag.Int("n", 1_000_000, "timeouts pending on each side")
	budget := flag.Duration("budget", time.Second, "time measured on each side, over all turns")
	turns := flag.Int("turns", 5, "turns the sides take")
	asJSON := flag.Bool("json", false, "print the results as JSON")
	only := flag.String("sides", "", "comma-separated names of the sides to run (default all); the first is the one the others are compared with")
	flag.Parse()

	sides := append(bench.OneCallSides(), peers()...)
	if *only != "" {
		var chosen []bench.Side
		for name := range strings.SplitSeq(*only, ",") {
			i := slices.IndexFunc(sides, func(s bench.Side) bool { return s.Name == name })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "peers: no side %q\n", name)
				os.Exit(2)
			}
			chosen = append(chosen, sides[i])
		}
		sides = chosen
	}
	rs := bench.CompareOneCall(sides, *n, *budget, *turns)
	var err error
	if *asJSON {
		err = json.NewEncoder(os.Stdout).Encode(rs)
	} else {
		err = bench.WriteMarkdown(os.Stdout, rs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func noop() {}

// peers returns the other libraries' sides, each configured as its
// README shows.
func peers() []bench.Side {
	return []bench.Side{
		{
			Name: "go-zero TimingWheel",
			Doc:  "collection.NewTimingWheel(time.Second, 300, f), as go-zero's Cache makes it: SetTimer, RemoveTimer of a new key",
			Start: func(n int, delay func() time.Duration) (func(), func(), error) {
				tw, err := collection.NewTimingWheel(time.Second, 300, func(key, value any) {})
				if err != nil {
					return nil, nil, err
				}
				var key atomic.Uint64
				for range n {
					if err := tw.SetTimer(key.Add(1), nil, delay()); err != nil {
						tw.Stop()
						return nil, nil, err
					}
				}
				pair := func() {
					k := key.Add(1)
					tw.SetTimer(k, nil, delay())
					tw.RemoveTimer(k)
				}
				return pair, tw.Stop, nil
			},
		},
	}
}
