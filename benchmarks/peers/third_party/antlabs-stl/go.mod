module github.com/antlabs/stl

go 1.13
