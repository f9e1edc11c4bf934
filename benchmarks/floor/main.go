// Command floor is the least a Go server with a goroutine per connection
// does for a beanstalkd put: it reads the command line and the body and
// answers INSERTED, storing nothing. Its CPU time per put is the floor
// under hourglass's own (the protocol on Go's network poller, without
// the store, the group commit or the fsync), measured under the same
// load and beside beanstalkd's. It serves until the time given is up,
// then prints its puts and its CPU time (user + system) per put.
//
//	go run . -addr 127.0.0.1:11402 -for 20s &
//	cd ../.. && HOURGLASS_BEANSTALK_PROFILE=/tmp/p \
//	  HOURGLASS_BEANSTALK_PROFILE_SERVERS=tcp:127.0.0.1:11402 \
//	  HOURGLASS_BEANSTALK_PROFILE_CASES=puts go test -run TestProfile -v ./beanstalk
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11402", "address to listen on")
	d := flag.Duration("for", 20*time.Second, "how long to serve")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	var puts atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c, &puts)
		}
	}()
	start := cpuTime()
	time.Sleep(*d)
	ln.Close()
	cpu := cpuTime() - start
	n := puts.Load()
	fmt.Printf("%d puts, %v of CPU", n, cpu.Round(time.Millisecond))
	if n > 0 {
		fmt.Printf(", %.1f µs a put", float64(cpu.Microseconds())/float64(n))
	}
	fmt.Println()
}

// flushReader reads from the connection after sending the replies
// written so far, as hourglass's beanstalk server does: replies to
// pipelined commands go out together.
type flushReader struct {
	w *bufio.Writer
	c net.Conn
}

func (f flushReader) Read(p []byte) (int, error) {
	if f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.c.Read(p)
}

// serve answers put, use and watch on c, and UNKNOWN_COMMAND to the rest.
func serve(c net.Conn, puts *atomic.Int64) {
	defer c.Close()
	w := bufio.NewWriter(c)
	r := bufio.NewReader(flushReader{w, c})
	body := make([]byte, 0, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch string(f[0]) {
		case "put":
			n, err := strconv.Atoi(string(f[len(f)-1]))
			if err != nil || n < 0 || n+2 > cap(body) {
				return
			}
			body = body[:n+2]
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			fmt.Fprintf(w, "INSERTED %d\r\n", puts.Add(1))
		case "use":
			fmt.Fprintf(w, "USING %s\r\n", f[1])
		case "watch":
			w.WriteString("WATCHING 1\r\n")
		default:
			w.WriteString("UNKNOWN_COMMAND\r\n")
		}
	}
}

// cpuTime returns the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
