package bench

import (
	"os"
	"testing"
)

// TestMain lets this test binary stand in for `samsa` when the bench starts itself
// as a child process (startNullProcess): it then runs `bench <args>` and exits.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "bench" {
		cmd := NewCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
