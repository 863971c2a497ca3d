package broker

// DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51),
// version 0 (KIP-554).
//
// SCRAM credentials live in the metadata log (UserScramCredentialRecord): Describe is
// answered from this node's image (mechanisms and iteration counts, never keys);
// Alter is forwarded to the active controller, which derives the stored and server
// keys from the salted password the client sent. Describe needs DESCRIBE on the
// cluster, Alter needs ALTER (CLUSTER_AUTHORIZATION_FAILED per user otherwise).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, (*Broker).handleDescribeUserScramCredentials)
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, (*Broker).handleAlterUserScramCredentials)
	registerController(kmsg.AlterUserSCRAMCredentials, 0, 0, (*Broker).serveAlterUserScramCredentials)
}

func (b *Broker) handleDescribeUserScramCredentials(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	resp.SetVersion(req.Version)
	if !b.authorizeCluster(req, auth.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	users := b.image().ScramUsers()
	result := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		mechs, ok := users[user]
		if !ok {
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("user " + user + " has no SCRAM credential")
			return res
		}
		for _, m := range slices.Sorted(mapKeys(mechs)) {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = m, mechs[m]
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	if r.Users == nil {
		for _, u := range slices.Sorted(mapKeys(users)) {
			resp.Results = append(resp.Results, result(u))
		}
		return reply(resp)
	}
	count := map[string]int{}
	for _, u := range r.Users {
		count[u.Name]++
	}
	for _, u := range r.Users {
		if count[u.Name] > 1 {
			if count[u.Name] > 0 {
				res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = u.Name, kerr.DuplicateResource.Code
				res.ErrorMessage = kmsg.StringPtr("user " + u.Name + " is named more than once")
				resp.Results = append(resp.Results, res)
				count[u.Name] = -1
			}
			continue
		}
		if count[u.Name] == 1 {
			resp.Results = append(resp.Results, result(u.Name))
		}
	}
	return reply(resp)
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (b *Broker) handleAlterUserScramCredentials(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if b.authorizeCluster(req, auth.OpAlter) {
		return b.forward(req, 0, nil)
	}
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.SetVersion(req.Version)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return reply(resp)
}

// serveAlterUserScramCredentials is the controller side.
func (b *Broker) serveAlterUserScramCredentials(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.SetVersion(r.Version)
	var ops []controller.ScramOp
	var order []string
	seen := map[string]bool{}
	note := func(user string) {
		if !seen[user] {
			seen[user] = true
			order = append(order, user)
		}
	}
	for _, d := range r.Deletions {
		note(d.Name)
		ops = append(ops, controller.ScramOp{User: d.Name, Mechanism: auth.ScramMechanism(d.Mechanism), Delete: true})
	}
	for _, u := range r.Upsertions {
		note(u.Name)
		ops = append(ops, controller.ScramOp{User: u.Name, Mechanism: auth.ScramMechanism(u.Mechanism), Iterations: u.Iterations,
			Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	results, err := b.controller.AlterScramCredentials(ctx, ops)
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		e := err
		if e == nil {
			e = results[user]
		}
		res.ErrorCode, res.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Results = append(resp.Results, res)
	}
	return resp
}
