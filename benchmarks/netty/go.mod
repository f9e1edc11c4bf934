module github.com/hourglass-go/hourglass/benchmarks/netty

go 1.26.0

replace github.com/hourglass-go/hourglass => ../..

require github.com/hourglass-go/hourglass v0.0.0-00010101000000-000000000000

require github.com/robfig/cron/v3 v3.0.1 // indirect
