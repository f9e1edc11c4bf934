module github.com/hourglass-go/hourglass/benchmarks/gozero

go 1.26.0

replace github.com/hourglass-go/hourglass => ../..

require (
	github.com/hourglass-go/hourglass v0.0.0-00010101000000-000000000000
	github.com/zeromicro/go-zero v1.10.3
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fatih/color v1.18.0 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spaolacci/murmur3 v1.1.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/automaxprocs v1.6.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
