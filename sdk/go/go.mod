module cumulo.dev/sdk/go

go 1.21
