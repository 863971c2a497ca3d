//go:build race

package testutil

// raceEnabled: the tests run under the race detector, so the broker binary they start
// is built with it too and a data race in the broker fails the test run.
const raceEnabled = true
