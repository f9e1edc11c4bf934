package cluster

import (
	"fmt"
	"math/rand/v2"
)

// newLeaseToken returns a fresh call token: 64 random bits as 16 hex
// digits, the start of every lease one call of a leasing statement makes
// (leaseOf). The node, not PostgreSQL, chooses it, so that it knows the
// leases a call made even when the call's answer is lost. It needs no
// cryptographic strength: a lease names a reservation, it grants no
// right a client could not have by reserving. O(1); safe for concurrent
// use.
func newLeaseToken() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}
