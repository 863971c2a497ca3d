package testutil

import (
	"bytes"
	"math/rand/v2"
)

// Words returns about n bytes of words drawn at random (from seed) from a fixed
// vocabulary of 300 made-up words, separated by spaces and newlines: data that
// compresses, but not so regularly that every compression level finds the same
// matches.
func Words(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
		b.WriteByte(" \n"[rng.IntN(2)])
	}
	return b.Bytes()[:n]
}

var vocabulary = func() []string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := make([]string, 300)
	for i := range words {
		w := make([]byte, 3+rng.IntN(8))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(w)
	}
	return words
}()
