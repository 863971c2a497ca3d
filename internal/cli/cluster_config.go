package cli

// `cluster config` (Kafka's `kafka-configs.sh --entity-type brokers`): describes and
// alters the dynamic broker configs (KIP-226) of the cluster-wide default (BROKER
// resource "") or of one node (its id).

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClusterConfigCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("config", "Describe and alter dynamic broker configs, cluster-wide or per broker",
		`Describe and alter the broker properties that may change at run time (KIP-226, as
kafka-configs.sh --entity-type brokers): those that are a topic config's default, such
as log.retention.ms, message.max.bytes or min.insync.replicas (docs/config.md lists
them). A broker's value is its own dynamic one, else the cluster-wide dynamic default,
else its static one (server.properties), else Kafka's default.`)
	cmd.AddCommand(newClusterConfigDescribeCmd(g), newClusterConfigSetCmd(g))
	return cmd
}

// brokerTarget is the BROKER config resource --broker N or --default names.
type brokerTarget struct {
	broker       int32
	isDefault    bool
	brokerChosen bool
}

func (t *brokerTarget) flags(cmd *cobra.Command) {
	cmd.Flags().Int32Var(&t.broker, "broker", 0, "the node id of the broker (or --default)")
	cmd.Flags().BoolVar(&t.isDefault, "default", false, "the cluster-wide default of every broker (or --broker N)")
}

// check requires exactly one of --broker and --default, as kafka-configs.sh requires
// --entity-name or --entity-default.
func (t *brokerTarget) check(cmd *cobra.Command) error {
	t.brokerChosen = cmd.Flags().Changed("broker")
	switch {
	case t.brokerChosen == t.isDefault:
		return usagef("give one of --broker N (one broker's configs) or --default (the cluster-wide default)")
	case t.brokerChosen && t.broker < 0:
		return usagef("--broker %d: broker ids are 0 or more", t.broker)
	}
	return nil
}

// known checks that the broker chosen is in the cluster's metadata: the client sends
// a BROKER resource to the broker it names, and would only say "unknown broker".
func (t *brokerTarget) known(ctx context.Context, g *globals, adm *kadm.Client) error {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return g.explain("read cluster metadata", err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == t.broker {
			return nil
		}
	}
	return fmt.Errorf("broker %d is not in the cluster; `samsa cluster info` lists the brokers", t.broker)
}

// knownTo is known with a client of its own.
func (t *brokerTarget) knownTo(cmd *cobra.Command, g *globals) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	return t.known(ctx, g, adm)
}

// resourceName is the BROKER resource's name: the node id, or "" for the default.
func (t *brokerTarget) resourceName() string {
	if t.isDefault {
		return ""
	}
	return strconv.Itoa(int(t.broker))
}

func (t *brokerTarget) String() string {
	if t.isDefault {
		return "the cluster-wide broker default"
	}
	return fmt.Sprintf("broker %d", t.broker)
}

// brokerConfigs is the JSON result of `cluster config describe`.
type brokerConfigs struct {
	// Broker is the node described, null for the cluster-wide default.
	Broker  *int32        `json:"broker"`
	Configs []configEntry `json:"configs"`
}

func newClusterConfigDescribeCmd(g *globals) *cobra.Command {
	var target brokerTarget
	var all bool
	cmd := &cobra.Command{
		Use:   "describe (--broker N | --default) [--all]",
		Short: "List the dynamic broker configs set, or every property of a broker",
		Long: `List the broker configs set at run time. With --default: the cluster-wide defaults
set (source DYNAMIC_DEFAULT_BROKER_CONFIG). With --broker N: those that apply to broker N,
its own (DYNAMIC_BROKER_CONFIG) and the cluster-wide defaults it does not override; with
--all, every property of broker N with its value and where it comes from (static ones
STATIC_BROKER_CONFIG, Kafka's defaults DEFAULT_CONFIG). One of --broker and --default is
required, as kafka-configs.sh requires --entity-name or --entity-default.`,
		Example: `  samsa cluster config describe --default
  samsa cluster config describe --broker 1
  samsa cluster config describe --broker 1 --all -o json | jq '.configs[] | select(.name=="log.retention.ms")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := target.check(cmd); err != nil {
				return err
			}
			return runClusterConfigDescribe(cmd, g, &target, all)
		},
	}
	target.flags(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list every property of the broker, static and default ones included")
	return cmd
}

func runClusterConfigDescribe(cmd *cobra.Command, g *globals, target *brokerTarget, all bool) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	var brokers []int32 // none: the cluster-wide default
	if target.brokerChosen {
		if err := target.known(ctx, g, adm); err != nil {
			return err
		}
		brokers = []int32{target.broker}
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers...)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = oneResource(rcs); err == nil {
			err = withBrokerMessage(rc.Err, rc.ErrMessage)
			rcs = kadm.ResourceConfigs{rc}
		}
	}
	if err != nil {
		return g.explain("describe the configs of "+target.String(), err)
	}
	res := brokerConfigs{Configs: []configEntry{}}
	if target.brokerChosen {
		res.Broker = ptr(target.broker)
	}
	for _, c := range rcs[0].Configs {
		dynamic := c.Source == kmsg.ConfigSourceDynamicBrokerConfig || c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		if all || dynamic {
			res.Configs = append(res.Configs, configEntry{Name: c.Key, Value: c.Value, Source: configSource(c.Source), Sensitive: c.Sensitive})
		}
	}
	sort.Slice(res.Configs, func(i, j int) bool { return res.Configs[i].Name < res.Configs[j].Name })
	return g.newOutput(cmd).render(res, func(w io.Writer) {
		if len(res.Configs) == 0 {
			fmt.Fprintf(w, "no dynamic configs apply to %s (--all lists every property of a broker)\n", target)
			return
		}
		configTable(w, res.Configs)
	})
}

func newClusterConfigSetCmd(g *globals) *cobra.Command {
	var target brokerTarget
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "set (--broker N | --default) --set key=value... --delete key...",
		Short: "Set or remove dynamic broker configs, cluster-wide or on one broker",
		Long: `Change broker configs at run time (IncrementalAlterConfigs on the BROKER resource,
as kafka-configs.sh --entity-type brokers --alter): --default changes the cluster-wide
default of every broker, --broker N broker N's own value, which wins over the default.
--set sets a property, --delete removes the value so the cluster default (for a broker)
or the static value applies again. One of --broker and --default is required. Only the
properties that are a topic config's default may change (docs/config.md); the broker
refuses any other, such as listeners, with INVALID_REQUEST.`,
		Example: `  samsa cluster config set --default --set log.retention.ms=86400000
  samsa cluster config set --broker 2 --set message.max.bytes=2097152 --delete log.segment.bytes`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := target.check(cmd); err != nil {
				return err
			}
			ops, err := alterOps(sets, deletes)
			if err != nil {
				return err
			}
			res := configsAltered{ClusterDefault: target.isDefault}
			if target.brokerChosen {
				if err := target.knownTo(cmd, g); err != nil {
					return err
				}
				res.Broker = ptr(target.broker)
			}
			return runIncrementalAlter(cmd, g, kmsg.ConfigResourceTypeBroker, target.resourceName(), res, target.String(), ops)
		},
	}
	target.flags(cmd)
	cmd.Flags().StringArrayVar(&sets, "set", nil, "broker config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "broker config key to remove (repeatable)")
	return cmd
}
