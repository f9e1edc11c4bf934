package cluster

import "strings"

// sqlDeliveryOrder is the delivery order in SQL (task.DeliveredBefore:
// priority, then due time, then job id, each ascending), the ORDER BY
// list of every statement that hands out, hands over or peeks ready
// tasks in that order, and of the window that ranks them. Its columns
// are unqualified: each statement uses it where the innermost FROM has
// one relation with these columns, so that they name that relation's,
// and the partial index on (queue, priority, due, job_id) of the ready
// tasks serves it. sortRows orders rows in Go by the same rule.
const sqlDeliveryOrder = `priority, due, job_id`

// deliveryOrderOf is sqlDeliveryOrder with each column qualified by the
// relation alias, for the statements that order a relation among several
// (a key's walk, the flush's rounds) or a key's tasks after their key.
func deliveryOrderOf(alias string) string {
	cols := strings.Split(sqlDeliveryOrder, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}
