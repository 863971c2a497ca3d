package broker

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/peer"
)

// peerSecurity is how this node connects to its peers' listener of that name (the
// inter-broker listener for replication, the controller listener for the quorum):
// TLS with the listener's stores, SASL with mechanism and the username and password
// of the listener's JAAS config for it.
func peerSecurity(cfg *config.Broker, listener, mechanism string, logger *slog.Logger) (peer.Security, error) {
	ls, ok := cfg.ListenerSecurity(listener)
	if !ok {
		return peer.Security{}, nil // PLAINTEXT, or a listener this node does not know: dial plainly
	}
	var sec peer.Security
	if ls.TLS != nil {
		tlsCfg, err := auth.ClientTLS(ls.TLS, logger)
		if err != nil {
			return sec, fmt.Errorf("listener %s (connecting to other nodes): %w", listener, err)
		}
		sec.TLS = tlsCfg
	}
	if ls.SASL != nil {
		user, password, err := cfg.NodeCredentials(ls, mechanism)
		if err != nil {
			return sec, err
		}
		switch mechanism {
		case config.MechanismPlain:
			sec.SASL = plain.Auth{User: user, Pass: password}.AsMechanism()
		case config.MechanismScramSHA256:
			sec.SASL = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
		case config.MechanismScramSHA512:
			sec.SASL = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
		default:
			return sec, fmt.Errorf("listener %s: this node cannot log in to other nodes with %s: use PLAIN or SCRAM", listener, mechanism)
		}
	}
	return sec, nil
}
