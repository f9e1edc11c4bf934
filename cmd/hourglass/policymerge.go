package main

import (
	"errors"
	"strings"

	"github.com/hourglass-go/hourglass/api"
)

// `hourglass policy QUEUE --set JSON` changes only what JSON names: JSON
// is a JSON merge patch (RFC 7396) on the queue's stored policy, sent as
// `PATCH /v1/queues/{queue}/policy` (the rules are api/merge.go's, the
// merge the server's, the push endpoint's secrets included, so a patch
// that does not name them keeps them). `--set '{"retry":null}'` drops
// the retry; --replace makes JSON the whole policy instead (a PUT).

// checkPatch refuses, before any call, a patch that is not a JSON object
// or writes an answer-only key (api.CheckPolicyPatch). Linear in the
// size of patch.
func checkPatch(patch []byte) error {
	if _, err := api.CheckPolicyPatch(patch); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "hourglass: "))
	}
	return nil
}
