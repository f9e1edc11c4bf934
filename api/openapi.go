package api

import _ "embed"

// OpenAPI is the API's contract as an OpenAPI 3.1 document in YAML
// (api/openapi.yaml): every route, parameter, body and status, with the
// schemas of this package's types under their names. The server answers
// it as JSON at GET /v1/openapi.json; the tests hold the server to it
// (internal/apitest).
//
//go:embed openapi.yaml
var OpenAPI string
