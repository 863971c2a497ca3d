package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// The security commands: SCRAM credentials (AlterUserScramCredentials), ACLs
// (CreateAcls, DeleteAcls) and client quotas (AlterClientQuotas). Each validates
// against the image and proposes records; nothing changes until they are applied.

// ScramOp is one change of AlterUserScramCredentials: an upsertion (with the salted
// password the client computed) or, with Delete, a deletion.
type ScramOp struct {
	User           string
	Mechanism      auth.ScramMechanism
	Delete         bool
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// AlterScramCredentials applies ops, grouped by user: a user's changes succeed or
// fail together. The result maps each user to its error (nil for success), with
// Kafka's codes: UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
// DUPLICATE_RESOURCE (a user and mechanism twice), RESOURCE_NOT_FOUND (deleting
// what does not exist).
func (c *Controller) AlterScramCredentials(ctx context.Context, ops []ScramOp) (map[string]error, error) {
	return run(ctx, c, func(ctx context.Context) (map[string]error, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		img := c.Image()
		results := map[string]error{}
		recs := map[string][]metadata.Record{}
		seen := map[string]bool{}
		for _, op := range ops {
			if results[op.User] != nil {
				continue
			}
			key := op.User + "\x00" + op.Mechanism.String()
			var err error
			switch {
			case op.User == "":
				err = fmt.Errorf("%w: empty user name", kerr.UnacceptableCredential)
			case !op.Mechanism.Valid():
				err = fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, op.Mechanism)
			case seen[key]:
				err = fmt.Errorf("%w: %s of %s appears twice", kerr.DuplicateResource, op.Mechanism, op.User)
			case op.Delete:
				if _, ok := img.ScramCredential(int8(op.Mechanism), op.User); !ok {
					err = fmt.Errorf("%w: %s has no %s credential", kerr.ResourceNotFound, op.User, op.Mechanism)
				}
			case op.Iterations < auth.MinScramIterations || op.Iterations > auth.MaxScramIterations:
				err = fmt.Errorf("%w: %d iterations: must be %d to %d", kerr.UnacceptableCredential, op.Iterations, auth.MinScramIterations, auth.MaxScramIterations)
			case len(op.Salt) == 0 || len(op.SaltedPassword) == 0:
				err = fmt.Errorf("%w: empty salt or salted password", kerr.UnacceptableCredential)
			}
			seen[key] = true
			if err != nil {
				results[op.User], recs[op.User] = err, nil
				continue
			}
			results[op.User] = nil
			if op.Delete {
				recs[op.User] = append(recs[op.User], metadata.RemoveUserScramCredentialRecord{Name: op.User, Mechanism: int8(op.Mechanism)})
				continue
			}
			cred := auth.ScramCredentialFromSalted(op.Mechanism, op.Salt, op.SaltedPassword, op.Iterations)
			recs[op.User] = append(recs[op.User], scramRecord(op.User, cred))
		}
		var all []metadata.Record
		for _, user := range slices.Sorted(maps.Keys(recs)) {
			if results[user] == nil {
				all = append(all, recs[user]...)
			}
		}
		if len(all) > 0 {
			if err := c.propose(ctx, all); err != nil {
				return nil, err
			}
		}
		return results, nil
	})
}

func scramRecord(user string, cred auth.ScramCredential) metadata.UserScramCredentialRecord {
	return metadata.UserScramCredentialRecord{Name: user, Mechanism: int8(cred.Mechanism), Salt: cred.Salt,
		StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}
}

// bootstrapScram writes the credentials of Options.BootstrapScram that the image
// does not have yet (samsa serve --add-scram). It runs when this node becomes the
// active controller.
func (c *Controller) bootstrapScram(ctx context.Context) {
	img := c.Image()
	var recs []metadata.Record
	for _, b := range c.opts.BootstrapScram {
		if _, ok := img.ScramCredential(int8(b.Credential.Mechanism), b.User); !ok {
			recs = append(recs, scramRecord(b.User, b.Credential))
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := c.propose(ctx, recs); err != nil {
		c.logger.Warn("could not write the bootstrap SCRAM credentials; retrying when active again", "err", err)
		return
	}
	c.logger.Info("bootstrap SCRAM credentials written", "count", len(recs))
}

// BootstrapScram is a credential to create if it does not exist.
type BootstrapScram struct {
	User       string
	Credential auth.ScramCredential
}

// CreateACLs adds ACLs (already validated with auth.ValidateBinding); an ACL equal
// to an existing one is not added twice. It returns an error per ACL.
func (c *Controller) CreateACLs(ctx context.Context, acls []metadata.ACL) ([]error, error) {
	return run(ctx, c, func(ctx context.Context) ([]error, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		errs := make([]error, len(acls))
		existing := map[metadata.ACL]bool{}
		for _, a := range c.Image().ACLs() {
			a.ID = ""
			existing[a] = true
		}
		var recs []metadata.Record
		for i, a := range acls {
			if err := auth.ValidateBinding(a); err != nil {
				errs[i] = fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
				continue
			}
			a.ID = ""
			if existing[a] {
				continue
			}
			existing[a] = true
			a.ID = newACLID()
			recs = append(recs, metadata.AccessControlEntryRecord(a))
		}
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return nil, err
			}
		}
		return errs, nil
	})
}

// DeleteACLs removes the ACLs each filter matches and returns them per filter.
func (c *Controller) DeleteACLs(ctx context.Context, filters []auth.Filter) ([][]metadata.ACL, error) {
	return run(ctx, c, func(ctx context.Context) ([][]metadata.ACL, error) {
		if err := c.requireLeader(); err != nil {
			return nil, err
		}
		out := make([][]metadata.ACL, len(filters))
		removed := map[string]bool{}
		var recs []metadata.Record
		acls := c.Image().ACLs()
		for i, f := range filters {
			for _, a := range acls {
				if !f.Matches(a) {
					continue
				}
				out[i] = append(out[i], a)
				if !removed[a.ID] {
					removed[a.ID] = true
					recs = append(recs, metadata.RemoveAccessControlEntryRecord{ID: a.ID})
				}
			}
		}
		if len(recs) > 0 {
			if err := c.propose(ctx, recs); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

func newACLID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// QuotaChange is one entity's changes of AlterClientQuotas: Values set, Removes
// deleted.
type QuotaChange struct {
	Entity  []metadata.QuotaEntity
	Values  map[string]float64
	Removes []string
}

// quotaKeys are the quotas Samsa enforces on users and client ids, with whether
// Kafka types them as integers (QuotaConfig: the byte rates are LONGs).
var quotaKeys = map[string]bool{"producer_byte_rate": true, "consumer_byte_rate": true, "request_percentage": false, "controller_mutation_rate": false}

// ipQuotaKeys are those of IP entities (KIP-612): connection_creation_rate, an INT.
var ipQuotaKeys = map[string]bool{auth.ConnectionCreationRate: true}

// AlterClientQuotas applies the changes, each entity on its own; validateOnly only
// checks them.
func (c *Controller) AlterClientQuotas(ctx context.Context, changes []QuotaChange, validateOnly bool) ([]error, error) {
	// An IP entity may name a host: it must resolve, as in Kafka. The lookup is
	// done here, not on the controller's goroutine.
	unresolved := make([]error, len(changes))
	for i, ch := range changes {
		unresolved[i] = resolvableIPEntity(ctx, ch.Entity)
	}
	return run(ctx, c, func(ctx context.Context) ([]error, error) {
		if !validateOnly {
			if err := c.requireLeader(); err != nil {
				return nil, err
			}
		}
		errs := make([]error, len(changes))
		var recs []metadata.Record
		for i, ch := range changes {
			if errs[i] = validateQuotaChange(ch); errs[i] == nil {
				errs[i] = unresolved[i]
			}
			if errs[i] != nil {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(ch.Values)) {
				recs = append(recs, metadata.ClientQuotaRecord{Entity: ch.Entity, Key: k, Value: ch.Values[k]})
			}
			for _, k := range ch.Removes {
				recs = append(recs, metadata.ClientQuotaRecord{Entity: ch.Entity, Key: k, Remove: true})
			}
		}
		if validateOnly || len(recs) == 0 {
			return errs, nil
		}
		return errs, c.propose(ctx, recs)
	})
}

// resolvableIPEntity checks that an IP entity's name is an address or a host name
// that resolves now (Kafka's InetAddress.getByName).
func resolvableIPEntity(ctx context.Context, entity []metadata.QuotaEntity) error {
	for _, e := range entity {
		if e.Type != "ip" || e.Name == nil || *e.Name == "" {
			continue
		}
		if _, err := netip.ParseAddr(*e.Name); err == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := net.DefaultResolver.LookupHost(ctx, *e.Name)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: ip entity %q is not an IP address or a host name that resolves: %v", kerr.InvalidRequest, *e.Name, err)
		}
	}
	return nil
}

func validateQuotaChange(ch QuotaChange) error {
	types := map[string]bool{}
	for _, e := range ch.Entity {
		if e.Type != "user" && e.Type != "client-id" && e.Type != "ip" {
			return fmt.Errorf("%w: entity type %q: quotas are kept by user, client-id or ip", kerr.InvalidRequest, e.Type)
		}
		if types[e.Type] {
			return fmt.Errorf("%w: entity type %s twice", kerr.InvalidRequest, e.Type)
		}
		if e.Name != nil && *e.Name == "" {
			return fmt.Errorf("%w: empty %s name: name one, or leave the name out for the default %s", kerr.InvalidRequest, e.Type, e.Type)
		}
		types[e.Type] = true
	}
	if len(ch.Entity) == 0 {
		return fmt.Errorf("%w: empty entity", kerr.InvalidRequest)
	}
	keys := quotaKeys
	if types["ip"] {
		if len(ch.Entity) > 1 {
			return fmt.Errorf("%w: an ip entity cannot be combined with a user or client-id", kerr.InvalidRequest)
		}
		keys = ipQuotaKeys
	}
	known := slices.Sorted(maps.Keys(keys))
	for k, v := range ch.Values {
		integral, ok := keys[k]
		switch {
		case !ok:
			return fmt.Errorf("%w: quota %q does not apply to this entity (one of %v)", kerr.InvalidRequest, k, known)
		case v <= 0:
			return fmt.Errorf("%w: quota %s=%g must be positive", kerr.InvalidRequest, k, v)
		case integral && math.Abs(math.Mod(v, 1)) > 1e-6:
			return fmt.Errorf("%w: quota %s=%g must be a whole number", kerr.InvalidRequest, k, v)
		case k == auth.ConnectionCreationRate && v > math.MaxInt32:
			return fmt.Errorf("%w: quota %s=%g is larger than %d", kerr.InvalidRequest, k, v, math.MaxInt32)
		}
	}
	for _, k := range ch.Removes {
		if _, ok := keys[k]; !ok {
			return fmt.Errorf("%w: quota %q does not apply to this entity (one of %v)", kerr.InvalidRequest, k, known)
		}
	}
	return nil
}
