module github.com/hourglass-go/hourglass

go 1.26

require github.com/robfig/cron/v3 v3.0.1
