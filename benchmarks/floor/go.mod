module github.com/hourglass-go/hourglass/benchmarks/floor

go 1.26.0
