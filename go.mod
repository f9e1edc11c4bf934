module github.com/hourglass-go/hourglass

go 1.26
