package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// A policy is changed one field at a time by a JSON merge patch (RFC
// 7396): `PATCH /v1/queues/{queue}/policy`, and the CLI's `policy --set`.
// An object merges into the object it names, key by key; a null removes
// the key; any other value replaces it. So on a stored policy of
//
//	{"push":{"url":"http://app/hook"},"retry":{"initial":"1s","max":"1m0s","multiplier":2,"jitter":0},"max_attempts":3}
//
// the patch {"max_attempts":5,"retry":{"max":"1h"}} keeps the push
// endpoint and the retry's other fields, and {"retry":null} drops the
// retry. The rules that are the policy's, not RFC 7396's, are here once:
// the keys a patch may not write (PolicyAnswerOnly) and the rate's burst
// (RefillBurst).

// PolicyAnswerOnly lists the keys of a policy's answer that are not part
// of the stored policy, by the object holding them ("" the policy,
// "push" its endpoint): "effective", the values in force with the
// server's defaults filled in, and "secret_set" and "next_secret_set",
// whether the endpoint has a secret and a next one. A patch that writes
// one is refused (CheckPolicyPatch).
var PolicyAnswerOnly = map[string][]string{
	"":     {"effective"},
	"push": {"secret_set", "next_secret_set"},
}

// CheckPolicyPatch returns an error, prefixed "hourglass: ", if patch is
// not a JSON object or writes a key of PolicyAnswerOnly. It returns the
// patch decoded, numbers as json.Number. Linear in len(patch).
func CheckPolicyPatch(patch []byte) (map[string]any, error) {
	var p map[string]any
	if err := DecodeNumbers(patch, &p); err != nil || p == nil {
		return nil, errors.New("hourglass: policy: a merge patch is a JSON object")
	}
	for obj, keys := range PolicyAnswerOnly {
		m := p
		if obj != "" {
			m, _ = p[obj].(map[string]any)
		}
		for _, k := range keys {
			if _, ok := m[k]; ok {
				name := k
				if obj != "" {
					name = obj + "." + k
				}
				return nil, fmt.Errorf("hourglass: policy: %s is answered by the server, not written", name)
			}
		}
	}
	return p, nil
}

// RefillBurst drops the stored rate's burst when the patch gives the
// rate a limit and no burst, and the stored burst is the one the server
// fills in for none (equal to the stored limit): the server then fills
// it in again from the new limit, as it did from the old. A burst set
// apart from the limit stays. The same holds for per_key's rate. stored
// is changed in place.
func RefillBurst(stored map[string]any, patch map[string]any) {
	refill := func(stored, patch map[string]any) {
		pr, _ := patch["rate"].(map[string]any)
		sr, _ := stored["rate"].(map[string]any)
		_, limit := pr["limit"]
		_, burst := pr["burst"]
		if limit && !burst && sr != nil && fmt.Sprint(sr["burst"]) == fmt.Sprint(sr["limit"]) {
			delete(sr, "burst")
		}
	}
	refill(stored, patch)
	pk, _ := patch["per_key"].(map[string]any)
	sk, _ := stored["per_key"].(map[string]any)
	refill(sk, pk)
}

// MergePatch returns target with patch applied as RFC 7396 section 2
// says: a patch that is not an object replaces target; an object's keys
// merge one by one, null removing a key. target's maps may be changed.
// Linear in the size of patch.
func MergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = MergePatch(t[k], v)
		}
	}
	return t
}

// DecodeNumbers decodes the JSON b into v keeping numbers as
// json.Number, so that a merge writes them back exactly as given.
func DecodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
