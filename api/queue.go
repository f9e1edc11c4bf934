package api

// QueuesResponse answers GET /v1/queues: every queue that holds tasks,
// by name.
type QueuesResponse struct {
	Queues []Queue `json:"queues"`
}

// Queue counts one queue's tasks by state.
type Queue struct {
	Name     string `json:"name"`
	Delayed  int    `json:"delayed"`
	Ready    int    `json:"ready"`
	Reserved int    `json:"reserved"`
	Dead     int    `json:"dead"`
}
