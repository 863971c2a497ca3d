package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group configs (KIP-848, KIP-932) are GROUP resources of IncrementalAlterConfigs and
// DescribeConfigs; kadm wraps those for topics and brokers only.

func newGroupAlterConfigCmd(g *globals) *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config GROUP",
		Short: "Set or remove a group's configs (session timeout, heartbeat interval, share.*)",
		Long: `Change a KIP-848 consumer group's or a share group's configuration incrementally
(IncrementalAlterConfigs on the GROUP resource): --set overrides a group config, --delete
removes the override so the broker's default applies. The group need not exist yet.
docs/config.md lists the group configs and the broker properties that bound them.`,
		Example: `  samsa group alter-config billing --set consumer.session.timeout.ms=20000
  samsa group alter-config jobs --set share.auto.offset.reset=earliest --delete share.record.lock.duration.ms`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			ops, err := alterOps(sets, deletes)
			if err != nil {
				return err
			}
			return runGroupAlterConfig(cmd, g, a[0], ops)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "group config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "group config key to remove (repeatable)")
	return cmd
}

func runGroupAlterConfig(cmd *cobra.Command, g *globals, group string, ops []kadm.AlterConfig) error {
	return runIncrementalAlter(cmd, g, kmsg.ConfigResourceTypeGroupConfig, group,
		configsAltered{Group: group}, "group "+strconv.Quote(group), ops)
}

// runIncrementalAlter applies ops to one config resource with IncrementalAlterConfigs
// and reports them: res is the JSON result naming the resource, what names it in the
// text ("group \"billing\""). Shared by `group alter-config` and `cluster config set`.
func runIncrementalAlter(cmd *cobra.Command, g *globals, typ kmsg.ConfigResourceType, name string,
	res configsAltered, what string, ops []kadm.AlterConfig) error {
	cl, _, ctx, done, err := g.adminClient(cmd.Context())
	if err != nil {
		return err
	}
	defer done()

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = typ, name
	for _, op := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = op.Name, op.Value, kmsg.IncrementalAlterConfigOp(op.Op)
		resource.Configs = append(resource.Configs, c)
	}
	req.Resources = append(req.Resources, resource)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		var r kmsg.IncrementalAlterConfigsResponseResource
		if r, err = oneResource(resp.Resources); err == nil {
			err = codeError(r.ErrorCode, r.ErrorMessage)
		}
	}
	if err != nil {
		return g.explain("alter configs of "+what, err)
	}
	return renderAltered(g.newOutput(cmd), res, what, ops)
}

// oneResource is the answer for the one config resource asked about.
func oneResource[T any](answered []T) (T, error) {
	if len(answered) != 1 {
		var zero T
		return zero, fmt.Errorf("the broker answered for %d config resources, not 1", len(answered))
	}
	return answered[0], nil
}

// codeError is the error a broker answered with (nil for none), with its message.
func codeError(code int16, msg *string) error {
	var text string
	if msg != nil {
		text = *msg
	}
	return withBrokerMessage(kerr.ErrorForCode(code), text)
}

// groupConfigs describes a group's configs, sorted by name.
func groupConfigs(ctx context.Context, cl *kgo.Client, group string) ([]configEntry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	r, err := oneResource(resp.Resources)
	if err == nil {
		err = codeError(r.ErrorCode, r.ErrorMessage)
	}
	if err != nil {
		return nil, err
	}
	out := []configEntry{}
	for _, c := range r.Configs {
		out = append(out, configEntry{Name: c.Name, Value: c.Value, Source: configSource(c.Source), Sensitive: c.IsSensitive})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
