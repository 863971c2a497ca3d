package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/auth"
)

func newUserCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("user", "Manage users", "Manage the users that log in with SASL/SCRAM.")
	scram := newGroupingCmd("scram", "Manage SCRAM credentials", `Set, describe and delete SCRAM-SHA-256 and SCRAM-SHA-512 credentials
(AlterUserScramCredentials, DescribeUserScramCredentials). The password is salted and
hashed here; only the derived keys travel and are kept (in the cluster metadata).
Changing credentials needs ALTER on the cluster, describing them DESCRIBE.`)
	scram.AddCommand(newUserScramSetCmd(g), newUserScramDescribeCmd(g), newUserScramDeleteCmd(g))
	cmd.AddCommand(scram)
	return cmd
}

func scramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, usagef("--mechanism %q: SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

func newUserScramSetCmd(g *globals) *cobra.Command {
	var mechanism, password string
	var iterations int32
	cmd := &cobra.Command{
		Use:   "set USER",
		Short: "Create or change a user's SCRAM credential",
		Example: `  samsa user scram set alice --mechanism SCRAM-SHA-512 --scram-password alice-secret
  SAMSA_SCRAM_PASSWORD=alice-secret samsa user scram set alice`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			m, err := scramMechanism(mechanism)
			if err != nil {
				return err
			}
			if password == "" {
				password = os.Getenv("SAMSA_SCRAM_PASSWORD")
			}
			if password == "" {
				return usagef("give the password with --scram-password or SAMSA_SCRAM_PASSWORD")
			}
			if iterations < auth.MinScramIterations || iterations > auth.MaxScramIterations {
				return usagef("--iterations %d: must be %d to %d", iterations, auth.MinScramIterations, auth.MaxScramIterations)
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: a[0], Mechanism: m, Iterations: iterations, Password: password}})
			if err == nil {
				err = withBrokerMessage(res[a[0]].Err, res[a[0]].ErrMessage)
			}
			if err != nil {
				return g.explain("set the SCRAM credential of "+a[0], err)
			}
			return g.newOutput(cmd).line(map[string]any{"user": a[0], "mechanism": m.String(), "iterations": iterations},
				fmt.Sprintf("set %s credential of %s (%d iterations)\n", m, a[0], iterations))
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.Flags().StringVar(&password, "scram-password", "", "the user's new password (env SAMSA_SCRAM_PASSWORD)")
	cmd.Flags().Int32Var(&iterations, "iterations", auth.DefaultScramIterations, "PBKDF2 iterations (4096 to 16384)")
	return cmd
}

type scramUser struct {
	User        string           `json:"user"`
	Credentials []scramCredShown `json:"credentials"`
	Error       string           `json:"error,omitempty"`
}

type scramCredShown struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func newUserScramDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "describe [USER...]",
		Short:   "Show which SCRAM mechanisms users have credentials for (every user when none is named)",
		Example: "  samsa user scram describe\n  samsa user scram describe alice -o json",
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.DescribeUserSCRAMs(ctx, a...)
			if err != nil {
				return g.explain("describe SCRAM credentials", err)
			}
			users := []scramUser{}
			for _, r := range res.Sorted() {
				u := scramUser{User: r.User, Credentials: []scramCredShown{}}
				if r.Err != nil {
					if len(a) == 0 || r.Err != kerr.ResourceNotFound {
						u.Error = r.Err.Error()
					} else {
						u.Error = "no SCRAM credential"
					}
				}
				for _, c := range r.CredInfos {
					u.Credentials = append(u.Credentials, scramCredShown{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
				}
				users = append(users, u)
			}
			return g.newOutput(cmd).render(users, func(w io.Writer) {
				t := newTable(w, "USER", "MECHANISM", "ITERATIONS")
				for _, u := range users {
					if u.Error != "" {
						t.row(u.User, "-", u.Error)
					}
					for _, c := range u.Credentials {
						t.row(u.User, c.Mechanism, c.Iterations)
					}
				}
				t.flush()
			})
		},
	}
}

func newUserScramDeleteCmd(g *globals) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:     "delete USER",
		Short:   "Delete a user's SCRAM credential for one mechanism",
		Example: "  samsa user scram delete alice --mechanism SCRAM-SHA-512",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			m, err := scramMechanism(mechanism)
			if err != nil {
				return err
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: a[0], Mechanism: m}}, nil)
			if err == nil {
				err = withBrokerMessage(res[a[0]].Err, res[a[0]].ErrMessage)
			}
			if err != nil {
				return g.explain("delete the SCRAM credential of "+a[0], err)
			}
			return g.newOutput(cmd).line(map[string]any{"user": a[0], "mechanism": m.String(), "deleted": true},
				fmt.Sprintf("deleted %s credential of %s\n", m, a[0]))
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	return cmd
}
