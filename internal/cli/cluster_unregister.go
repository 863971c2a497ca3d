package cli

// `cluster unregister` (Kafka's `kafka-cluster.sh unregister`): removes a decommissioned
// broker's registration with UnregisterBroker (API 64), which kadm does not wrap.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unregistered is the JSON result of `cluster unregister`.
type unregistered struct {
	BrokerID int32 `json:"broker_id"`
	// Partitions still naming the broker as a replica (they stay under-replicated
	// until reassigned), as "topic-partition".
	Replicas []string `json:"partitions_with_replicas"`
}

func newClusterUnregisterCmd(g *globals) *cobra.Command {
	var id int32
	cmd := &cobra.Command{
		Use:   "unregister --id N",
		Short: "Remove a decommissioned broker from the cluster",
		Long: `Remove a broker's registration (UnregisterBroker, as kafka-cluster.sh unregister):
it leaves every ISR and its leaderships move, as when it is fenced, and it is no longer
listed. Decommission a broker in this order: reassign its partitions to the other
brokers (cluster reassign --wait), stop it, then unregister it. A broker that still
runs registers again at its next heartbeat. Needs ALTER on the cluster.`,
		Example: `  samsa cluster unregister --id 4`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("id") {
				return usagef("give the broker to unregister with --id")
			}
			if id < 0 {
				return usagef("--id %d: broker ids are 0 or more", id)
			}
			return runUnregister(cmd, g, id)
		},
	}
	cmd.Flags().Int32VarP(&id, "id", "i", -1, "the node id of the broker to unregister")
	return cmd
}

func runUnregister(cmd *cobra.Command, g *globals, id int32) error {
	cl, adm, ctx, done, err := g.adminClient(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	what := fmt.Sprintf("unregister broker %d", id)
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return g.explain(what, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if errors.Is(err, kerr.BrokerIDNotRegistered) {
			return &brokerError{code: kerr.BrokerIDNotRegistered, msg: fmt.Sprintf("broker %d is not registered; `samsa cluster info` lists the brokers", id)}
		}
		var msg string
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return g.explain(what, withBrokerMessage(err, msg))
	}
	res := unregistered{BrokerID: id, Replicas: []string{}}
	if md, err := adm.Metadata(ctx); err == nil {
		for _, t := range md.Topics.Sorted() {
			for _, p := range t.Partitions.Sorted() {
				if slices.Contains(p.Replicas, id) {
					res.Replicas = append(res.Replicas, fmt.Sprintf("%s-%d", t.Topic, p.Partition))
				}
			}
		}
	}
	return g.newOutput(cmd).render(res, func(w io.Writer) {
		fmt.Fprintf(w, "broker %d is no longer registered\n", id)
		if n := len(res.Replicas); n > 0 {
			fmt.Fprintf(w, "it is still a replica of %s, under-replicated until reassigned (`samsa cluster reassign`): %s\n",
				plural(n, "partition"), summarize(res.Replicas, 10))
		}
	})
}

// summarize joins up to n items and says how many more there are.
func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
