module github.com/gpusplit/gpusplit

go 1.26

require github.com/spf13/cobra v1.10.2

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
