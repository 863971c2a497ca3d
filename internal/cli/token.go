package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/samsa-streaming/samsa/internal/auth"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("token", "Manage delegation tokens", `Create, renew, expire and describe delegation tokens (KIP-48), as Kafka's
kafka-delegation-tokens.sh does. A client authenticates with a token over SCRAM:
the token id as user name, its HMAC (base64) as password, and --token here
(tokenauth=true in a JAAS config). It then acts as the token's owner. Token
requests need an authenticated connection (not PLAINTEXT, not a token) and
delegation.token.secret.key on the brokers.`)
	cmd.AddCommand(newTokenCreateCmd(g), newTokenRenewCmd(g), newTokenExpireCmd(g), newTokenDescribeCmd(g))
	return cmd
}

// tokenShown is a delegation token as the token commands print it.
type tokenShown struct {
	TokenID   string   `json:"token_id"`
	HMAC      string   `json:"hmac"`
	Owner     string   `json:"owner"`
	Requester string   `json:"requester"`
	Renewers  []string `json:"renewers"`
	Issued    string   `json:"issued"`
	Expires   string   `json:"expires"`
	Max       string   `json:"max"`
}

func showToken(t kadm.DelegationToken) tokenShown {
	s := tokenShown{TokenID: t.TokenID, HMAC: base64.StdEncoding.EncodeToString(t.HMAC), Owner: principalOf(t.Owner),
		Requester: principalOf(t.TokenRequesterPrincipal), Renewers: []string{},
		Issued: stamp(t.IssueTimestamp), Expires: stamp(t.ExpiryTimestamp), Max: stamp(t.MaxTimestamp)}
	for _, r := range t.Renewers {
		s.Renewers = append(s.Renewers, principalOf(r))
	}
	return s
}

func principalOf(p kadm.Principal) string {
	if p.Name == "" {
		return ""
	}
	return auth.Principal{Type: p.Type, Name: p.Name}.String()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// principalFlag parses a --owner or --renewer value, Type:Name (User:alice).
func principalFlag(flag, v string) (kadm.Principal, error) {
	p, err := auth.ParsePrincipal(v)
	if err != nil {
		return kadm.Principal{}, usagef("--%s %q: give a principal as User:<name>", flag, v)
	}
	return kadm.Principal{Type: p.Type, Name: p.Name}, nil
}

func newTokenCreateCmd(g *globals) *cobra.Command {
	var owner string
	var renewers []string
	var maxLifetime time.Duration
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a delegation token (owned by you, or by --owner)",
		Example: `  samsa token create --renewer User:bob
  samsa token create --owner User:alice --max-lifetime 12h -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req kadm.CreateDelegationToken
			if owner != "" {
				p, err := principalFlag("owner", owner)
				if err != nil {
					return err
				}
				req.Owner = &p
			}
			for _, r := range renewers {
				p, err := principalFlag("renewer", r)
				if err != nil {
					return err
				}
				req.Renewers = append(req.Renewers, p)
			}
			req.MaxLifetime = maxLifetime
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			tok, err := adm.CreateDelegationToken(ctx, req)
			if err != nil {
				return g.explain("create a delegation token", err)
			}
			s := showToken(tok)
			return g.newOutput(cmd).line(s, fmt.Sprintf("token %s of %s, expires %s (at the latest %s)\nHMAC %s\n",
				s.TokenID, s.Owner, s.Expires, s.Max, s.HMAC))
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "owner of the token (needs CREATE_TOKENS on that User); default: you")
	cmd.Flags().StringSliceVar(&renewers, "renewer", nil, "principal that may renew the token, User:<name> (repeatable)")
	cmd.Flags().DurationVar(&maxLifetime, "max-lifetime", 0, "most the token may live; default and upper bound: the brokers' delegation.token.max.lifetime.ms")
	return cmd
}

// hmacArg decodes the HMAC argument of renew and expire.
func hmacArg(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, usagef("HMAC %q is not base64: give the HMAC that token create printed", s)
	}
	return b, nil
}

func newTokenRenewCmd(g *globals) *cobra.Command {
	var period time.Duration
	cmd := &cobra.Command{
		Use:     "renew HMAC",
		Short:   "Renew a delegation token you own or may renew",
		Example: "  samsa token renew 'cXbKv…==' --period 12h",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return changeToken(cmd, g, "renew", a[0], func(ctx context.Context, adm *kadm.Client, hmac []byte) (time.Time, error) {
				return adm.RenewDelegationToken(ctx, hmac, period)
			})
		},
	}
	cmd.Flags().DurationVar(&period, "period", 0, "how long from now; default and upper bound: the brokers' delegation.token.expiry.time.ms")
	return cmd
}

func newTokenExpireCmd(g *globals) *cobra.Command {
	var period time.Duration
	cmd := &cobra.Command{
		Use:   "expire HMAC",
		Short: "Expire a delegation token you own or may renew: at once, or after --period",
		Example: `  samsa token expire 'cXbKv…=='
  samsa token expire 'cXbKv…==' --period 10m`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			p := period
			if p == 0 {
				p = -time.Millisecond // at once
			}
			return changeToken(cmd, g, "expire", a[0], func(ctx context.Context, adm *kadm.Client, hmac []byte) (time.Time, error) {
				return adm.ExpireDelegationToken(ctx, hmac, p)
			})
		},
	}
	cmd.Flags().DurationVar(&period, "period", 0, "expire this long from now (default: at once, removing the token)")
	return cmd
}

// changeToken runs a renew or an expire and prints the token's new expiry.
func changeToken(cmd *cobra.Command, g *globals, what, arg string, change func(context.Context, *kadm.Client, []byte) (time.Time, error)) error {
	hmac, err := hmacArg(arg)
	if err != nil {
		return err
	}
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	expiry, err := change(ctx, adm, hmac)
	if err != nil {
		return g.explain(what+" the delegation token", err)
	}
	return g.newOutput(cmd).line(map[string]string{"expires": stamp(expiry)}, fmt.Sprintf("%sed: expires %s\n", what, stamp(expiry)))
}

func newTokenDescribeCmd(g *globals) *cobra.Command {
	var owners []string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List the delegation tokens you may see (yours, those you renew, those your ACLs show)",
		Example: `  samsa token describe
  samsa token describe --owner User:alice -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ps []kadm.Principal
			for _, o := range owners {
				p, err := principalFlag("owner", o)
				if err != nil {
					return err
				}
				ps = append(ps, p)
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			toks, err := adm.DescribeDelegationTokens(ctx, ps...)
			if err != nil {
				return g.explain("describe delegation tokens", err)
			}
			shown := []tokenShown{}
			for _, t := range toks {
				shown = append(shown, showToken(t))
			}
			return g.newOutput(cmd).render(shown, func(w io.Writer) {
				t := newTable(w, "TOKEN", "OWNER", "RENEWERS", "EXPIRES", "MAX", "HMAC")
				for _, s := range shown {
					t.row(s.TokenID, s.Owner, fmt.Sprint(s.Renewers), s.Expires, s.Max, s.HMAC)
				}
				t.flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&owners, "owner", nil, "only the tokens these principals own or renew, User:<name> (repeatable)")
	return cmd
}
