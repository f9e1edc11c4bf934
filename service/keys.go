package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hourglass-go/hourglass/task"
)

// The keys of a queue (issue 42): the keys of its ready, reserved and
// delayed tasks with a count of each, busiest first (the most tasks,
// then by key), a page at a time. An engine counts them (KeyCounts:
// in memory on the embedded engine, one statement on a cluster node);
// the order and the pages are this file's, the same for both.
//
// A page's cursor is the total and key of its last entry, "N/KEY" (a key
// has no '/'): the next page starts after that place in the order, so
// that a key whose count changed between two pages is met at most twice
// and no key that kept its count is missed.

// KeysPage is one page of a queue's keys.
type KeysPage struct {
	Keys []task.KeyCount
	// Next is the cursor of the next page; "" when this is the last.
	Next string
}

// CheckKeys checks a page of up to limit keys of queue after the cursor
// after ("" for the first page): a queue name, limit 1 to task.MaxList,
// and a cursor as KeysPage.Next gives. It returns the cursor's total and
// key.
func CheckKeys(queue, after string, limit int) (int, string, error) {
	if err := CheckQueue(queue); err != nil {
		return 0, "", err
	}
	if limit < 1 || limit > task.MaxList {
		return 0, "", fmt.Errorf("%w: limit %d: want 1 to %d", task.ErrInvalid, limit, task.MaxList)
	}
	if after == "" {
		return 0, "", nil
	}
	n, key, ok := strings.Cut(after, "/")
	total, err := strconv.Atoi(n)
	if !ok || err != nil || total < 0 || key != "" && CheckKey(key) != nil {
		return 0, "", fmt.Errorf("%w: after %q: want a next of a page of keys", task.ErrInvalid, after)
	}
	return total, key, nil
}

// keysBefore orders key counts busiest first: the most tasks, then by
// key.
func keysBefore(a, b task.KeyCount) int {
	if c := cmp.Compare(b.Total(), a.Total()); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

// Keys returns a page of up to limit keys of queue after the cursor
// after, busiest first. It takes O(k log k) for the k keys of the queue
// on top of the engine's count.
func (f *front) Keys(ctx context.Context, queue, after string, limit int) (KeysPage, error) {
	total, key, err := CheckKeys(queue, after, limit)
	if err != nil {
		return KeysPage{}, err
	}
	counts, err := f.e.KeyCounts(ctx, queue)
	if err != nil {
		return KeysPage{}, err
	}
	slices.SortFunc(counts, keysBefore)
	if after != "" {
		at := task.KeyCount{Key: key, Ready: total}
		i, _ := slices.BinarySearchFunc(counts, at, keysBefore)
		for i < len(counts) && keysBefore(counts[i], at) <= 0 {
			i++
		}
		counts = counts[i:]
	}
	var p KeysPage
	if len(counts) > limit {
		counts = counts[:limit]
		last := counts[limit-1]
		p.Next = strconv.Itoa(last.Total()) + "/" + last.Key
	}
	p.Keys = counts
	return p, nil
}
