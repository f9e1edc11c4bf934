package cluster

import "github.com/jackc/pgx/v5/pgxpool"

// ConfigurePool sets on cfg what a node wants of its pool's connections,
// where the connection string does not say otherwise: generic plans for
// its prepared statements (plan_cache_mode=force_generic_plan). A node
// runs a handful of statements thousands of times a second; PostgreSQL
// would otherwise plan most of them afresh at each execution (the custom
// plans it tries first win on estimated cost for array arguments), and
// planning was about a fifth of the server's CPU at 5k tasks/s. The
// statements are written so that their generic plans are the right ones
// (index lookups by the arrays' elements). Call it before
// pgxpool.NewWithConfig; [Open] logs a warning for a pool without it.
func ConfigurePool(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams[planCacheMode]; !ok {
		cfg.ConnConfig.RuntimeParams[planCacheMode] = "force_generic_plan"
	}
}

const planCacheMode = "plan_cache_mode"

// configured reports whether db's connections were set up by
// ConfigurePool (or say plan_cache_mode themselves).
func configured(db *pgxpool.Pool) bool {
	_, ok := db.Config().ConnConfig.RuntimeParams[planCacheMode]
	return ok
}
