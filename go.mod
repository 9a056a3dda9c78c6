module github.com/batonhq/baton

go 1.26.7
