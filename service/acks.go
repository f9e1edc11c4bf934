package service

import (
	"fmt"

	"github.com/hourglass-go/hourglass/task"
)

// CheckAcks returns an error wrapping task.ErrInvalid unless acks holds
// 1 to task.MaxAcks acks: what Service.AckMany takes. Each ack is
// checked as Ack checks it, and answered alone.
func CheckAcks(acks []task.Ack) error {
	if len(acks) == 0 || len(acks) > task.MaxAcks {
		return fmt.Errorf("%w: 1 to %d acks in a batch", task.ErrInvalid, task.MaxAcks)
	}
	return nil
}
