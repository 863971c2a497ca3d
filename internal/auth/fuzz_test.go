package auth

import (
	"errors"
	"testing"
)

// FuzzSASLServer feeds arbitrary tokens to every server mechanism, as a client on a
// SASL listener can: each step either goes on, finishes, or fails with one of the
// two SASL errors — never a panic, and never an authenticated principal for a token
// that is not a valid exchange (the fuzzer does not know the SCRAM nonce, so only a
// PLAIN token with alice's password may succeed).
func FuzzSASLServer(f *testing.F) {
	for _, seed := range []struct {
		mech          string
		first, second string
	}{
		{"PLAIN", "\x00alice\x00secret", ""},
		{"PLAIN", "authz\x00alice\x00wrong", ""},
		{"SCRAM-SHA-256", "n,,n=alice,r=abcdef", "c=biws,r=abcdef,p=AAAA"},
		{"SCRAM-SHA-512", "n,a=bob,n=alice,r=x", "c=biws,r=x,p="},
		{"SCRAM-SHA-256", "n,,n=a=2Cb=3D,r=1", "garbage"},
		{"OAUTHBEARER", "n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.\x01\x01", ""},
		{"OAUTHBEARER", "n,,\x01\x01", "\x01"},
	} {
		f.Add(seed.mech, []byte(seed.first), []byte(seed.second))
	}
	a := scramAuthenticator(f, map[string]string{"alice": "secret"})
	f.Fuzz(func(t *testing.T, mech string, first, second []byte) {
		m, ok := a.New(mech)
		if !ok {
			return
		}
		for i, token := range [][]byte{first, second} {
			_, done, err := m.Step(token)
			if err != nil {
				if !errors.Is(err, ErrIllegalSASLState) && !errors.Is(err, ErrAuthenticationFailed) {
					t.Fatalf("%s step %d: error %v is neither SASL error", mech, i+1, err)
				}
				return
			}
			if done {
				if p := m.Principal(); mech != "PLAIN" && mech != "OAUTHBEARER" || p.Name == "" {
					t.Fatalf("%s step %d: authenticated %+v", mech, i+1, p)
				}
				return
			}
		}
	})
}
