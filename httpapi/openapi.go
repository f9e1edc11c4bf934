package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v4"

	"github.com/hourglass-go/hourglass/api"
)

// openAPI serves GET /v1/openapi.json: the API's OpenAPI document
// (api.OpenAPI) as JSON, without a token and before the service is ready,
// as /healthz, so that a client or a code generator can read it from any
// server.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openAPIJSON()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	w.Write(doc)
}

// openAPIJSON converts the embedded YAML document to JSON, once for the
// process.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal([]byte(api.OpenAPI), &doc); err != nil {
		return nil, fmt.Errorf("hourglass: the OpenAPI document: %w", err)
	}
	doc, err := jsonValue(doc)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("hourglass: the OpenAPI document: %w", err)
	}
	return append(out, '\n'), nil
})

// jsonValue returns a decoded YAML value as encoding/json can write it:
// maps keyed by strings (a YAML map's keys may be numbers, as response
// codes are when unquoted).
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			j, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			v[k] = j
		}
		return v, nil
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			j, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = j
		}
		return m, nil
	case []any:
		for i, e := range v {
			j, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			v[i] = j
		}
		return v, nil
	}
	return v, nil
}
