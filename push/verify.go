// Package push is the receiving side of a push queue: an HTTP endpoint
// that the hourglass server POSTs a queue's tasks to checks with [Verify]
// that a request was signed with the queue's secret, recently. The
// scheme, and every header of a push, is documented in package api
// (api.Push).
package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// Tolerance is how far from now a signature's time may be, either way:
// an older one is refused as a replay.
const Tolerance = api.PushTolerance * time.Second

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("hourglass: push: no Hourglass-Signature header")
	ErrBadSignature = errors.New("hourglass: push: bad signature")
	ErrExpired      = errors.New("hourglass: push: signature time more than 5 minutes from now")
)

// Verify checks the Hourglass-Signature of r, whose body (read by the
// caller, before any parsing) is body, against secret at time now: nil
// if it is "t=<T>,v1=<S>" with S the hex of HMAC-SHA256(secret,
// "<T>.<body>") and T within [Tolerance] of now; ErrNoSignature,
// ErrBadSignature or ErrExpired otherwise. Several v1 values (a secret
// being rotated) are accepted if any matches. The comparison takes
// constant time; the cost is linear in the body's length. Verify is safe
// for concurrent use.
func Verify(secret string, r *http.Request, body []byte, now time.Time) error {
	header := r.Header.Get(api.PushSignatureHeader)
	if header == "" {
		return ErrNoSignature
	}
	var ts string
	var sigs [][]byte
	for _, kv := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return ErrBadSignature
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil {
				return ErrBadSignature
			}
			sigs = append(sigs, sig)
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, sig := range sigs {
		ok = hmac.Equal(sig, want) || ok
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(t, 0)); d > Tolerance || d < -Tolerance {
		return ErrExpired
	}
	return nil
}

// Sign returns the Hourglass-Signature of body under secret at time t:
// what the server sends, and what a receiver's tests can forge. Its cost
// is linear in the body's length.
func Sign(secret string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
