//go:build race

package integration

// raceEnabled: the broker under test is built with the race detector, whose shadow
// memory multiplies the resident memory of what the broker touches.
const raceEnabled = true
