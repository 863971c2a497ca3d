// Command samsa is a Kafka-compatible event streaming platform: `samsa serve` runs a
// node, every other subcommand is a client that works against Samsa or any Kafka.
package main

import (
	"os"

	"github.com/samsa-streaming/samsa/internal/bench"
	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/console"
)

func main() {
	root := cli.NewRoot()
	root.AddCommand(newServeCommand(), bench.NewCommand(), console.NewCommand())
	os.Exit(cli.Execute(root))
}
