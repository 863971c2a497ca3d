package metadata

import (
	"maps"
	"slices"
	"strings"
)

// Security metadata, as KRaft keeps it: SCRAM credentials (KIP-554), ACLs
// (KIP-801) and client quotas live in the metadata log like everything else, so a
// restart or a new controller replays them.

// UserScramCredentialRecord sets a user's credential for one SCRAM mechanism
// (Kafka's numbering: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512). The password is never
// stored: only the salt, the iterations and the keys derived from them.
type UserScramCredentialRecord struct {
	Name       string `json:"name"`
	Mechanism  int8   `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// RemoveUserScramCredentialRecord deletes a user's credential for one mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string `json:"name"`
	Mechanism int8   `json:"mechanism"`
}

// AccessControlEntryRecord adds an ACL (Kafka's numbering for the resource type,
// pattern type, operation and permission type). ID is a random UUID in hex.
type AccessControlEntryRecord struct {
	ID             string `json:"id"`
	ResourceType   int8   `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    int8   `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      int8   `json:"operation"`
	PermissionType int8   `json:"permission_type"`
}

// RemoveAccessControlEntryRecord deletes an ACL.
type RemoveAccessControlEntryRecord struct {
	ID string `json:"id"`
}

// QuotaEntity is one part of a client-quota entity: Type "user", "client-id" or
// "ip"; Name nil for the default entity of that type.
type QuotaEntity struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// ClientQuotaRecord sets (or, with Remove, deletes) one quota of an entity.
type ClientQuotaRecord struct {
	Entity []QuotaEntity `json:"entity"`
	Key    string        `json:"key"`
	Value  float64       `json:"value"`
	Remove bool          `json:"remove,omitempty"`
}

func (UserScramCredentialRecord) recordType() string       { return "user_scram_credential" }
func (RemoveUserScramCredentialRecord) recordType() string { return "remove_user_scram_credential" }
func (AccessControlEntryRecord) recordType() string        { return "access_control_entry" }
func (RemoveAccessControlEntryRecord) recordType() string  { return "remove_access_control_entry" }
func (ClientQuotaRecord) recordType() string               { return "client_quota" }

func init() {
	decoders["user_scram_credential"] = decodeAs[UserScramCredentialRecord]
	decoders["remove_user_scram_credential"] = decodeAs[RemoveUserScramCredentialRecord]
	decoders["access_control_entry"] = decodeAs[AccessControlEntryRecord]
	decoders["remove_access_control_entry"] = decodeAs[RemoveAccessControlEntryRecord]
	decoders["client_quota"] = decodeAs[ClientQuotaRecord]
}

// ScramCredential is a stored SCRAM credential.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// ACL is one access control entry. Shared between images: read only.
type ACL struct {
	ID             string
	ResourceType   int8
	ResourceName   string
	PatternType    int8
	Principal      string
	Host           string
	Operation      int8
	PermissionType int8
}

// security is the part of an Image holding credentials, ACLs and quotas. Each map
// is replaced, never modified, once an image holds it.
type security struct {
	scram  map[int8]map[string]ScramCredential // mechanism → user → credential
	acls   map[string]ACL                      // by id
	quotas map[string]Quota                    // by QuotaKey
	tokens map[string]DelegationToken          // delegation tokens by id

	// aclVersion and quotaVersion are 1 + the offset of the last entry that changed
	// the ACLs, the quotas, or of the snapshot the image was replayed from (0: the
	// empty image). They only grow along the log, also across a snapshot, which a
	// count of records would not: a snapshot holds fewer records than the log it
	// replaces, and a count could repeat the version of an image with other ACLs.
	aclVersion, quotaVersion uint64
}

// Quota is the quotas of one client-quota entity.
type Quota struct {
	Entity []QuotaEntity
	Values map[string]float64
}

// ScramCredential returns the credential of user for mechanism.
func (img *Image) ScramCredential(mechanism int8, user string) (ScramCredential, bool) {
	c, ok := img.sec.scram[mechanism][user]
	return c, ok
}

// ScramUsers returns, for every user with a credential, the mechanisms and
// iteration counts, sorted by user.
func (img *Image) ScramUsers() map[string]map[int8]int32 {
	out := map[string]map[int8]int32{}
	for mech, users := range img.sec.scram {
		for u, c := range users {
			if out[u] == nil {
				out[u] = map[int8]int32{}
			}
			out[u][mech] = c.Iterations
		}
	}
	return out
}

// ACLs returns every ACL, sorted by id.
func (img *Image) ACLs() []ACL {
	return slices.SortedFunc(maps.Values(img.sec.acls), func(a, b ACL) int { return strings.Compare(a.ID, b.ID) })
}

// ACL returns the ACL with id.
func (img *Image) ACL(id string) (ACL, bool) {
	a, ok := img.sec.acls[id]
	return a, ok
}

// ACLCount is the number of ACLs.
func (img *Image) ACLCount() int { return len(img.sec.acls) }

// ACLsVersion changes whenever the ACLs change, also from an image to one loaded
// from a later snapshot of the log.
func (img *Image) ACLsVersion() uint64 { return img.sec.aclVersion }

// QuotasVersion changes whenever the client quotas change, as ACLsVersion.
func (img *Image) QuotasVersion() uint64 { return img.sec.quotaVersion }

// Quotas returns the client quotas by entity key (QuotaKey). Shared: read only.
func (img *Image) Quotas() map[string]Quota { return img.sec.quotas }

// QuotaKey is the canonical key of an entity: its parts sorted by type, as
// "type=name" (name "<default>" for nil) joined by "/".
func QuotaKey(entity []QuotaEntity) string {
	parts := make([]string, len(entity))
	for i, e := range entity {
		name := "<default>"
		if e.Name != nil {
			name = "'" + *e.Name + "'"
		}
		parts[i] = e.Type + "=" + name
	}
	slices.Sort(parts)
	return strings.Join(parts, "/")
}

func (b *builder) applySecurity(r Record) (bool, error) {
	switch r := r.(type) {
	case UserScramCredentialRecord:
		if r.Name == "" || r.Mechanism < 1 || r.Mechanism > 2 || r.Iterations <= 0 {
			return true, invalid("SCRAM credential record for %q, mechanism %d, %d iterations", r.Name, r.Mechanism, r.Iterations)
		}
		scram := maps.Clone(b.next.sec.scram)
		if scram == nil {
			scram = map[int8]map[string]ScramCredential{}
		}
		users := maps.Clone(scram[r.Mechanism])
		if users == nil {
			users = map[string]ScramCredential{}
		}
		users[r.Name] = ScramCredential{Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}
		scram[r.Mechanism] = users
		b.next.sec.scram = scram
	case RemoveUserScramCredentialRecord:
		if _, ok := b.next.sec.scram[r.Mechanism][r.Name]; !ok {
			return true, invalid("remove unknown SCRAM credential of %q, mechanism %d", r.Name, r.Mechanism)
		}
		scram := maps.Clone(b.next.sec.scram)
		users := maps.Clone(scram[r.Mechanism])
		delete(users, r.Name)
		scram[r.Mechanism] = users
		b.next.sec.scram = scram
	case AccessControlEntryRecord:
		if r.ID == "" {
			return true, invalid("ACL record without an id")
		}
		if _, ok := b.next.sec.acls[r.ID]; ok {
			return true, invalid("ACL %s exists", r.ID)
		}
		acls := maps.Clone(b.next.sec.acls)
		if acls == nil {
			acls = map[string]ACL{}
		}
		acls[r.ID] = ACL(r)
		b.next.sec.acls = acls
		b.next.sec.aclVersion = uint64(b.next.offset) + 1
	case RemoveAccessControlEntryRecord:
		if _, ok := b.next.sec.acls[r.ID]; !ok {
			return true, invalid("remove unknown ACL %s", r.ID)
		}
		acls := maps.Clone(b.next.sec.acls)
		delete(acls, r.ID)
		b.next.sec.acls = acls
		b.next.sec.aclVersion = uint64(b.next.offset) + 1
	case ClientQuotaRecord:
		if len(r.Entity) == 0 || r.Key == "" {
			return true, invalid("client quota record without an entity or a key")
		}
		key := QuotaKey(r.Entity)
		quotas := maps.Clone(b.next.sec.quotas)
		if quotas == nil {
			quotas = map[string]Quota{}
		}
		q := quotas[key]
		values := maps.Clone(q.Values)
		if values == nil {
			values = map[string]float64{}
		}
		if r.Remove {
			delete(values, r.Key)
		} else {
			values[r.Key] = r.Value
		}
		if len(values) == 0 {
			delete(quotas, key)
		} else {
			quotas[key] = Quota{Entity: slices.Clone(r.Entity), Values: values}
		}
		b.next.sec.quotas = quotas
		b.next.sec.quotaVersion = uint64(b.next.offset) + 1
	default:
		return false, nil
	}
	return true, nil
}

// securityRecords are the records that rebuild the security part of an image.
func (img *Image) securityRecords() []Record {
	var recs []Record
	for _, mech := range slices.Sorted(maps.Keys(img.sec.scram)) {
		users := img.sec.scram[mech]
		for _, u := range slices.Sorted(maps.Keys(users)) {
			c := users[u]
			recs = append(recs, UserScramCredentialRecord{Name: u, Mechanism: mech, Salt: c.Salt,
				StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
		}
	}
	for _, a := range img.ACLs() {
		recs = append(recs, AccessControlEntryRecord(a))
	}
	for _, key := range slices.Sorted(maps.Keys(img.sec.quotas)) {
		q := img.sec.quotas[key]
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			recs = append(recs, ClientQuotaRecord{Entity: slices.Clone(q.Entity), Key: k, Value: q.Values[k]})
		}
	}
	return recs
}
