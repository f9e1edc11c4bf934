package cluster

// SQLGiveBackLost is the give-back of a lost reserve (giveback.go).
const SQLGiveBackLost = sqlGiveBackLost
