package metadata

import (
	"maps"
	"slices"
)

// Delegation tokens (KIP-48), as KRaft keeps them: the token's information lives in
// the metadata log, its HMAC does not — every node derives it from the token id and
// delegation.token.secret.key.

// DelegationTokenRecord creates a delegation token or sets its expiry (a renewal, or
// an expire that shortens it). Owner, Requester and Renewers are principals
// ("User:alice"); the timestamps are Unix milliseconds.
type DelegationTokenRecord struct {
	TokenID   string   `json:"token_id"`
	Owner     string   `json:"owner"`
	Requester string   `json:"requester"`
	Renewers  []string `json:"renewers"`
	IssueMs   int64    `json:"issue_ms"`
	MaxMs     int64    `json:"max_ms"`
	ExpiryMs  int64    `json:"expiry_ms"`
}

// RemoveDelegationTokenRecord deletes a delegation token (expired, or expired at
// once by its owner or a renewer).
type RemoveDelegationTokenRecord struct {
	TokenID string `json:"token_id"`
}

func (DelegationTokenRecord) recordType() string       { return "delegation_token" }
func (RemoveDelegationTokenRecord) recordType() string { return "remove_delegation_token" }

func init() {
	decoders["delegation_token"] = decodeAs[DelegationTokenRecord]
	decoders["remove_delegation_token"] = decodeAs[RemoveDelegationTokenRecord]
}

// DelegationToken is a delegation token's information. Shared between images: read
// only.
type DelegationToken DelegationTokenRecord

// Expired reports whether the token has expired at nowMs (Unix milliseconds).
func (t DelegationToken) Expired(nowMs int64) bool { return t.ExpiryMs < nowMs || t.MaxMs < nowMs }

// OwnerOrRenewer reports whether principal owns the token or may renew it.
func (t DelegationToken) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

// DelegationToken returns the token with id.
func (img *Image) DelegationToken(id string) (DelegationToken, bool) {
	t, ok := img.sec.tokens[id]
	return t, ok
}

// DelegationTokens returns every delegation token, sorted by id.
func (img *Image) DelegationTokens() []DelegationToken {
	out := make([]DelegationToken, 0, len(img.sec.tokens))
	for _, id := range slices.Sorted(maps.Keys(img.sec.tokens)) {
		out = append(out, img.sec.tokens[id])
	}
	return out
}

func (b *builder) applyToken(r Record) (bool, error) {
	switch r := r.(type) {
	case DelegationTokenRecord:
		if r.TokenID == "" || r.Owner == "" {
			return true, invalid("delegation token record without a token id or an owner")
		}
		tokens := maps.Clone(b.next.sec.tokens)
		if tokens == nil {
			tokens = map[string]DelegationToken{}
		}
		r.Renewers = slices.Clone(r.Renewers)
		tokens[r.TokenID] = DelegationToken(r)
		b.next.sec.tokens = tokens
	case RemoveDelegationTokenRecord:
		if _, ok := b.next.sec.tokens[r.TokenID]; !ok {
			return true, invalid("remove unknown delegation token %s", r.TokenID)
		}
		tokens := maps.Clone(b.next.sec.tokens)
		delete(tokens, r.TokenID)
		b.next.sec.tokens = tokens
	default:
		return false, nil
	}
	return true, nil
}

// tokenRecords are the records that rebuild the delegation tokens of an image.
func (img *Image) tokenRecords() []Record {
	var recs []Record
	for _, t := range img.DelegationTokens() {
		t.Renewers = slices.Clone(t.Renewers)
		recs = append(recs, DelegationTokenRecord(t))
	}
	return recs
}
