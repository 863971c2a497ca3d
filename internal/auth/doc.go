// Package auth owns who a client is and what it may do: principals (User:alice,
// and how a client certificate's subject maps to one), the server side of the SASL
// mechanisms (PLAIN against a listener's JAAS users, SCRAM-SHA-256/512 against
// credentials kept in the metadata log, OAUTHBEARER), the ACL authorizer with
// Kafka's StandardAuthorizer semantics, and client quotas.
//
// It holds no sockets: internal/server runs the SASL exchange on a connection and
// asks a Mechanism for each step; internal/broker asks the Authorizer before it
// serves a request and the Quotas how long to throttle. Credentials and ACLs come
// from the metadata image (internal/metadata), as KRaft keeps them.
//
// # Concurrency
//
// A Mechanism is one exchange on one connection, used by one goroutine. Authorizer
// and Quotas are safe for concurrent use: the authorizer reads an immutable index
// swapped atomically when the metadata image's ACLs change; Quotas keep their rate
// windows under one mutex per client entity. Everything time-dependent reads an
// injected clock.
package auth
