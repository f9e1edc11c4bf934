// Command floor is the least a Go server with a goroutine per connection
// does for a beanstalkd put: it reads the command line and the body and
// answers INSERTED, storing nothing. Its CPU time per put is the floor
// under hourglass's own (the protocol on Go's network poller, without
// the store, the group commit or the fsync), measured under the same
// load and beside beanstalkd's. With -sync DIR it also keeps hourglass's
// promise in the least way: the bodies are appended to a file in DIR by
// a group commit (one write and one fdatasync for every put that arrived
// while the last one ran) and each put is answered after its group's
// fdatasync, so that the cost of an fsync before every answer, the waits
// and wake-ups it brings included, is measured apart from a store's. It
// serves until the time given is up, then prints its puts and its CPU
// time (user + system) per put.
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
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11402", "address to listen on")
	d := flag.Duration("for", 20*time.Second, "how long to serve")
	dir := flag.String("sync", "", "append the bodies to a file in this directory, and answer each put after its group's fdatasync")
	flag.Parse()
	var glog *groupLog
	if *dir != "" {
		f, err := os.CreateTemp(*dir, "floor-*.log")
		if err != nil {
			log.Fatal(err)
		}
		defer os.Remove(f.Name())
		glog = newGroupLog(f)
	}
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
			go serve(c, &puts, glog)
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
func serve(c net.Conn, puts *atomic.Int64, gl *groupLog) {
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
			if gl != nil {
				if err := gl.append(body[:n]); err != nil {
					log.Fatal(err)
				}
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

// groupLog appends bodies to a file by group commit: append adds a body
// to the open group and waits until a write and an fdatasync that
// include it have returned. One goroutine (run) commits the groups, one
// at a time; a group opens while the one before syncs, so with many
// connections waiting each fdatasync carries many puts.
type groupLog struct {
	f    *os.File
	kick chan struct{} // a group has a body (capacity 1)

	mu   sync.Mutex
	open *group
}

// group is one group commit: its bodies, and done, closed once they are
// synced (err set before).
type group struct {
	buf  []byte
	done chan struct{}
	err  error
}

func newGroupLog(f *os.File) *groupLog {
	gl := &groupLog{f: f, kick: make(chan struct{}, 1), open: &group{done: make(chan struct{})}}
	go gl.run()
	return gl
}

// append adds body to the open group and returns once it is synced.
func (gl *groupLog) append(body []byte) error {
	gl.mu.Lock()
	g := gl.open
	g.buf = append(g.buf, body...)
	gl.mu.Unlock()
	select {
	case gl.kick <- struct{}{}:
	default:
	}
	<-g.done
	return g.err
}

// run commits the open group each time it has a body: it takes it, opens
// the next, writes and syncs it, and tells its puts.
func (gl *groupLog) run() {
	for range gl.kick {
		gl.mu.Lock()
		g := gl.open
		if len(g.buf) == 0 {
			gl.mu.Unlock()
			continue
		}
		gl.open = &group{done: make(chan struct{})}
		gl.mu.Unlock()
		if _, err := gl.f.Write(g.buf); err != nil {
			g.err = err
		} else if err := syscall.Fdatasync(int(gl.f.Fd())); err != nil {
			g.err = err
		}
		close(g.done)
	}
}
