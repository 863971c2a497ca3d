package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// SCRAM iteration bounds, Kafka's (KIP-554): at least 4096, at most 16384.
const (
	MinScramIterations     = 4096
	MaxScramIterations     = 16384
	DefaultScramIterations = 4096
)

// ScramMechanism is a SCRAM mechanism with Kafka's numbering (ScramMechanism in the
// AlterUserScramCredentials and DescribeUserScramCredentials messages).
type ScramMechanism int8

const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// ScramMechanismNamed returns the mechanism of a SASL name (SCRAM-SHA-256…).
func ScramMechanismNamed(name string) (ScramMechanism, bool) {
	switch strings.ToUpper(name) {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

// String is the SASL name.
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return "SCRAM-UNKNOWN-" + strconv.Itoa(int(m))
}

// Valid reports whether m is a known mechanism.
func (m ScramMechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

func (m ScramMechanism) hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// ScramCredential is what the server keeps of a SCRAM password (RFC 5802): the salt,
// the iteration count and the two keys derived from the salted password. The
// password itself is never stored.
type ScramCredential struct {
	Mechanism  ScramMechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewScramCredential derives a credential from a password, with a random 32-byte
// salt when salt is nil.
func NewScramCredential(m ScramMechanism, password string, salt []byte, iterations int32) (ScramCredential, error) {
	if salt == nil {
		salt = make([]byte, 32)
		_, _ = rand.Read(salt)
	}
	salted, err := pbkdf2.Key(m.hash(), password, salt, int(iterations), m.hash()().Size())
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramCredentialFromSalted(m, salt, salted, iterations), nil
}

// ScramCredentialFromSalted derives a credential from a salted password (what
// AlterUserScramCredentials carries: the client does the expensive part).
func ScramCredentialFromSalted(m ScramMechanism, salt, saltedPassword []byte, iterations int32) ScramCredential {
	clientKey := hmacOf(m, saltedPassword, []byte("Client Key"))
	h := m.hash()()
	h.Write(clientKey)
	return ScramCredential{
		Mechanism:  m,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  h.Sum(nil),
		ServerKey:  hmacOf(m, saltedPassword, []byte("Server Key")),
		Iterations: iterations,
	}
}

func hmacOf(m ScramMechanism, key, msg []byte) []byte {
	mac := hmac.New(m.hash(), key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// ScramLookup finds a user's credential for a mechanism.
type ScramLookup func(m ScramMechanism, user string) (ScramCredential, bool)

// scramServer is the server side of one SCRAM exchange (RFC 5802, RFC 7677):
//
//	client-first  n,,n=<user>,r=<client nonce>
//	server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
//	client-final  c=biws,r=<nonce>,p=<proof>
//	server-final  v=<server signature>
//
// An unknown user gets a server-first message like any other — a salt derived from
// the name and a secret of this process, the default iteration count — and fails at
// the final step with the same message as a wrong password, so that the exchange
// does not tell the two apart.
type scramServer struct {
	mech   ScramMechanism
	lookup ScramLookup
	tokens TokenLookup // nil: delegation tokens are disabled
	step   int
	token  *DelegationToken // the token the client authenticates with

	user            string
	cred            ScramCredential
	known           bool
	nonce           string
	clientFirstBare string
	serverFirst     string
}

// unknownUserSecret salts the fake credentials of unknown users.
var unknownUserSecret = func() []byte { b := make([]byte, 32); _, _ = rand.Read(b); return b }()

func (s *scramServer) Name() string { return s.mech.String() }

func (s *scramServer) Step(token []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		return s.first(string(token))
	case 2:
		return s.final(string(token))
	}
	return nil, false, illegal("SCRAM exchange already finished")
}

func (s *scramServer) first(msg string) ([]byte, bool, error) {
	gs2, bare, ok := cutN(msg, ',', 2)
	if !ok || !(strings.HasPrefix(gs2, "n,") || strings.HasPrefix(gs2, "y,")) {
		return nil, false, illegal("SCRAM client-first message without a GS2 header")
	}
	if part := gs2[2 : len(gs2)-1]; part != "" && !strings.HasPrefix(part, "a=") {
		return nil, false, illegal("SCRAM client-first message with a malformed authorization id")
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return nil, false, illegal("SCRAM client-first message is not n=<user>,r=<nonce>")
	}
	viaToken := false
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "tokenauth=") {
			viaToken = ext != "tokenauth=false"
		}
	}
	user, err := decodeSaslName(attrs[0][2:])
	if err != nil {
		return nil, false, err
	}
	if authzid := strings.TrimPrefix(gs2[2:len(gs2)-1], "a="); authzid != "" {
		if name, err := decodeSaslName(authzid); err != nil || name != user {
			return nil, false, failed("the authorization id must be the user name")
		}
	}
	s.user, s.clientFirstBare = user, bare
	if viaToken {
		if err := s.tokenCredential(user); err != nil {
			return nil, false, err
		}
	} else {
		s.cred, s.known = s.lookup(s.mech, user)
	}
	if !s.known {
		salt := hmacOf(s.mech, unknownUserSecret, []byte(user))
		s.cred = ScramCredential{Mechanism: s.mech, Salt: salt, Iterations: DefaultScramIterations}
	}
	serverNonce := make([]byte, 24)
	_, _ = rand.Read(serverNonce)
	s.nonce = attrs[1][2:] + base64.RawStdEncoding.EncodeToString(serverNonce)
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.cred.Salt), s.cred.Iterations)
	return []byte(s.serverFirst), false, nil
}

func (s *scramServer) final(msg string) ([]byte, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, illegal("SCRAM client-final message without a proof")
	}
	withoutProof, proofText := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, illegal("SCRAM client-final message is not c=<binding>,r=<nonce>,p=<proof>")
	}
	// Kafka accepts a final nonce that ends with the server's (librdkafka sends its
	// own nonce in front of the combined one), and so does Samsa.
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return nil, false, failed("the nonce does not match the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil {
		return nil, false, illegal("SCRAM proof is not base64")
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	if !s.known || len(proof) != len(s.cred.StoredKey) {
		return nil, false, errBadCredentials
	}
	signature := hmacOf(s.mech, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	h := s.mech.hash()()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, errBadCredentials
	}
	serverSignature := hmacOf(s.mech, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), true, nil
}

// Principal is the user, or the owner of the delegation token the client
// authenticated with.
func (s *scramServer) Principal() Principal {
	if s.token != nil {
		return s.token.Owner
	}
	return User(s.user)
}

// Expiry is the delegation token's expiry, zero for a user's password.
func (s *scramServer) Expiry() time.Time {
	if s.token != nil {
		return s.token.Expiry
	}
	return time.Time{}
}

// ViaToken reports whether the client authenticated with a delegation token.
func (s *scramServer) ViaToken() bool { return s.token != nil }

// tokenCredential looks up the delegation token id (the SCRAM user name of a client
// that sent the tokenauth=true extension) and derives its credential: the password
// is the token's HMAC in base64, as Kafka's DelegationTokenManager sets it, salted
// with a value of this process.
func (s *scramServer) tokenCredential(id string) error {
	if s.tokens == nil {
		return failed("delegation tokens are not enabled: set delegation.token.secret.key on every node")
	}
	tok, ok := s.tokens(id)
	switch {
	case !ok:
		return failed("invalid delegation token id")
	case time.Now().After(tok.Expiry):
		return failed("the delegation token expired at " + tok.Expiry.UTC().Format(time.RFC3339) + "; renew it before it expires, or create another")
	}
	cred, err := tokenCredentials.get(s.mech, id, tok.HMAC)
	if err != nil {
		return err
	}
	s.cred, s.known, s.token = cred, true, &tok
	return nil
}

// tokenCredentials keeps the SCRAM credentials derived from delegation tokens' HMACs:
// the derivation (PBKDF2, 4096 rounds) costs milliseconds, and a token's clients
// reconnect with the same one. Kafka derives them once per token as well. The key
// holds the HMAC, so a token whose secret changed gets a new credential.
var tokenCredentials = &credentialCache{m: map[string]ScramCredential{}}

type credentialCache struct {
	mu sync.Mutex
	m  map[string]ScramCredential
}

// maxCachedTokenCredentials bounds the cache; at the bound it starts again empty.
const maxCachedTokenCredentials = 10_000

func (c *credentialCache) get(m ScramMechanism, id string, hmac []byte) (ScramCredential, error) {
	key := m.String() + "\x00" + id + "\x00" + string(hmac)
	c.mu.Lock()
	cred, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return cred, nil
	}
	salt := hmacOf(m, unknownUserSecret, []byte("token:"+id))
	cred, err := NewScramCredential(m, base64.StdEncoding.EncodeToString(hmac), salt, DefaultScramIterations)
	if err != nil {
		return ScramCredential{}, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedTokenCredentials {
		c.m = map[string]ScramCredential{}
	}
	c.m[key] = cred
	c.mu.Unlock()
	return cred, nil
}

// DelegationToken is what SCRAM needs of a delegation token (KIP-48).
type DelegationToken struct {
	Owner  Principal
	HMAC   []byte
	Expiry time.Time
}

// TokenLookup finds a delegation token by id.
type TokenLookup func(id string) (DelegationToken, bool)

// TokenWithHMAC finds the delegation token of img whose HMAC under secret is mac.
func TokenWithHMAC(img *metadata.Image, secret string, mac []byte) (metadata.DelegationToken, bool) {
	for _, tok := range img.DelegationTokens() {
		if hmac.Equal(TokenHMAC(secret, tok.TokenID), mac) {
			return tok, true
		}
	}
	return metadata.DelegationToken{}, false
}

// TokenHMAC is a delegation token's HMAC: HMAC-SHA512 of its id keyed with
// delegation.token.secret.key, as Kafka derives it. Clients authenticate with it
// (base64) as the SCRAM password of the token id.
func TokenHMAC(secret, tokenID string) []byte {
	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write([]byte(tokenID))
	return mac.Sum(nil)
}

// cutN splits s after its n-th sep: the prefix keeps that sep.
func cutN(s string, sep byte, n int) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			if n--; n == 0 {
				return s[:i+1], s[i+1:], true
			}
		}
	}
	return s, "", false
}

// decodeSaslName undoes RFC 5802's escaping of ',' (=2C) and '=' (=3D).
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			sb.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			sb.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			sb.WriteByte('=')
		default:
			return "", illegal("SCRAM user name with a bad escape")
		}
		i += 2
	}
	return sb.String(), nil
}

// ParseAddScram parses a credential in the syntax of Kafka's
// `kafka-storage format --add-scram`:
//
//	SCRAM-SHA-256=[name=alice,password=alice-secret]
//	SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]
//
// and derives the credential (a random salt unless salt=<base64> is given).
func ParseAddScram(s string) (string, ScramCredential, error) {
	mechName, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	mech, known := ScramMechanismNamed(mechName)
	if !ok || !known {
		return "", ScramCredential{}, fmt.Errorf("%q: expected SCRAM-SHA-256=[name=<user>,password=<password>] or SCRAM-SHA-512=[...]", s)
	}
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return "", ScramCredential{}, fmt.Errorf("%q: the settings go in [ ]", s)
	}
	var user, password string
	var salt []byte
	iterations := int32(DefaultScramIterations)
	for kv := range strings.SplitSeq(rest[1:len(rest)-1], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "name":
			user = v
		case "password":
			password = v
		case "iterations":
			n, err := strconv.Atoi(v)
			if err != nil || n < MinScramIterations || n > MaxScramIterations {
				return "", ScramCredential{}, fmt.Errorf("%q: iterations must be %d to %d", s, MinScramIterations, MaxScramIterations)
			}
			iterations = int32(n)
		case "salt":
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(b) == 0 {
				return "", ScramCredential{}, fmt.Errorf("%q: salt must be base64", s)
			}
			salt = b
		default:
			return "", ScramCredential{}, fmt.Errorf("%q: unknown setting %q (name, password, iterations, salt)", s, k)
		}
	}
	if user == "" || password == "" {
		return "", ScramCredential{}, fmt.Errorf("%q: name and password are required", s)
	}
	cred, err := NewScramCredential(mech, password, salt, iterations)
	return user, cred, err
}
