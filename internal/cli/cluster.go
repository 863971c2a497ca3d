package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClusterCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("cluster", "Inspect the cluster, elect leaders, move partitions, unregister brokers, alter broker configs",
		"Inspect the brokers and the metadata quorum of the cluster, run preferred leader elections, move partitions between brokers, unregister decommissioned brokers and describe or alter dynamic broker configs.")
	cmd.AddCommand(newClusterInfoCmd(g), newClusterElectLeadersCmd(g), newClusterReassignCmd(g), newClusterReassignmentsCmd(g),
		newClusterUnregisterCmd(g), newClusterConfigCmd(g))
	return cmd
}

// clusterInfo is the JSON result of `cluster info`.
type clusterInfo struct {
	ClusterID    string       `json:"cluster_id"`
	ControllerID int32        `json:"controller_id"`
	Brokers      []brokerInfo `json:"brokers"`
	// Quorum is the metadata quorum (DescribeQuorum), nil when the cluster does not
	// answer it (ZooKeeper-based Kafka).
	Quorum *quorumInfo `json:"quorum"`
}

// quorumInfo is the metadata quorum as the active controller describes it.
type quorumInfo struct {
	LeaderID      int32         `json:"leader_id"`
	LeaderEpoch   int32         `json:"leader_epoch"`
	HighWatermark int64         `json:"high_watermark"`
	Voters        []replicaInfo `json:"voters"`
	Observers     []replicaInfo `json:"observers"`
	Error         string        `json:"error,omitempty"`
}

type replicaInfo struct {
	NodeID       int32 `json:"node_id"`
	LogEndOffset int64 `json:"log_end_offset"`
	// Lag is the high watermark minus the replica's log end offset (0 when ahead).
	Lag int64 `json:"lag"`
	// LastFetchMs and LastCaughtUpMs are how long ago the leader heard from the
	// replica and last saw it caught up, null when unknown (and for the leader).
	LastFetchMs    *int64 `json:"last_fetch_ms_ago"`
	LastCaughtUpMs *int64 `json:"last_caught_up_ms_ago"`
}

type brokerInfo struct {
	NodeID      int32        `json:"node_id"`
	Host        string       `json:"host"`
	Port        int32        `json:"port"`
	Rack        *string      `json:"rack"`
	APIVersions []apiVersion `json:"api_versions"`
	Error       string       `json:"error,omitempty"`
}

type apiVersion struct {
	Key        int16  `json:"key"`
	Name       string `json:"name"`
	MinVersion int16  `json:"min_version"`
	MaxVersion int16  `json:"max_version"`
}

func newClusterInfoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show brokers and racks, the controller, the metadata quorum, the cluster id and the API versions served",
		Example: `  samsa cluster info
  samsa cluster info -o json | jq '.quorum.voters'
  samsa cluster info -o json | jq '.brokers[0].api_versions[] | select(.name=="Fetch")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.newClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			md, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return g.explain("read cluster metadata", err)
			}
			versions, err := adm.ApiVersions(ctx)
			if err != nil && len(versions) == 0 {
				return g.explain("read API versions", err)
			}
			info := buildClusterInfo(md, versions)
			info.Quorum = describeQuorum(ctx, cl)
			return renderClusterInfo(g.newOutput(cmd), info)
		},
	}
}

func buildClusterInfo(md kadm.Metadata, versions kadm.BrokersApiVersions) clusterInfo {
	info := clusterInfo{ClusterID: md.Cluster, ControllerID: md.Controller, Brokers: []brokerInfo{}}
	for _, b := range md.Brokers {
		bi := brokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, APIVersions: []apiVersion{}}
		v, ok := versions[b.NodeID]
		switch {
		case !ok:
			bi.Error = "no ApiVersions answer"
		case v.Err != nil:
			bi.Error = v.Err.Error()
		default:
			v.EachKeySorted(func(key, minV, maxV int16) {
				bi.APIVersions = append(bi.APIVersions, apiVersion{Key: key, Name: kmsg.NameForKey(key), MinVersion: minV, MaxVersion: maxV})
			})
		}
		info.Brokers = append(info.Brokers, bi)
	}
	return info
}

// describeQuorum asks the cluster for its metadata quorum; nil when the cluster does
// not serve DescribeQuorum.
func describeQuorum(ctx context.Context, cl *kgo.Client) *quorumInfo {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) || errors.Is(err, kerr.UnsupportedVersion) {
			return nil
		}
		return &quorumInfo{LeaderID: -1, Error: err.Error()}
	}
	q := &quorumInfo{LeaderID: -1, Voters: []replicaInfo{}, Observers: []replicaInfo{}}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		q.Error = err.Error()
		return q
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		q.Error = "unexpected DescribeQuorum answer"
		return q
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		q.Error = err.Error()
		return q
	}
	q.LeaderID, q.LeaderEpoch, q.HighWatermark = p.LeaderID, p.LeaderEpoch, p.HighWatermark
	now := time.Now().UnixMilli()
	ago := func(ts int64) *int64 {
		if ts < 0 {
			return nil
		}
		d := max(now-ts, 0)
		return &d
	}
	conv := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []replicaInfo {
		out := []replicaInfo{}
		for _, r := range rs {
			out = append(out, replicaInfo{
				NodeID: r.ReplicaID, LogEndOffset: r.LogEndOffset, Lag: max(p.HighWatermark-r.LogEndOffset, 0),
				LastFetchMs: ago(r.LastFetchTimestamp), LastCaughtUpMs: ago(r.LastCaughtUpTimestamp),
			})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
		return out
	}
	q.Voters, q.Observers = conv(p.CurrentVoters), conv(p.Observers)
	return q
}

func renderClusterInfo(o *output, info clusterInfo) error {
	return o.render(info, func(w io.Writer) {
		fmt.Fprintf(w, "Cluster ID:  %s\n", orDash(info.ClusterID))
		controller := fmt.Sprint(info.ControllerID)
		if info.ControllerID < 0 {
			controller = "unknown"
		}
		fmt.Fprintf(w, "Controller:  %s\n\n", controller)
		t := newTable(w, "NODE", "HOST", "PORT", "RACK")
		for _, b := range info.Brokers {
			rack := "-"
			if b.Rack != nil {
				rack = *b.Rack
			}
			t.row(b.NodeID, b.Host, b.Port, rack)
		}
		t.flush()
		renderQuorum(w, info.Quorum)
		for _, b := range info.Brokers {
			fmt.Fprintf(w, "\nAPI versions served by node %d:\n", b.NodeID)
			if b.Error != "" {
				fmt.Fprintf(w, "  n/a (%s)\n", b.Error)
				continue
			}
			t := newTable(w, "API", "KEY", "MIN", "MAX")
			for _, v := range b.APIVersions {
				t.row(v.Name, v.Key, v.MinVersion, v.MaxVersion)
			}
			t.flush()
		}
	})
}

func renderQuorum(w io.Writer, q *quorumInfo) {
	if q == nil {
		fmt.Fprintf(w, "\nMetadata quorum: not described by this cluster\n")
		return
	}
	if q.Error != "" {
		fmt.Fprintf(w, "\nMetadata quorum: %s\n", q.Error)
		return
	}
	fmt.Fprintf(w, "\nMetadata quorum: leader %d, epoch %d, high watermark %d\n", q.LeaderID, q.LeaderEpoch, q.HighWatermark)
	ms := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return (time.Duration(*v) * time.Millisecond).String() + " ago"
	}
	t := newTable(w, "NODE", "ROLE", "LOG-END", "LAG", "LAST-FETCH", "LAST-CAUGHT-UP")
	for _, r := range q.Voters {
		role := "voter"
		if r.NodeID == q.LeaderID {
			role = "leader"
		}
		t.row(r.NodeID, role, r.LogEndOffset, r.Lag, ms(r.LastFetchMs), ms(r.LastCaughtUpMs))
	}
	for _, r := range q.Observers {
		t.row(r.NodeID, "observer", r.LogEndOffset, r.Lag, ms(r.LastFetchMs), "-")
	}
	t.flush()
}
