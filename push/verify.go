// Package push is the receiving side of a push queue: an HTTP endpoint
// that the hourglass server POSTs a queue's tasks to checks with [Verify]
// that a request was signed with the queue's secret, recently, under its
// own message id. The signature is Standard Webhooks'
// (standardwebhooks.com), so a receiver may check it as well with that
// scheme's libraries in any language; the scheme, and every header of a
// push, is documented in package api (api.Push).
package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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

// SecretPrefix begins a secret in Standard Webhooks' form: the key is the
// standard base64 (padded) that follows it.
const SecretPrefix = "whsec_"

// Errors of Verify, Sign and Key.
var (
	ErrNoSignature  = errors.New("hourglass: push: no webhook-id, webhook-timestamp or webhook-signature header")
	ErrBadSignature = errors.New("hourglass: push: bad signature")
	ErrExpired      = errors.New("hourglass: push: signature time more than 5 minutes from now")
	ErrBadSecret    = errors.New("hourglass: push: a whsec_ secret must be followed by a non-empty standard base64 key")
	ErrNoSecret     = errors.New("hourglass: push: no secret given")
)

// Key returns the HMAC key of secret: the bytes that the base64 after
// "whsec_" encodes, or, for a secret without that prefix, the secret's
// own bytes. It returns ErrBadSecret for "whsec_" followed by anything
// but non-empty standard base64, and ErrNoSecret for "". The libraries
// of Standard Webhooks read the whsec_ form (and the raw one as an
// option). The cost is linear in the secret's length.
func Key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, ErrNoSecret
	}
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the webhook-signature value of the message id sent at t
// with body: "v1,<base64 of HMAC-SHA256(key, id + "." + T + "." + body)>"
// for each secret's key (see [Key]), space-separated, where T is t in
// Unix seconds. Several secrets are a key being rotated: a receiver
// accepts the message if any signature matches a key it holds. It
// returns ErrNoSecret without a secret, ErrBadSecret for a malformed
// one. The cost is linear in the body's length times the secrets.
func Sign(id string, t time.Time, body []byte, secrets ...string) (string, error) {
	if len(secrets) == 0 {
		return "", ErrNoSecret
	}
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	for i, s := range secrets {
		key, err := Key(s)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac(key, id, ts, body)))
	}
	return b.String(), nil
}

// SetHeaders sets on h the headers of a message id signed at t with
// body under secrets (see [Sign]): webhook-id, webhook-timestamp and
// webhook-signature, as the server sends them and a receiver's tests can
// forge them. It sets nothing and returns Sign's error for a missing or
// malformed secret.
func SetHeaders(h http.Header, id string, t time.Time, body []byte, secrets ...string) error {
	sig, err := Sign(id, t, body, secrets...)
	if err != nil {
		return err
	}
	h.Set(api.PushIDHeader, id)
	h.Set(api.PushTimestampHeader, strconv.FormatInt(t.Unix(), 10))
	h.Set(api.PushSignatureHeader, sig)
	return nil
}

// Verify checks the Standard Webhooks signature of r, whose body (read
// by the caller, before any parsing) is body, against secrets (whsec_ or
// raw, see [Key]; several while a key is rotated) at time now. It returns
// nil if r's webhook-timestamp is within [Tolerance] of now and one of
// the space-separated "v1,<base64>" values of its webhook-signature is
// the HMAC-SHA256, under one of the secrets' keys, of its webhook-id, a
// dot, its webhook-timestamp, a dot and body; ErrNoSignature if a header
// is missing, ErrExpired for a time out of tolerance, ErrBadSignature
// otherwise (a request whose webhook-id was changed included: the id is
// signed), or ErrNoSecret or ErrBadSecret for the secrets. Signatures of
// other versions than v1 are ignored. Each comparison takes constant
// time; the cost is linear in the body's length times the secrets, plus
// the header's length. Verify is safe for concurrent use.
func Verify(r *http.Request, body []byte, now time.Time, secrets ...string) error {
	id := r.Header.Get(api.PushIDHeader)
	ts := r.Header.Get(api.PushTimestampHeader)
	header := r.Header.Get(api.PushSignatureHeader)
	if id == "" || ts == "" || header == "" {
		return ErrNoSignature
	}
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := Key(s)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(t, 0)); d > Tolerance || d < -Tolerance {
		return ErrExpired
	}
	want := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = mac(k, id, ts, body)
	}
	ok := false
	for _, vs := range strings.Fields(header) {
		v, b64, found := strings.Cut(vs, ",")
		if !found || v != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		for _, w := range want {
			ok = hmac.Equal(sig, w) || ok
		}
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}

// mac returns HMAC-SHA256(key, id + "." + ts + "." + body).
func mac(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
