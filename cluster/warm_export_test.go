package cluster

// HotStatements are the statements a pool connection is warmed for.
var HotStatements = hotStatements

// WarmedKey is the key, in a connection's CustomData, of a warm one.
const WarmedKey = warmedKey
