package pebblestore

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walSizes returns the size of each WAL file (NNNNNN.log) in dir, by
// name, before Open replays them: Pebble may recycle or delete them once
// replayed. A directory that cannot be read gives none.
func walSizes(fs vfs.FS, dir string) map[string]int64 {
	names, err := fs.List(dir)
	if err != nil {
		return nil
	}
	sizes := make(map[string]int64)
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if fi, err := fs.Stat(fs.PathJoin(dir, name)); err == nil {
			sizes[name] = fi.Size()
		}
	}
	return sizes
}

// replayStop matches where a replay line (replayMarker) says Pebble
// stopped reading: "stopped reading at offset: (DIR/000004.log: 35265)",
// and how many batches it replayed.
var (
	replayStop    = regexp.MustCompile(`stopped reading at offset: \(([^()]*): (\d+)\)`)
	replayBatches = regexp.MustCompile(`replayed \d+ keys in (\d+) batches`)
)

// dropped returns how many bytes of the WAL files Pebble did not replay:
// for each replay line, the file's size before Open (logs, by name) less
// the offset where the replay stopped; and the batches it replayed. known
// is false if a line could not be matched to a file.
func dropped(replays []string, logs map[string]int64) (bytes int64, batches int, known bool) {
	known = true
	for _, line := range replays {
		if m := replayBatches.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			batches += n
		}
		m := replayStop.FindStringSubmatch(line)
		if m == nil {
			known = false
			continue
		}
		size, ok := logs[path.Base(m[1])]
		off, err := strconv.ParseInt(m[2], 10, 64)
		if !ok || err != nil {
			known = false
			continue
		}
		if size > off {
			bytes += size - off
		}
	}
	return bytes, batches, known
}

// uncleanWarning is the start of the warning Open logs when the store was
// not closed cleanly (see the package doc, "Crashes").
const uncleanWarning = "hourglass: store was not closed cleanly (a crash, or a corrupt WAL tail)"

// warnUnclean logs that the store was not closed cleanly, with what
// Pebble says of its replay (replays) and how many bytes of the WAL files
// (logs, their sizes before Open) it dropped. It cannot say whether those
// bytes held acknowledged writes: after a crash they are a commit that
// had not returned, but damage in the last block of the log, or a log
// cut short, drops acknowledged writes with no other trace (package doc,
// "Crashes"); and a cut at a record's end drops nothing Pebble can see.
func (s *Store) warnUnclean(replays []string, logs map[string]int64) {
	n, batches, known := dropped(replays, logs)
	attrs := []any{"dir", s.dir, "replayed_batches", batches, "replay", replays}
	var what string
	switch {
	case !known:
		what = "Pebble replayed its write-ahead log up to the first record it could not read and dropped the rest"
	case n == 0:
		what = "Pebble replayed every record of its write-ahead log and dropped nothing"
	default:
		what = "Pebble replayed its write-ahead log up to the first record it could not read and dropped the " +
			strconv.FormatInt(n, 10) + " bytes after it"
	}
	if known {
		attrs = append(attrs, "dropped_bytes", n)
	}
	s.log.Warn(uncleanWarning+": "+what+"; "+
		"a crash drops only commits that had not returned, but if the log was damaged or cut short, "+
		"writes acknowledged before the stop may be lost with no other trace",
		attrs...)
}
