module {{name}}

go 1.21

require cumulo.dev/sdk/go v0.0.0

replace cumulo.dev/sdk/go => {{sdk}}/go
