// Command samsa is a Kafka-compatible event streaming platform: `samsa serve` runs a
// node, every other subcommand is a client that works against Samsa or any Kafka.
package main

import (
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "samsa", Short: "Kafka-compatible event streaming", SilenceErrors: false}
	root.AddCommand(newServeCommand())
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
