package service

import (
	"context"
	"errors"

	"github.com/hourglass-go/hourglass/task"
)

// LastFinished is Engine.FinishedTasks of one id's newest record.
func (f *front) LastFinished(ctx context.Context, queue, id string) (task.Finished, error) {
	if err := checkTask(queue, id); err != nil {
		return task.Finished{}, err
	}
	fs, _, err := f.e.FinishedTasks(ctx, queue, FinishedFilter{ID: id}, 0, 1)
	if err != nil {
		return task.Finished{}, err
	}
	if len(fs) == 0 {
		return task.Finished{}, task.ErrNotFound
	}
	return fs[0], nil
}

// GetOrFinished returns the task id of queue: live (t), or, when no task
// of that id is live, the newest record of one that left the queue while
// the history keeps it (f, with t zero); task.ErrNotFound when neither.
// It is what GET of a task answers over HTTP (issue 44: a finished task
// answers its outcome rather than 404 within the history's retention).
// beanstalkd's protocol keeps Get alone: a job gone is NOT_FOUND there.
// It costs a Get, and a lookup of the history only for a task not live.
func GetOrFinished(ctx context.Context, s Service, queue, id string) (t task.Task, f *task.Finished, err error) {
	t, err = s.Get(queue, id)
	if !errors.Is(err, task.ErrNotFound) {
		return t, nil, err
	}
	fin, ferr := s.LastFinished(ctx, queue, id)
	if ferr != nil {
		if errors.Is(ferr, task.ErrNotFound) {
			return task.Task{}, nil, err // the live lookup's error
		}
		return task.Task{}, nil, ferr
	}
	return task.Task{}, &fin, nil
}
