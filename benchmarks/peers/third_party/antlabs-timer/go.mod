module github.com/antlabs/timer

go 1.19

require github.com/antlabs/stl v0.0.2
