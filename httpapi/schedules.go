package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// setSchedule serves PUT /v1/schedules/{name}: creates or replaces the
// schedule and answers it with its next occurrence (200); a bad cron line,
// zone or queue name is 400.
func (s *Server) setSchedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.ScheduleRequest
	if err := decode(w, r, s.putBody, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	spec := task.ScheduleSpec{
		Name:     r.PathValue("name"),
		Cron:     req.Cron,
		Queue:    req.Queue,
		Timezone: req.Timezone,
		Misfire:  req.Misfire,
		Overlap:  req.Overlap,
		Priority: req.Priority,
		Paused:   req.Paused,
	}
	if req.CatchUp != nil {
		if spec.CatchUp = req.CatchUp.D(); spec.CatchUp <= 0 {
			s.fail(w, r, fmt.Errorf("%w: catch_up %s: want 1s or more", task.ErrInvalid, spec.CatchUp))
			return
		}
	}
	if req.TTR != nil {
		if spec.TTR = req.TTR.D(); spec.TTR <= 0 {
			s.fail(w, r, fmt.Errorf("%w: ttr %s: want 1ms or more", task.ErrInvalid, spec.TTR))
			return
		}
	}
	if req.MaxAttempts != nil {
		if spec.MaxAttempts = *req.MaxAttempts; spec.MaxAttempts < task.UnlimitedAttempts {
			s.fail(w, r, fmt.Errorf("%w: max_attempts %d: want 0 (the queue's) or more, or %d (no limit)",
				task.ErrInvalid, spec.MaxAttempts, task.UnlimitedAttempts))
			return
		}
	}
	if len(req.Payload) > 0 && string(req.Payload) != "null" {
		if !utf8.Valid(req.Payload) {
			s.fail(w, r, errPayloadUTF8)
			return
		}
		spec.Payload = req.Payload
	}
	info, _, err := b.SetSchedule(r.Context(), spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSchedule(info))
}

// schedules serves GET /v1/schedules: every schedule with its next
// occurrence, by name.
func (s *Server) schedules(w http.ResponseWriter, r *http.Request, b service.Service) {
	infos, err := b.Schedules(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.SchedulesResponse{Schedules: make([]api.Schedule, len(infos))}
	for i, info := range infos {
		out.Schedules[i] = toSchedule(info)
	}
	slices.SortFunc(out.Schedules, func(a, b api.Schedule) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// schedule serves GET /v1/schedules/{name}: the schedule with its next
// and last occurrences (200), or 404.
func (s *Server) schedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	info, err := b.Schedule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSchedule(info))
}

// scheduleRuns serves GET /v1/schedules/{name}/runs?limit=N&after=T: a
// page of the schedule's runs, newest first (service.ScheduleRuns), or
// 400 naming a bad limit or after, or 404.
func (s *Server) scheduleRuns(w http.ResponseWriter, r *http.Request, b service.Service) {
	q := r.URL.Query()
	limit, err := queryUint(q.Get("limit"), api.DefaultRunsLimit, "limit")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if limit < 1 || limit > api.MaxRunsLimit {
		s.fail(w, r, badRequest("limit %d: want 1 to %d", limit, api.MaxRunsLimit))
		return
	}
	var after time.Time
	if v := q.Get("after"); v != "" {
		if after, err = time.Parse(time.RFC3339Nano, v); err != nil {
			s.fail(w, r, badRequest("after %q: want a time in RFC 3339, the next of the page before", v))
			return
		}
	}
	runs, next, err := service.ScheduleRuns(r.Context(), b, r.PathValue("name"), after, int(limit), time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ScheduleRunsResponse{Runs: make([]api.ScheduleRun, len(runs))}
	if !next.IsZero() {
		out.Next = next.UTC().Format(time.RFC3339Nano)
	}
	for i, run := range runs {
		a := api.ScheduleRun{Time: utc(run.Time), TaskID: run.TaskID, Outcome: run.Outcome, Attempts: run.Attempts}
		if run.Outcome == task.SchedulePending {
			a.State = run.State.String()
		}
		if !run.Finished.IsZero() {
			f := utc(run.Finished)
			a.Finished = &f
		}
		out.Runs[i] = a
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSchedule serves DELETE /v1/schedules/{name}: 204, or 404.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	if err := b.DeleteSchedule(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// runSchedule serves POST /v1/schedules/{name}/run: 201 with the task put
// now (id NAME@run-MS), or 404.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	t, err := b.RunSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/queues/"+url.PathEscape(t.Queue)+"/tasks/"+url.PathEscape(t.ID))
	writeJSON(w, http.StatusCreated, toTask(t, false))
}

// pauseSchedule serves POST /v1/schedules/{name}/pause: 204, or 404.
func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	if err := b.PauseSchedule(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// resumeSchedule serves POST /v1/schedules/{name}/resume: 204, or 404.
// The schedule starts from now.
func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request, b service.Service) {
	if err := b.ResumeSchedule(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}
