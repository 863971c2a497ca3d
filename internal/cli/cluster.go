package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClusterCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("cluster", "Inspect the cluster", "Inspect the brokers of the cluster.")
	cmd.AddCommand(newClusterInfoCmd(g))
	return cmd
}

// clusterInfo is the JSON result of `cluster info`.
type clusterInfo struct {
	ClusterID    string       `json:"cluster_id"`
	ControllerID int32        `json:"controller_id"`
	Brokers      []brokerInfo `json:"brokers"`
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
		Short: "Show brokers, the controller, the cluster id and the API versions served",
		Example: `  samsa cluster info
  samsa cluster info -o json | jq '.brokers[0].api_versions[] | select(.name=="Fetch")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			md, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return g.explain("read cluster metadata", err)
			}
			versions, err := adm.ApiVersions(ctx)
			if err != nil && len(versions) == 0 {
				return g.explain("read API versions", err)
			}
			return renderClusterInfo(g.newOutput(cmd), buildClusterInfo(md, versions))
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
