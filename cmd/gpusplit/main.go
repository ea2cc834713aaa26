// Command gpusplit sees, splits and integrates the GPUs of a multi-GPU Linux or Proxmox VE host.
package main

import (
	"os"

	"github.com/gpusplit/gpusplit/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
