package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hourglass-go/hourglass/internal/bench"
)

// barWidth is the number of cells in the progress bar.
const barWidth = 20

// progress draws `[#####.....] 12/40 schedule-cancel heap n=100000` on w
// before each job: redrawn in place when w is a terminal, a line per job
// otherwise (a log, a pipe, a test's buffer).
type progress struct {
	w        io.Writer
	terminal bool
	width    int // of the last line drawn in place, to blank its tail
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// update is a progress callback for bench.Run.
func (p *progress) update(done, total int, j bench.Job) {
	if total == 0 {
		return
	}
	filled := done * barWidth / total
	line := fmt.Sprintf("[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), done, total, j.Label())
	if done == total {
		line = fmt.Sprintf("[%s] %d/%d done", strings.Repeat("#", barWidth), done, total)
	}
	if !p.terminal {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := max(p.width-len(line), 0)
	p.width = len(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	if done == total {
		fmt.Fprintln(p.w)
	}
}
