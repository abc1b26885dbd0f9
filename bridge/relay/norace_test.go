//go:build !race

package relay_test

// raceEnabled: the race detector inflates memory figures.
const raceEnabled = false
