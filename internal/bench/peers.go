package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// The peers' side of the one-call comparison. Other Go timer libraries
// (go-zero's TimingWheel, the one the module proxy serves) are not
// dependencies of this module: the module in benchmarks/peers has them,
// with hourglass replaced by this checkout, and its command runs
// [CompareOneCall] with them added to [OneCallSides]. The schedule-cancel
// scenario runs that command with `go run` (runPeers) and takes its rows,
// so that `hourglass-bench --scenario schedule-cancel`, run from the
// repository, is still one command; the peers' module's own README says
// how to run it alone.

// peersDir is where the peers' module lies in the repository.
var peersDir = filepath.Join("benchmarks", "peers")

// FindPeers returns the directory of the peers' module if the working
// directory is in a checkout of hourglass that has one (it looks in the
// working directory and each one above it), and "" otherwise.
func FindPeers() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, peersDir)
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// runPeers runs the one-call comparison at size n in the peers' module
// in dir and returns its rows: `go run . -json` there, whose standard
// output is the JSON of its results.
func runPeers(dir string, n int, budget time.Duration, turns int) ([]Result, error) {
	cmd := exec.Command("go", "run", ".", "-json",
		"-n", strconv.Itoa(n), "-budget", budget.String(), "-turns", strconv.Itoa(turns))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go run: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var rs []Result
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil {
		return nil, fmt.Errorf("reading its results: %w", err)
	}
	if len(rs) == 0 {
		return nil, errors.New("no results")
	}
	return rs, nil
}
