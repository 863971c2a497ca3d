package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func newQuotaCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("quota", "Manage client quotas", `Set and describe client quotas (AlterClientQuotas, DescribeClientQuotas) by user
and/or client id: producer_byte_rate, consumer_byte_rate (bytes per second),
request_percentage, controller_mutation_rate (partitions per second); and by IP
address: connection_creation_rate (new connections per second, KIP-612). Changing
quotas needs ALTER_CONFIGS on the cluster, describing them DESCRIBE_CONFIGS.`)
	cmd.AddCommand(newQuotaSetCmd(g), newQuotaDescribeCmd(g))
	return cmd
}

// quotaEntity flags name a quota entity.
type quotaEntity struct {
	user, clientID, ip                      string
	defaultUser, defaultClientID, defaultIP bool
}

func (e *quotaEntity) add(cmd *cobra.Command) {
	// --user is the SASL user of every client command: the entity flags say entity.
	cmd.Flags().StringVar(&e.user, "entity-user", "", "the user (principal name) the quota applies to")
	cmd.Flags().StringVar(&e.clientID, "entity-client-id", "", "the client id the quota applies to")
	cmd.Flags().BoolVar(&e.defaultUser, "entity-default-user", false, "the default quota of every user without one")
	cmd.Flags().BoolVar(&e.defaultClientID, "entity-default-client-id", false, "the default quota of every client id without one")
	cmd.Flags().StringVar(&e.ip, "entity-ip", "", "the IP address (or host name) the quota applies to")
	cmd.Flags().BoolVar(&e.defaultIP, "entity-default-ip", false, "the default quota of every IP address without one")
}

func (e *quotaEntity) components() ([]kadm.ClientQuotaEntityComponent, error) {
	var out []kadm.ClientQuotaEntityComponent
	if e.user != "" && e.defaultUser || e.clientID != "" && e.defaultClientID || e.ip != "" && e.defaultIP {
		return nil, usagef("name a user or the default user (--entity-user, --entity-default-user), a client id or the default client id, an IP address or the default IP")
	}
	switch {
	case e.ip != "" || e.defaultIP:
		if e.user != "" || e.defaultUser || e.clientID != "" || e.defaultClientID {
			return nil, usagef("an IP entity (--entity-ip, --entity-default-ip) cannot be combined with a user or client id")
		}
		if e.defaultIP {
			return []kadm.ClientQuotaEntityComponent{{Type: "ip"}}, nil
		}
		return []kadm.ClientQuotaEntityComponent{{Type: "ip", Name: kadm.StringPtr(e.ip)}}, nil
	}
	switch {
	case e.user != "":
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "user", Name: kadm.StringPtr(e.user)})
	case e.defaultUser:
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "user"})
	}
	switch {
	case e.clientID != "":
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: kadm.StringPtr(e.clientID)})
	case e.defaultClientID:
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "client-id"})
	}
	return out, nil
}

func newQuotaSetCmd(g *globals) *cobra.Command {
	var e quotaEntity
	var remove []string
	cmd := &cobra.Command{
		Use:   "set [KEY=VALUE...]",
		Short: "Set (or with --delete remove) quotas of a user, a client id, both, or an IP address",
		Example: `  samsa quota set --entity-user alice producer_byte_rate=1048576 consumer_byte_rate=2097152
  samsa quota set --entity-client-id reporting consumer_byte_rate=524288
  samsa quota set --entity-default-user producer_byte_rate=10485760
  samsa quota set --entity-user alice --delete producer_byte_rate
  samsa quota set --entity-ip 192.0.2.10 connection_creation_rate=5
  samsa quota set --entity-default-ip connection_creation_rate=50`,
		RunE: func(cmd *cobra.Command, a []string) error {
			entity, err := e.components()
			if err != nil {
				return err
			}
			if len(entity) == 0 {
				return usagef("name the entity: --entity-user, --entity-client-id, --entity-default-user, --entity-default-client-id, --entity-ip or --entity-default-ip")
			}
			var ops []kadm.AlterClientQuotaOp
			for _, kv := range a {
				k, v, ok := strings.Cut(kv, "=")
				f, err := strconv.ParseFloat(v, 64)
				if !ok || err != nil {
					return usagef("%q is not KEY=NUMBER", kv)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
			}
			for _, k := range remove {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			if len(ops) == 0 {
				return usagef("give quotas as KEY=VALUE, or --delete KEY")
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
			if err == nil && len(res) == 1 {
				err = withBrokerMessage(res[0].Err, res[0].ErrMessage)
			}
			if err != nil {
				return g.explain("set quotas", err)
			}
			return g.newOutput(cmd).line(map[string]any{"entity": entityString(entity), "changed": len(ops)},
				fmt.Sprintf("%d quota(s) changed for %s\n", len(ops), entityString(entity)))
		},
	}
	e.add(cmd)
	cmd.Flags().StringArrayVar(&remove, "delete", nil, "quota key to remove (repeatable)")
	return cmd
}

func entityString(entity []kadm.ClientQuotaEntityComponent) string {
	parts := make([]string, len(entity))
	for i, c := range entity {
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		parts[i] = c.Type + "=" + name
	}
	return strings.Join(parts, ",")
}

type quotaShown struct {
	Entity string             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func newQuotaDescribeCmd(g *globals) *cobra.Command {
	var e quotaEntity
	cmd := &cobra.Command{
		Use:     "describe",
		Short:   "Show client quotas: all of them, or those of the named user and/or client id",
		Example: "  samsa quota describe\n  samsa quota describe --entity-user alice -o json",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			entity, err := e.components()
			if err != nil {
				return err
			}
			var filter []kadm.DescribeClientQuotaComponent
			for _, c := range entity {
				d := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: 0}
				if c.Name == nil {
					d.MatchType = 1
				}
				filter = append(filter, d)
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := adm.DescribeClientQuotas(ctx, false, filter)
			if err != nil {
				return g.explain("describe quotas", err)
			}
			shown := []quotaShown{}
			for _, q := range res {
				s := quotaShown{Entity: entityString(q.Entity), Values: map[string]float64{}}
				for _, v := range q.Values {
					s.Values[v.Key] = v.Value
				}
				shown = append(shown, s)
			}
			sort.Slice(shown, func(i, j int) bool { return shown[i].Entity < shown[j].Entity })
			return g.newOutput(cmd).render(shown, func(w io.Writer) {
				t := newTable(w, "ENTITY", "QUOTA", "VALUE")
				for _, s := range shown {
					keys := make([]string, 0, len(s.Values))
					for k := range s.Values {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						t.row(s.Entity, k, strconv.FormatFloat(s.Values[k], 'f', -1, 64))
					}
				}
				t.flush()
			})
		},
	}
	e.add(cmd)
	return cmd
}
