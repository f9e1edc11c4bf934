//go:build !linux

package bench

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// errNoRSS says why the serve scenario reports no RSS here.
var errNoRSS = errors.New("bench: a process's RSS is read from /proc, on Linux only")

func serveProcAttr() *syscall.SysProcAttr { return nil }

func processRSS(pid int) (int64, error) { return 0, errNoRSS }

// diskUsage returns the total length of the files under dir.
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		total += info.Size()
		return nil
	})
	return total, err
}

// freeDisk is unknown here: the scenario does not check it.
func freeDisk(dir string) (uint64, error) { return math.MaxUint64, nil }
